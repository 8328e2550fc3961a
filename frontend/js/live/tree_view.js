/*
 * LEGO.TreeView: the FusionTree drawn live with Plotly (scattergl).
 * A classic script (not an ES module); needs the global Plotly and LEGO.RunModel.
 *
 *   var view = new LEGO.TreeView(containerElement, model, {onSelect: function (nodeId) {...}});
 *   view.update();        // after applying events: cheap when model.version is unchanged
 *   view.select(nodeId);  // highlight a node (null clears)
 *   view.redraw();        // draw now, synchronously; returns the milliseconds it took
 *   view.position(nodeId) // {x, y} of a node in data coordinates, or null
 *   view.drawn()          // [{id, label, labelled, folded, working, marked, agent}] of the nodes drawn
 *   view.click(nodeId)    // what a click on a node does (unfold/fold, select)
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
 *
 * Live (issue 32): while the run goes, what folds is what the search has
 * left behind (a subtree whose work is over, a reused node's subtree, an
 * untaken decomposition), not what it has not reached: the tree's top
 * levels are drawn from the start, down to the depth that fits FOLD_BUDGET.
 * The frontier is always drawn with its ancestors: the nodes agents work on
 * (ringed in the agent colour, "agent: name" above them) and the newest
 * nodes (the last FRESH_EVENTS events' node_created: construction as it
 * goes). A node is labelled when its subtree has room on screen (its drawn
 * leaves' span times the leaf spacing >= LABEL_PX), or when an agent works
 * on it, or when it is selected. A node the user unfolds stays drawn and
 * unfolded (its ancestors pinned) while events arrive. Never more than
 * NODE_BOUND nodes are drawn: a deeper fold depth is taken until they fit.
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
  var FOLD_RING = "#1d2330"; // a folded node: a dark ring, "+N" in its label
  var LABEL_PX = 56; // leaf spacing on screen from which nodes get labels
  var LIVE_LABEL_PX = 48; // ... while the run goes (the live drawing opens the tree for that room: 7 characters)
  var FOLD_BUDGET = 110; // nodes drawn by default, at most (+ the way to running nodes)
  var NODE_BOUND = 160; // never more nodes drawn than this (readability), frontier and unfolds included
  var FRESH_EVENTS = 12; // nodes made in the last this many events are the construction frontier
  var AGENT_COLOR = "#e69f00"; // the ring and label of a node an agent works on (the running colour)

  /* A node's short name: the last part of its module path and class
     ("attn_norm (RMSNorm)"), its ops ("pow, mean, add"), or an AND's kind. */
  function nodeLabel(node) {
    var label = String(node.label || node.id);
    if (node.kind === "and") return label.split(":")[0];
    var dot = label.indexOf(" \u00b7 ");
    if (dot >= 0) return label.slice(dot + 3);
    var path = node.modulePath || "";
    if (path && label.indexOf(path) === 0) {
      var cut = path.lastIndexOf(".");
      return cut >= 0 ? label.slice(cut + 1) : label;
    }
    return label;
  }

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

  // milliseconds, as everywhere on the page (LEGO.formatMs, run_model.js)
  function fmtMs(ms) {
    return LEGO.formatMs(ms);
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
    this._open = new Set(); // unfolded by a click
    this._shut = new Set(); // folded by a click
    this._pinned = new Set(); // shown by reveal() (search, the time view)
    this.fold = options.fold !== false; // fold by default (options.fold false: draw every node)
    this._folds = 0; // bumped by every fold, unfold or pin: part of the redraw key
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
  TreeView.NODE_BOUND = NODE_BOUND;
  TreeView.FOLD_BUDGET = FOLD_BUDGET;

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
      if (s === "chosen") {
        item.firstChild.nextSibling.textContent = "in the plan: sub-problems ";
        self._pathNote = el("span", "tree-path-note note", "");
        item.appendChild(document.createTextNode(" "));
        item.appendChild(self._pathNote);
      }
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

    var bar = el("div", "tree-toolbar");
    var form = el("form", "tree-search");
    form.setAttribute("role", "search");
    this.searchInput = document.createElement("input");
    this.searchInput.type = "search";
    this.searchInput.id = "tree-search";
    this.searchInput.placeholder = "Find a module or op: layers.0.attn_norm, mm";
    this.searchInput.setAttribute("aria-label", "Find a node by module path or op");
    var go = el("button", "small secondary", "Find");
    go.type = "submit";
    this.searchNote = el("span", "tree-search-note note", "");
    form.appendChild(this.searchInput);
    form.appendChild(go);
    form.appendChild(this.searchNote);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      self.search(self.searchInput.value);
    });
    bar.appendChild(form);
    var fold = el("button", "small secondary tree-fold-reset", "Fold all back");
    fold.type = "button";
    fold.addEventListener("click", function () {
      self._open.clear();
      self._shut.clear();
      self._pinned.clear();
      self._folds++;
      self._schedule();
    });
    bar.appendChild(fold);
    c.appendChild(bar);
    this.hint = el("p", "tree-hint",
      "Scroll to zoom (labels appear when there is room), drag to pan, double-click to reset. " +
      "Click a node to see it in the panel; a ringed node has folded children (+N): click it to unfold, click it again to fold.");
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
    return this.model.version + "|" + this.selected + "|" + this.showShared + "|" + this._folds;
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

  /* Which nodes are drawn (a Uint8Array aligned with model.order) and how
     many nodes each drawn one folds away (hidden[i]), O(n). Folded by
     default: subtrees nobody worked on (every node pending/unexplored),
     a reused node's subtree, a decomposition the plan did not take (once a
     plan better than the library's exists; the way to a running node stays
     drawn) and layout-only leaves (views, permutes: free). A click
     unfolds (this._open), a click on the selected unfolded node folds it
     again (this._shut); reveal() pins a node and its ancestors. Still
     more than FOLD_BUDGET nodes drawn without the user's unfolds: every
     node at one depth (this.foldDepth) folds its children too. */
  TreeView.prototype.visibility = function (nodes) {
    var model = this.model;
    var index = this._index;
    var n = nodes.length;
    var pre = [];
    var stack = [];
    for (var r = 0; r < n; r++) {
      if (nodes[r].parent && model.nodes.has(nodes[r].parent)) continue;
      stack.push(r);
      while (stack.length) {
        var i = stack.pop();
        pre.push(i);
        var kids = nodes[i].children;
        for (var k = kids.length - 1; k >= 0; k--) {
          var c = index.get(kids[k]);
          if (c !== undefined) stack.push(c);
        }
      }
    }
    // busy: work happened in the subtree (or, while the run goes, is still to
    // come: pending is not reached yet, not left behind); hot: the frontier
    // (a running node or, live, a node made in the last FRESH_EVENTS events)
    // is in it; open: a pending or running node is in it (work not over)
    var live = !model.ended;
    var freshFrom = model.lastSeq - FRESH_EVENTS;
    var busy = new Uint8Array(n), hot = new Uint8Array(n), open = new Uint8Array(n), size = new Uint32Array(n);
    for (var q = pre.length - 1; q >= 0; q--) {
      var a = pre[q], node = nodes[a];
      var outcome = node.outcome || node.state; // without the plan's "chosen" on top
      var waiting = outcome === "pending" || outcome === "running";
      if ((node.state !== "pending" && node.state !== "unexplored") || (live && outcome === "pending")) busy[a] = 1;
      if (outcome === "running" || node._running || (live && node.bornSeq > freshFrom)) hot[a] = 1;
      if (waiting) open[a] = 1;
      size[a] += 1;
      var p = node.parent == null ? undefined : index.get(node.parent);
      if (p !== undefined) {
        busy[p] |= busy[a];
        hot[p] |= hot[a];
        open[p] |= open[a];
        size[p] += size[a];
      }
    }
    var realPlan = !!(model.plan && !model.plan.initial);
    var self = this;
    // one pass over the tree (pre-order): which nodes are drawn; user: with
    // the user's unfolds and pins; cap: nodes at that depth or deeper fold
    function pass(user, cap) {
      var visible = new Uint8Array(n), hidden = new Uint32Array(n);
      for (var v = 0; v < pre.length; v++) {
        var j = pre[v], nd = nodes[j];
        var p2 = nd.parent == null ? undefined : index.get(nd.parent);
        if (p2 === undefined) visible[j] = 1;
        if (!visible[j]) continue;
        var unfolded = (user && self._open.has(nd.id)) || !self.fold;
        var shut = user && self._shut.has(nd.id);
        // left behind while live: a subtree whose work is over (nothing pending or running in it)
        var behind = live && !open[j] && nd.children.length > 0 && nd.state !== "chosen";
        var folded = !unfolded && (shut || nd.reused || nd.depth >= cap || behind ||
          (realPlan && nd.kind === "and" && nd.state !== "chosen")) && self.fold;
        for (var m = 0; m < nd.children.length; m++) {
          var ci = index.get(nd.children[m]);
          if (ci === undefined) continue;
          var kid = nodes[ci];
          // in a folded node, only the way to the frontier stays drawn
          var show = (user && self._pinned.has(kid.id)) || (folded ? hot[ci] && !shut : unfolded ||
            (busy[ci] && !(kid.regionKind === "layout" && !kid.children.length)));
          if (show) visible[ci] = 1;
          else hidden[j] += size[ci];
        }
      }
      return { visible: visible, hidden: hidden };
    }
    // live: breadth first from the root, a node's children drawn while every
    // drawn leaf keeps room for its label and FOLD_BUDGET holds (a wide flat
    // decomposition stays folded, "+N", while the module hierarchy opens);
    // then the way to the frontier and the user's unfolds on top
    function breadthFirst(maxLeaves, budget) {
      var visible = new Uint8Array(n), hidden = new Uint32Array(n);
      var queue = [], drawnCount = 0, leafCount = 0;
      for (var r2 = 0; r2 < pre.length; r2++) {
        var j0 = pre[r2], nd0 = nodes[j0];
        var p0 = nd0.parent == null ? undefined : index.get(nd0.parent);
        if (p0 === undefined) {
          visible[j0] = 1;
          queue.push(j0);
          drawnCount++;
          leafCount++;
        }
      }
      function showable(j) { // children a drawn node would show when open
        var nd = nodes[j], out = [];
        if (self._shut.has(nd.id)) return out;
        var forced = self._open.has(nd.id);
        var behind = !open[j] && nd.children.length > 0 && nd.state !== "chosen";
        // (an untaken decomposition the search still works in is not left behind)
        if (!forced && (nd.reused || behind)) return out;
        for (var m = 0; m < nd.children.length; m++) {
          var ci = index.get(nd.children[m]);
          if (ci === undefined) continue;
          var kid = nodes[ci];
          if (forced || (busy[ci] && !(kid.regionKind === "layout" && !kid.children.length))) out.push(ci);
        }
        return out;
      }
      for (var h = 0; h < queue.length; h++) {
        var j = queue[h], kids = showable(j);
        if (!kids.length) continue;
        var forcedOpen = self._open.has(nodes[j].id);
        if (!forcedOpen && (leafCount + kids.length - 1 > maxLeaves || drawnCount + kids.length > budget)) continue;
        for (var k = 0; k < kids.length; k++) {
          visible[kids[k]] = 1;
          queue.push(kids[k]);
        }
        drawnCount += kids.length;
        leafCount += kids.length - 1;
      }
      // the way to the frontier and to pinned nodes, through folded nodes,
      // and the children of the user's unfolds (pre-order: parents first)
      for (var v = 0; v < pre.length; v++) {
        var j2 = pre[v];
        if (!visible[j2]) continue;
        var nd2 = nodes[j2];
        if (self._open.has(nd2.id)) {
          var opened = showable(j2);
          for (var o = 0; o < opened.length; o++) visible[opened[o]] = 1;
        }
        for (var m2 = 0; m2 < nd2.children.length; m2++) {
          var c2 = index.get(nd2.children[m2]);
          if (c2 === undefined || visible[c2]) continue;
          if ((hot[c2] && !self._shut.has(nd2.id)) || self._pinned.has(nodes[c2].id)) visible[c2] = 1;
        }
      }
      for (var v2 = 0; v2 < pre.length; v2++) {
        var j3 = pre[v2];
        if (!visible[j3]) continue;
        var nd3 = nodes[j3];
        for (var m3 = 0; m3 < nd3.children.length; m3++) {
          var c3 = index.get(nd3.children[m3]);
          if (c3 !== undefined && !visible[c3]) hidden[j3] += size[c3];
        }
      }
      return { visible: visible, hidden: hidden };
    }
    function count(vis) {
      var c = 0;
      for (var w2 = 0; w2 < n; w2++) c += vis.visible[w2];
      return c;
    }
    if (live && this.fold) {
      this.foldDepth = null;
      var room = Math.max(8, Math.floor(Math.max(600, (this.plot.clientWidth || 0) - 20) / LIVE_LABEL_PX));
      var budget = FOLD_BUDGET, drawing = breadthFirst(room, budget), over = count(drawing) - NODE_BOUND;
      while (over > 0 && budget > 10) { // the frontier or an unfold took more room: open less elsewhere
        budget = Math.max(10, budget - over);
        room = Math.max(2, room - over);
        drawing = breadthFirst(room, budget);
        over = count(drawing) - NODE_BOUND;
      }
      return drawing;
    }
    // still more than FOLD_BUDGET nodes (the plan's own path is ~180 in a
    // tiny llama run): fold one level more, at the deepest depth whose
    // nodes and those above it fit the budget (the fine-grained regions and
    // fusion groups fold into their parents; a click unfolds them)
    var cap = Infinity;
    if (this.fold) {
      var base = pass(false, Infinity), perDepth = [], total = 0;
      for (var w = 0; w < n; w++) {
        if (!base.visible[w]) continue;
        total++;
        perDepth[nodes[w].depth] = (perDepth[nodes[w].depth] || 0) + 1;
      }
      if (total > FOLD_BUDGET) {
        var sum = 0;
        for (cap = 0; cap < perDepth.length; cap++) {
          sum += perDepth[cap] || 0;
          if (sum > FOLD_BUDGET) break;
        }
        cap = Math.max(1, cap - 1);
      }
    }
    var result = pass(true, cap);
    // the frontier and the user's unfolds come on top: fold shallower until
    // the drawing fits NODE_BOUND (a user's unfold itself always stays)
    while (this.fold && cap > 1 && count(result) > NODE_BOUND) {
      if (cap === Infinity) cap = perDepth.length;
      cap--;
      result = pass(true, cap);
    }
    this.foldDepth = cap;
    return result;
  };

  /* x and y of every node (arrays aligned with model.order; NaN when not
     drawn), O(n), over the nodes visibility() leaves drawn. */
  TreeView.prototype.layout = function () {
    this._indexNodes();
    var model = this.model;
    var order = model.order;
    var n = order.length;
    var xs = new Float64Array(n).fill(NaN);
    var ys = new Float64Array(n).fill(NaN);
    var lo = new Float64Array(n).fill(NaN), hi = new Float64Array(n).fill(NaN); // drawn leaves' x span
    var nodes = new Array(n);
    for (var i = 0; i < n; i++) nodes[i] = model.nodes.get(order[i]);
    var vis = this.visibility(nodes);
    var visible = vis.visible;
    var index = this._index;
    var leaf = 0;
    var stackIdx = [];
    var stackPos = [];
    var stackFirst = [];
    var stackLast = [];
    for (var r = 0; r < n; r++) {
      var root = nodes[r];
      if (!visible[r] || (root.parent && model.nodes.has(root.parent))) continue;
      stackIdx.push(r);
      stackPos.push(0);
      stackFirst.push(-1);
      stackLast.push(-1);
      while (stackIdx.length) {
        var top = stackIdx.length - 1;
        var idx = stackIdx[top];
        var node = nodes[idx];
        var pos = stackPos[top];
        var kids = node.children;
        if (pos < kids.length) {
          stackPos[top] = pos + 1;
          var k = index.get(kids[pos]);
          if (k !== undefined && visible[k]) {
            if (stackFirst[top] < 0) stackFirst[top] = k;
            stackLast[top] = k;
            stackIdx.push(k);
            stackPos.push(0);
            stackFirst.push(-1);
            stackLast.push(-1);
          }
          continue;
        }
        var first = stackFirst[top];
        var last = stackLast[top];
        stackIdx.pop();
        stackPos.pop();
        stackFirst.pop();
        stackLast.pop();
        ys[idx] = -node.depth;
        if (first < 0) {
          xs[idx] = lo[idx] = hi[idx] = leaf++;
        } else {
          xs[idx] = (xs[first] + xs[last]) / 2;
          lo[idx] = lo[first];
          hi[idx] = hi[last];
        }
      }
    }
    return { xs: xs, ys: ys, lo: lo, hi: hi, nodes: nodes, visible: visible, hidden: vis.hidden };
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

  /* Where a node is drawn, in data coordinates ({x, y}), or null (not
     drawn: folded away). */
  TreeView.prototype.position = function (nodeId) {
    var lay = this.layout();
    var i = this._index.get(String(nodeId));
    return i === undefined || !lay.visible[i] ? null : { x: lay.xs[i], y: lay.ys[i] };
  };

  /* On-screen px between neighbouring leaves (one x unit) at this zoom. */
  TreeView.prototype.leafSpacingPx = function () {
    var ext = this._extent;
    if (!ext) return 0;
    var ax = (this.plot.layout || {}).xaxis;
    var span = ax && ax.autorange === false && Array.isArray(ax.range) ? Math.abs(ax.range[1] - ax.range[0]) : ext.maxX - ext.minX + 1;
    return Math.max(50, (this.plot.clientWidth || 600) - 20) / Math.max(span, 1e-9);
  };

  /* Nodes matching a query, best first: the OR node of that exact module
     path, then labels and module paths containing it, then ops. */
  TreeView.prototype.find = function (query) {
    var q = String(query || "").trim().toLowerCase();
    if (!q) return [];
    var exact = [], named = [], byOp = [];
    var order = this.model.order;
    for (var i = 0; i < order.length; i++) {
      var n = this.model.nodes.get(order[i]);
      var path = (n.modulePath || "").toLowerCase();
      var label = (n.label || "").toLowerCase();
      if (n.kind === "or" && path === q && label.indexOf(" \u00b7 ") < 0) exact.push(n);
      else if (label.indexOf(q) >= 0 || path.indexOf(q) >= 0 || n.id === q) named.push(n);
      else if (n.kind === "or" && n.ops.some(function (o) { return o.toLowerCase().indexOf(q) >= 0; })) byOp.push(n);
    }
    var byDepth = function (a, b) { return a.depth - b.depth; };
    return exact.sort(byDepth).concat(named.sort(byDepth), byOp.sort(byDepth)).map(function (n) { return n.id; });
  };

  /* The search box: the next match on each Enter of the same query. */
  TreeView.prototype.search = function (query) {
    var hits = this.find(query);
    if (this._lastQuery !== query) this._hit = -1;
    this._lastQuery = query;
    if (!hits.length) {
      this.searchNote.textContent = "no node matches \u201c" + query + "\u201d";
      return null;
    }
    this._hit = (this._hit + 1) % hits.length;
    var id = hits[this._hit];
    this.searchNote.textContent = (this._hit + 1) + " of " + hits.length;
    this.reveal(id);
    if (this.onSelect) this.onSelect(id);
    return id;
  };

  /* Show a node (unfolding its ancestors), select it and bring it into view. */
  TreeView.prototype.reveal = function (nodeId) {
    var id = String(nodeId);
    var n = this.model.nodes.get(id);
    if (!n) return;
    for (var a = n; a; a = a.parent ? this.model.nodes.get(a.parent) : null) this._pinned.add(a.id);
    this._folds++;
    this.selected = id;
    this.redraw();
    var at = this.position(id);
    if (at && typeof Plotly !== "undefined" && this.plot.layout) {
      Plotly.relayout(this.plot, { "xaxis.range": [at.x - 6, at.x + 6], "yaxis.range": [at.y - 2.5, at.y + 1.5] });
    }
  };

  /* The nodes of the last drawing: [{id, label, labelled (a label is
     drawn), folded (nodes it folds away), working (an agent works on it),
     marked (ringed with its agent), agent}]. */
  TreeView.prototype.drawn = function () {
    return (this._drawnList || []).slice();
  };

  /* What a click on a node does: unfold or fold it (toggle), select it and
     tell options.onSelect. */
  TreeView.prototype.click = function (nodeId) {
    var id = String(nodeId);
    this.toggle(id);
    this.select(id);
    if (this.onSelect) this.onSelect(id);
  };

  /* A click on a node: unfold it when it folds children away (it and its
     ancestors stay drawn while the tree changes: pinned), fold it when it
     is the selected node and shows them. */
  TreeView.prototype.toggle = function (nodeId) {
    var id = String(nodeId);
    var lay = this._lay;
    var i = this._index.get(id);
    var n = this.model.nodes.get(id);
    if (!lay || i === undefined || !n || !n.children.length) return;
    if (lay.hidden[i]) {
      this._open.add(id);
      this._shut.delete(id);
      for (var a = n; a; a = a.parent ? this.model.nodes.get(a.parent) : null) this._pinned.add(a.id);
    } else if (this.selected === id) {
      this._shut.add(id);
      this._open.delete(id);
      for (var k = 0; k < n.children.length; k++) this._pinned.delete(n.children[k]);
    } else return;
    this._folds++;
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

    var visible = lay.visible;
    var hidden = lay.hidden;
    var ex = [];
    var ey = [];
    var px = [];
    var py = [];
    var sx = [];
    var sy = [];
    function bucket() { return { x: [], y: [], ids: [], text: [], labels: [], color: [] }; }
    // this drawing's extent first: the leaf spacing (labels, marker size) follows from it
    var minX = Infinity, maxX = -Infinity, minY = Infinity, maxY = -Infinity, any = 0;
    for (var e = 0; e < n; e++) {
      if (!visible[e]) continue;
      any = 1;
      if (xs[e] < minX) minX = xs[e];
      if (xs[e] > maxX) maxX = xs[e];
      if (ys[e] < minY) minY = ys[e];
      if (ys[e] > maxY) maxY = ys[e];
    }
    this._extent = any ? { minX: minX, maxX: maxX, minY: minY, maxY: maxY } : null;
    // labels where the node's drawn subtree has room, on the frontier and on the selected node
    var spacing = this.leafSpacingPx();
    var agentX = [], agentY = [], agentIds = [], agentText = [];
    var newest = model.order.length ? model.order[model.order.length - 1] : null; // the construction point
    var drawnList = [];
    var orPlain = bucket(), orReused = bucket(), and = bucket(), orFolded = bucket(), andFolded = bucket();
    var counts = {};
    LEGO.RunModel.STATES.forEach(function (s) { counts[s] = 0; });
    var drawn = 0;
    var selX = [];
    var selY = [];
    var sel = this.selected;
    var selNode = sel == null ? null : model.nodes.get(sel);
    var selIdx = selNode ? index.get(sel) : undefined;

    for (var i = 0; i < n; i++) {
      var node = nodes[i];
      counts[node.state] = (counts[node.state] || 0) + 1;
      if (!visible[i]) continue;
      drawn++;
      var x = xs[i];
      var y = ys[i];
      var p = node.parent == null ? undefined : index.get(node.parent);
      if (p !== undefined) {
        // the plan's path: an edge between two nodes in the plan
        var onPath = node.state === "chosen" && nodes[p].state === "chosen";
        (onPath ? px : ex).push(xs[p], x, null);
        (onPath ? py : ey).push(ys[p], y, null);
      }
      if (i === selIdx) {
        selX.push(x);
        selY.push(y);
      }
      var folds = hidden[i];
      var b = folds ? (node.kind === "and" ? andFolded : orFolded) : node.kind === "and" ? and : node.reused ? orReused : orPlain;
      b.x.push(x);
      b.y.push(y);
      b.ids.push(node.id);
      b.text.push(this._hoverCached(node) + (folds ? "<br><i>" + folds + " node" + (folds === 1 ? "" : "s") + " folded: click to unfold</i>" : ""));
      var working = node.state === "running" || (node.kind === "or" && node._running);
      var room = (lay.hi[i] - lay.lo[i] + 1) * spacing;
      var labelled = room >= (model.ended ? LABEL_PX : LIVE_LABEL_PX) || working || i === selIdx || (!model.ended && node.id === newest);
      var label = nodeLabel(node) + (folds ? " +" + folds : "");
      b.labels.push(labelled ? short(label, Math.max(7, Math.floor(room / 6.5))) : "");
      if (working) {
        agentX.push(x);
        agentY.push(y);
        agentIds.push(node.id);
        agentText.push("agent: " + (node.agent || "?"));
      }
      drawnList.push({ id: node.id, label: label, labelled: labelled, folded: folds, working: working, marked: working, agent: working ? node.agent || "" : "" });
      b.color.push(COLORS[node.state] || COLORS.pending);
      if (node.kind === "and" && node.shared.length && (this.showShared || i === selIdx || (selNode && selNode.kind === "or"))) {
        for (var j = 0; j < node.shared.length; j++) {
          // all of them, or those of the selected AND, or those to the selected OR
          if (!this.showShared && i !== selIdx && node.shared[j] !== sel) continue;
          var q = index.get(node.shared[j]);
          if (q === undefined || !visible[q]) continue;
          sx.push(x, xs[q], null);
          sy.push(y, ys[q], null);
        }
      }
    }

    var size = this.markerSize();
    var andSize = Math.max(3, Math.round(size * 0.7 * 2) / 2);
    // the reused ring: thin, and none on markers too small to show it and
    // their state colour (hover still says "reused from")
    var ring = size >= 7 ? 1.5 : size >= 5 ? 1 : 0;

    var type = this.traceType;
    // every leaf labelled once a leaf's spacing on screen has room for a few words
    var withLabels = spacing >= LABEL_PX;
    this.labelsShown = withLabels;
    function nodeTrace(name, b, symbol, size, line) {
      return {
        type: type, mode: "markers+text", name: name, x: b.x, y: b.y, customdata: b.ids,
        hovertext: b.text, hovertemplate: "%{hovertext}<extra></extra>",
        text: b.labels,
        textposition: "bottom center", textfont: { size: 11, color: "#1d2330" },
        marker: { symbol: symbol, size: size, color: b.color, line: line },
        showlegend: false,
      };
    }
    var foldRing = { width: 2.5, color: FOLD_RING };
    var traces = [
      {
        type: type, mode: "lines", name: "edges", x: ex, y: ey, hoverinfo: "skip",
        line: { color: EDGE_COLOR, width: 1 }, showlegend: false,
      },
      {
        type: type, mode: "lines", name: "shared edges", x: sx, y: sy, hoverinfo: "skip",
        line: { color: SHARED_COLOR, width: 1, dash: "dash" }, showlegend: false,
      },
      {
        type: type, mode: "lines", name: "plan path", x: px, y: py, hoverinfo: "skip",
        line: { color: COLORS.chosen, width: 2.5 }, showlegend: false,
      },
      nodeTrace("OR nodes", orPlain, "circle", size, { width: 0 }),
      nodeTrace("reused OR nodes", orReused, "circle", size, { width: ring, color: REUSED_RING }),
      nodeTrace("AND nodes", and, "diamond", andSize, { width: 0 }),
      nodeTrace("folded OR nodes", orFolded, "circle", size + 2, foldRing),
      nodeTrace("folded AND nodes", andFolded, "diamond", andSize + 2, foldRing),
      {
        // the nodes agents work on: a ring in the agent colour, the agent's name above
        type: type, mode: "markers+text", name: "agents at work", x: agentX, y: agentY, customdata: agentIds, hoverinfo: "skip",
        text: agentText, textposition: "top center", textfont: { size: 11, color: "#8a5a00" },
        marker: { symbol: "circle-open", size: size + 8, color: AGENT_COLOR, line: { width: 3, color: AGENT_COLOR } },
        showlegend: false,
      },
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
    // "in the plan": its sub-problems, the header's count; the nodes on its path apart
    var items = model.computeItems().length;
    this._counts.chosen.textContent = String(items);
    this._pathNote.textContent = counts.chosen ? "(" + counts.chosen + " nodes on its path)" : "";
    // "pending" while the run goes, "not explored" once it ended (RunModel)
    this._legendItems.pending.hidden = !!model.ended && !counts.pending;
    this._legendItems.unexplored.hidden = !model.ended && !counts.unexplored;
    this._drawnSize = size;
    this._drawnSpacing = spacing;
    this._stats.textContent = drawn + " of " + n + " nodes shown";
    this.drawnNodes = drawn;
    this._drawnList = drawnList;
    this._empty.style.display = n ? "none" : "";
    this._lay = lay;
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
      // labels follow the room on screen: redraw when the spacing changed by a sixth
      var spacing = self.leafSpacingPx();
      if (self.markerSize() !== self._drawnSize || Math.abs(spacing - (self._drawnSpacing || 0)) > spacing / 6) {
        self._drawnKey = null;
        self._schedule();
      }
    });
    this.plot.on("plotly_click", function (ev) {
      var pts = (ev && ev.points) || [];
      for (var i = 0; i < pts.length; i++) {
        var id = pts[i].customdata;
        if (id == null) continue;
        self.click(id);
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
