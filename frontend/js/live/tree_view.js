/*
 * LEGO.TreeView: the FusionTree drawn live with Plotly (scattergl).
 * A classic script (not an ES module); needs the global Plotly and LEGO.RunModel.
 *
 *   var view = new LEGO.TreeView(containerElement, model, {onSelect: function (nodeId) {...}});
 *   view.update();        // after applying events: cheap when model.version is unchanged
 *   view.select(nodeId);  // highlight a node (null clears)
 *   view.redraw();        // draw now, synchronously; returns the milliseconds it took
 *   view.position(nodeId) // {x, y} of a node in data coordinates, or null
 *   view.destroy()        // Plotly.purge and stop listening
 *   view.lastDrawMs, view.draws, view.plot (the Plotly graph div)
 *
 * A "lego:select-node" event on the document (NodePanel's node links send
 * one) selects that node here too; a click on a node selects it and calls
 * options.onSelect(nodeId).
 *
 * Layout: a top-down tidy tree computed in O(n) per redraw: leaves one unit
 * apart along x in creation order, every parent centred over its first and
 * last child, y = -depth (the root on top). Redraws are coalesced: update()
 * only marks the view dirty and at most one redraw runs per minIntervalMs
 * (250 ms, so at most 4 per second), in a requestAnimationFrame callback.
 * Traces, in this order: "edges" (all tree edges, x/y with null
 * separators), "shared edges" (dashed: a mutation AND to the OR nodes it
 * shares from other decompositions; only the selected node's unless the
 * legend's checkbox, or options.showShared, asks for all: a mutation AND
 * shares the whole rest of the plan, ~170 nodes each in a llama run), "OR
 * nodes" (circles), "reused OR nodes" (circles with a thin dark-slate ring),
 * "AND nodes" (smaller diamonds), "selected" (a ring). Node points carry
 * customdata = node id. Marker size follows the zoom (markerSize(): 0.8 of
 * the leaves' on-screen spacing, 4 to 10 px, recomputed on plotly_relayout),
 * so a dense tree is not a pile of overlapping discs and Plotly's click
 * (nearest centre) picks the node drawn under the cursor; a hint above the
 * plot says how to zoom, pan and reset. Colours by state (COLORS); the legend shows "pending" while the run
 * goes and "not explored" (RunModel's unexplored) once it ended.
 * layout.uirevision is constant and no axis range is ever set, so the
 * user's zoom and pan survive updates. Without WebGL it falls back to
 * "scatter" (SVG, slower).
 */
(function () {
  "use strict";
  var LEGO = (window.LEGO = window.LEGO || {});

  // Okabe-Ito based: distinguishable with the common colour-vision deficiencies.
  var COLORS = {
    pending: "#b8bec6",
    running: "#e69f00",
    verified: "#009e73",
    failed: "#d55e00",
    library: "#56677a",
    chosen: "#7b3fb5",
    unexplored: "#d3d8de",
  };
  var STATE_TEXT = {
    pending: "pending",
    unexplored: "not explored",
    running: "running",
    verified: "verified",
    failed: "failed",
    library: "library (no kernel)",
    chosen: "in the plan",
  };
  var EDGE_COLOR = "#aab2bd";
  var SHARED_COLOR = "rgba(123, 63, 181, 0.45)";
  var REUSED_RING = "#3b4350"; // dark slate, thin: the state colour stays visible
  var MAX_SIZE = 10; // OR marker diameter in px when there is room
  var MIN_SIZE = 4; // ... and when leaves are packed tighter than that
  var SELECT_COLOR = "#111111";

  function esc(s) {
    return String(s == null ? "" : s)
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;");
  }

  function short(s, max) {
    s = String(s == null ? "" : s);
    return s.length > max ? s.slice(0, max - 1) + "\u2026" : s;
  }

  function fmtMs(ms) {
    if (ms === null || ms === undefined) return "?";
    if (ms === 0) return "0 ms";
    if (ms < 0.01) return (ms * 1000).toPrecision(3) + " \u00b5s";
    return ms.toPrecision(3) + " ms";
  }

  function webglAvailable() {
    try {
      var c = document.createElement("canvas");
      return !!(window.WebGLRenderingContext && (c.getContext("webgl") || c.getContext("experimental-webgl")));
    } catch (e) {
      return false;
    }
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  function TreeView(container, model, options) {
    options = options || {};
    this.container = container;
    this.model = model;
    this.onSelect = options.onSelect || null;
    this.minIntervalMs = options.minIntervalMs == null ? 250 : options.minIntervalMs;
    this.selected = null;
    this.showShared = !!options.showShared; // all shared edges, not only the selected node's
    this.traceType = options.traceType || (webglAvailable() ? "scattergl" : "scatter");
    this.lastDrawMs = null; // how long the last redraw took (layout + Plotly.react)
    this.draws = 0;
    this._drawnKey = null;
    this._scheduled = false;
    this._lastDrawAt = 0;
    this._index = new Map(); // node id -> position in model.order
    this._indexed = 0;
    this._hoverCache = new Map();
    this._build();
    // node links in a LEGO.NodePanel announce themselves: follow them here too
    var self = this;
    this._onSelectEvent = function (ev) {
      var id = ev && ev.detail ? ev.detail.nodeId : null;
      if (id != null && self.model.nodes.has(String(id))) self.select(id);
    };
    document.addEventListener("lego:select-node", this._onSelectEvent);
  }

  TreeView.COLORS = COLORS;

  TreeView.prototype._build = function () {
    var self = this;
    var c = this.container;
    c.classList.add("tree-view");
    while (c.firstChild) c.removeChild(c.firstChild);

    var legend = el("div", "tree-legend");
    this._counts = {};
    this._legendItems = {};
    LEGO.RunModel.STATES.forEach(function (s) {
      var item = el("span", "tree-legend-item tree-legend-" + s);
      self._legendItems[s] = item;
      var sw = el("i", "tree-swatch");
      sw.style.background = COLORS[s];
      item.appendChild(sw);
      item.appendChild(document.createTextNode(STATE_TEXT[s] + " "));
      var count = el("span", "tree-legend-count", "0");
      item.appendChild(count);
      self._counts[s] = count;
      legend.appendChild(item);
    });
    var shapes = [
      ["tree-shape-or", "OR: sub-problem"],
      ["tree-shape-and", "AND: decomposition"],
      ["tree-shape-reused", "reused result (dedupe/cache)"],
    ];
    shapes.forEach(function (p) {
      var item = el("span", "tree-legend-item");
      item.appendChild(el("i", "tree-shape " + p[0]));
      item.appendChild(document.createTextNode(p[1]));
      legend.appendChild(item);
    });
    var toggle = el("label", "tree-legend-item tree-shared-toggle");
    var box = document.createElement("input");
    box.type = "checkbox";
    box.checked = this.showShared;
    box.addEventListener("change", function () {
      self.showShared = box.checked;
      self._drawnKey = null;
      self._schedule();
    });
    toggle.appendChild(box);
    toggle.appendChild(el("i", "tree-line-shared"));
    toggle.appendChild(document.createTextNode("shared OR of a mutation AND (selected node's; tick for all)"));
    legend.appendChild(toggle);
    this._stats = el("span", "tree-stats");
    legend.appendChild(this._stats);
    c.appendChild(legend);

    this.hint = el("p", "tree-hint", "Scroll to zoom, drag to pan, double-click to reset; click a node to see it in the panel.");
    c.appendChild(this.hint);
    this.plot = el("div", "tree-plot");
    c.appendChild(this.plot);
    this._empty = el("div", "tree-empty", "The FusionTree appears here once the run builds it.");
    c.appendChild(this._empty);
  };

  /* Call after applying events: schedules a redraw when something changed. */
  TreeView.prototype.update = function () {
    if (this._key() !== this._drawnKey) this._schedule();
  };

  TreeView.prototype.select = function (nodeId) {
    this.selected = nodeId == null ? null : String(nodeId);
    this._schedule();
  };

  TreeView.prototype._key = function () {
    return this.model.version + "|" + this.selected + "|" + this.showShared;
  };

  TreeView.prototype._schedule = function () {
    if (this._scheduled) return;
    this._scheduled = true;
    var self = this;
    var wait = Math.max(0, this._lastDrawAt + this.minIntervalMs - Date.now());
    var run = function () {
      var raf = window.requestAnimationFrame || function (f) { return setTimeout(f, 16); };
      raf(function () {
        self._scheduled = false;
        if (self._key() !== self._drawnKey) self.redraw();
      });
    };
    if (wait > 0) setTimeout(run, wait);
    else run();
  };

  TreeView.prototype._indexNodes = function () {
    var order = this.model.order;
    for (; this._indexed < order.length; this._indexed++) this._index.set(order[this._indexed], this._indexed);
  };

  /* x and y of every node (arrays aligned with model.order), O(n). */
  TreeView.prototype.layout = function () {
    this._indexNodes();
    var model = this.model;
    var order = model.order;
    var n = order.length;
    var xs = new Float64Array(n);
    var ys = new Float64Array(n);
    var nodes = new Array(n);
    for (var i = 0; i < n; i++) nodes[i] = model.nodes.get(order[i]);
    var index = this._index;
    var leaf = 0;
    var stackIdx = [];
    var stackPos = [];
    for (var r = 0; r < n; r++) {
      var root = nodes[r];
      if (root.parent && model.nodes.has(root.parent)) continue;
      stackIdx.push(r);
      stackPos.push(0);
      while (stackIdx.length) {
        var top = stackIdx.length - 1;
        var idx = stackIdx[top];
        var node = nodes[idx];
        var pos = stackPos[top];
        var kids = node.children;
        if (pos < kids.length) {
          stackPos[top] = pos + 1;
          var k = index.get(kids[pos]);
          if (k !== undefined) {
            stackIdx.push(k);
            stackPos.push(0);
          }
          continue;
        }
        stackIdx.pop();
        stackPos.pop();
        ys[idx] = -node.depth;
        var first = kids.length ? index.get(kids[0]) : undefined;
        var last = kids.length ? index.get(kids[kids.length - 1]) : undefined;
        if (first === undefined || last === undefined) xs[idx] = leaf++;
        else xs[idx] = (xs[first] + xs[last]) / 2;
      }
    }
    return { xs: xs, ys: ys, nodes: nodes };
  };

  /* OR marker diameter in px for the current zoom: 0.8 of the on-screen
     spacing of neighbouring leaves (one x unit), between MIN_SIZE and
     MAX_SIZE, so markers do not pile up when zoomed out and the point under
     the cursor is the one a click picks. Uses the user's axis ranges when
     they zoomed, else the tree's extent (autorange). */
  TreeView.prototype.markerSize = function () {
    var ext = this._extent;
    if (!ext) return MAX_SIZE;
    var gd = this.plot;
    var lay = gd.layout || {};
    function span(ax, lo, hi) {
      if (ax && ax.autorange === false && Array.isArray(ax.range)) return Math.abs(ax.range[1] - ax.range[0]);
      return hi - lo + 1; // autorange pads about half a unit on each side
    }
    var xSpan = Math.max(span(lay.xaxis, ext.minX, ext.maxX), 1e-9);
    var ySpan = Math.max(span(lay.yaxis, ext.minY, ext.maxY), 1e-9);
    var w = Math.max(50, (gd.clientWidth || 600) - 20); // margins: 10 px each side
    var h = Math.max(50, (gd.clientHeight || 360) - 20);
    var size = Math.min((0.8 * w) / xSpan, (0.5 * h) / ySpan);
    return Math.max(MIN_SIZE, Math.min(MAX_SIZE, Math.round(size * 2) / 2));
  };

  /* Where a node is drawn, in data coordinates ({x, y}), or null. */
  TreeView.prototype.position = function (nodeId) {
    var lay = this.layout();
    var i = this._index.get(String(nodeId));
    return i === undefined ? null : { x: lay.xs[i], y: lay.ys[i] };
  };

  TreeView.prototype._hover = function (node) {
    var model = this.model;
    var lines = ["<b>" + esc(short(node.label || node.id, 80)) + "</b>"];
    lines.push(esc(node.id) + " \u00b7 " + (node.kind === "and" ? "AND" : "OR") + " \u00b7 " + esc(STATE_TEXT[node.state] || node.state));
    if (node.kind === "or") {
      lines.push(node.ops.length + " op" + (node.ops.length === 1 ? "" : "s"));
      var best = model.bestImplementation(node.id);
      if (best.ms !== null) {
        lines.push("best: " + fmtMs(best.ms) + " (" + best.implementation + (best.measured ? ", measured" : ", estimated") + ")");
      }
      if (node.library && best.implementation !== "library") lines.push("library: " + fmtMs(node.library.ms));
      if (node.reused) lines.push("reused from " + esc(node.reusedFrom || "?") + (node.reusedVia ? " (" + esc(node.reusedVia) + ")" : ""));
    } else {
      lines.push(node.children.length + " part" + (node.children.length === 1 ? "" : "s") + (node.shared.length ? " + " + node.shared.length + " shared" : ""));
    }
    return lines.join("<br>");
  };

  TreeView.prototype._hoverCached = function (node) {
    var src = node.reused ? this.model.sourceOf(node) : null;
    var key = node.rev + node.state + (src ? ":" + src.rev : "") + (node.kind === "and" ? ":" + node.children.length : "");
    var hit = this._hoverCache.get(node.id);
    if (hit && hit[0] === key) return hit[1];
    var text = this._hover(node);
    this._hoverCache.set(node.id, [key, text]);
    return text;
  };

  /* Draw now. Returns the time it took in milliseconds. */
  TreeView.prototype.redraw = function () {
    var t0 = performance.now();
    var model = this.model;
    var key = this._key();
    var lay = this.layout();
    var xs = lay.xs;
    var ys = lay.ys;
    var nodes = lay.nodes;
    var n = nodes.length;
    var index = this._index;

    var ex = [];
    var ey = [];
    var sx = [];
    var sy = [];
    var orPlain = { x: [], y: [], ids: [], text: [], color: [] };
    var orReused = { x: [], y: [], ids: [], text: [], color: [] };
    var and = { x: [], y: [], ids: [], text: [], color: [] };
    var counts = {};
    LEGO.RunModel.STATES.forEach(function (s) { counts[s] = 0; });
    var selX = [];
    var selY = [];
    var sel = this.selected;
    var selNode = sel == null ? null : model.nodes.get(sel);
    var selIdx = selNode ? index.get(sel) : undefined;

    for (var i = 0; i < n; i++) {
      var node = nodes[i];
      var x = xs[i];
      var y = ys[i];
      var p = node.parent == null ? undefined : index.get(node.parent);
      if (p !== undefined) {
        ex.push(xs[p], x, null);
        ey.push(ys[p], y, null);
      }
      counts[node.state] = (counts[node.state] || 0) + 1;
      if (i === selIdx) {
        selX.push(x);
        selY.push(y);
      }
      var bucket = node.kind === "and" ? and : node.reused ? orReused : orPlain;
      bucket.x.push(x);
      bucket.y.push(y);
      bucket.ids.push(node.id);
      bucket.text.push(this._hoverCached(node));
      bucket.color.push(COLORS[node.state] || COLORS.pending);
      if (node.kind === "and" && node.shared.length && (this.showShared || i === selIdx || (selNode && selNode.kind === "or"))) {
        for (var j = 0; j < node.shared.length; j++) {
          // all of them, or those of the selected AND, or those to the selected OR
          if (!this.showShared && i !== selIdx && node.shared[j] !== sel) continue;
          var q = index.get(node.shared[j]);
          if (q === undefined) continue;
          sx.push(x, xs[q], null);
          sy.push(y, ys[q], null);
        }
      }
    }

    var minX = Infinity, maxX = -Infinity, minY = Infinity, maxY = -Infinity;
    for (var e = 0; e < n; e++) {
      if (xs[e] < minX) minX = xs[e];
      if (xs[e] > maxX) maxX = xs[e];
      if (ys[e] < minY) minY = ys[e];
      if (ys[e] > maxY) maxY = ys[e];
    }
    this._extent = n ? { minX: minX, maxX: maxX, minY: minY, maxY: maxY } : null;
    var size = this.markerSize();
    var andSize = Math.max(3, Math.round(size * 0.7 * 2) / 2);
    // the reused ring: thin, and none on markers too small to show it and
    // their state colour (hover still says "reused from")
    var ring = size >= 7 ? 1.5 : size >= 5 ? 1 : 0;

    var type = this.traceType;
    function nodeTrace(name, b, symbol, size, line) {
      return {
        type: type, mode: "markers", name: name, x: b.x, y: b.y, customdata: b.ids,
        text: b.text, hovertemplate: "%{text}<extra></extra>",
        marker: { symbol: symbol, size: size, color: b.color, line: line },
        showlegend: false,
      };
    }
    var traces = [
      {
        type: type, mode: "lines", name: "edges", x: ex, y: ey, hoverinfo: "skip",
        line: { color: EDGE_COLOR, width: 1 }, showlegend: false,
      },
      {
        type: type, mode: "lines", name: "shared edges", x: sx, y: sy, hoverinfo: "skip",
        line: { color: SHARED_COLOR, width: 1, dash: "dash" }, showlegend: false,
      },
      nodeTrace("OR nodes", orPlain, "circle", size, { width: 0 }),
      nodeTrace("reused OR nodes", orReused, "circle", size, { width: ring, color: REUSED_RING }),
      nodeTrace("AND nodes", and, "diamond", andSize, { width: 0 }),
      {
        type: type, mode: "markers", name: "selected", x: selX, y: selY, hoverinfo: "skip",
        marker: { symbol: "circle-open", size: size + 10, color: SELECT_COLOR, line: { width: size >= 7 ? 3 : 2, color: SELECT_COLOR } },
        showlegend: false,
      },
    ];
    var layout = {
      uirevision: "fusion-tree",
      datarevision: key,
      showlegend: false,
      hovermode: "closest",
      dragmode: "pan",
      margin: { l: 10, r: 10, t: 10, b: 10 },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      xaxis: { visible: false, showgrid: false, zeroline: false },
      yaxis: { visible: false, showgrid: false, zeroline: false },
      hoverlabel: { align: "left" },
    };
    var config = {
      displaylogo: false,
      scrollZoom: true,
      responsive: true,
      modeBarButtonsToRemove: ["select2d", "lasso2d", "toImage"],
    };
    var result = Plotly.react(this.plot, traces, layout, config);
    this._attach();

    for (var s in this._counts) this._counts[s].textContent = String(counts[s] || 0);
    // "pending" while the run goes, "not explored" once it ended (RunModel)
    this._legendItems.pending.hidden = !!model.ended && !counts.pending;
    this._legendItems.unexplored.hidden = !model.ended && !counts.unexplored;
    this._drawnSize = size;
    this._stats.textContent = n + " nodes";
    this._empty.style.display = n ? "none" : "";
    this._drawnKey = key;
    this._lastDrawAt = Date.now();
    this.draws++;
    this.lastDrawMs = performance.now() - t0;
    this.lastResult = result;
    return this.lastDrawMs;
  };

  TreeView.prototype._attach = function () {
    if (this._attached || typeof this.plot.on !== "function") return;
    this._attached = true;
    var self = this;
    // zoomed or resized: markers sized for the new spacing
    this.plot.on("plotly_relayout", function () {
      if (self.markerSize() !== self._drawnSize) {
        self._drawnKey = null;
        self._schedule();
      }
    });
    this.plot.on("plotly_click", function (ev) {
      var pts = (ev && ev.points) || [];
      for (var i = 0; i < pts.length; i++) {
        var id = pts[i].customdata;
        if (id == null) continue;
        self.select(id);
        if (self.onSelect) self.onSelect(String(id));
        return;
      }
    });
  };

  TreeView.prototype.destroy = function () {
    document.removeEventListener("lego:select-node", this._onSelectEvent);
    if (typeof Plotly !== "undefined") Plotly.purge(this.plot);
  };

  LEGO.TreeView = TreeView;
})();
