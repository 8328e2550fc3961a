/*
 * LEGO.TimeView: "where the time goes", a Plotly icicle of the plan's compute
 * sub-problems in the model's module hierarchy. A classic script (not an ES
 * module); needs the global Plotly and LEGO.RunModel.
 *
 *   var view = new LEGO.TimeView(containerElement, model, {onSelect: function (nodeId) {...}});
 *   view.update();   // after applying events (throttled; cheap when nothing changed)
 *   view.redraw();   // draw now
 *   view.boxes()     // [{nodeId, valueMs, speedup, colour}] of the sub-problem boxes drawn
 *
 * One leaf box per compute sub-problem of the latest plan (RunModel.computeItems(),
 * the report's "sub-problems"), under one box per module of its module path
 * ("layers" > "layers.0" > "layers.0.attn"). A box's size is its library
 * (baseline) time, a module's the sum of its sub-problems'. Colour: log2 of the speedup (baseline / chosen time) on a
 * diverging scale centred on 1x: red slower, white the same, blue faster,
 * clipped at 4x either way; a module's colour is its sub-problems' summed
 * baseline over their summed chosen time. The hover names the chosen
 * implementation (generated Triton kernel or library) and whether the times
 * were measured or estimated by the cost model. A click on a sub-problem box
 * selects its node (options.onSelect); a click on a module zooms into it
 * (Plotly's own icicle click). It fills in as timings arrive: a sub-problem
 * appears once its baseline time is known, and from the moment the tree
 * exists (before any plan) the model's starting partition is drawn from the
 * cost model's estimates (RunModel.chosenItems). A box whose times are
 * estimated, not measured, is hatched (view.boxes()[i].estimated).
 */
(function () {
  "use strict";
  var LEGO = (window.LEGO = window.LEGO || {});

  var THROTTLE_MS = 300;
  var CLIP = 2; // log2: 4x slower .. 4x faster
  // diverging, colour-vision safe (ColorBrewer RdBu): slower red, same white, faster blue
  var SCALE = [
    [0, "#b2182b"], [0.25, "#ef8a62"], [0.45, "#fddbc7"], [0.5, "#f7f7f7"],
    [0.55, "#d1e5f0"], [0.75, "#67a9cf"], [1, "#2166ac"],
  ];
  var ROOT = "model";

  function esc(s) {
    return String(s == null ? "" : s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // milliseconds, as everywhere on the page (LEGO.formatMs, run_model.js)
  function fmtMs(ms) {
    return LEGO.formatMs(ms);
  }

  function fmtX(x) {
    return x === null || !isFinite(x) ? "?" : x.toFixed(2) + "\u00d7";
  }

  function colourOf(speedup) {
    if (speedup === null || !isFinite(speedup) || speedup <= 0) return 0;
    return Math.max(-CLIP, Math.min(CLIP, Math.log(speedup) / Math.LN2));
  }

  /* The colour SCALE gives a speedup (colourOf's log2 value), as "#rrggbb":
     the boxes carry their colours themselves (Plotly's hatch pattern draws
     over a numeric colorscale's fill in black). */
  function colourHex(v) {
    var t = (Math.max(-CLIP, Math.min(CLIP, v)) + CLIP) / (2 * CLIP);
    for (var i = 1; i < SCALE.length; i++) {
      if (t > SCALE[i][0] && i < SCALE.length - 1) continue;
      var a = SCALE[i - 1], b = SCALE[i], f = b[0] > a[0] ? (t - a[0]) / (b[0] - a[0]) : 0;
      var out = "#";
      for (var k = 1; k < 7; k += 2) {
        var x = Math.round(parseInt(a[1].substr(k, 2), 16) * (1 - f) + parseInt(b[1].substr(k, 2), 16) * f);
        out += (x < 16 ? "0" : "") + x.toString(16);
      }
      return out;
    }
    return SCALE[SCALE.length - 1][1];
  }

  function TimeView(container, model, options) {
    options = options || {};
    this.container = container;
    this.model = model;
    this.onSelect = options.onSelect || null;
    this._drawnVersion = -1;
    this._timer = null;
    this._boxes = [];
    container.classList.add("time-view");
    while (container.firstChild) container.removeChild(container.firstChild);
    this.legend = document.createElement("p");
    this.legend.className = "time-legend note";
    this.legend.innerHTML =
      'Each box is a sub-problem of the plan, sized by its library time, grouped by module. ' +
      '<span class="time-swatch time-slower"></span> slower than the library ' +
      '<span class="time-swatch time-same"></span> the same ' +
      '<span class="time-swatch time-faster"></span> faster; <span class="time-swatch time-estimated"></span> hatched: ' +
      'the cost model\'s estimate, not measured yet. Click a box to see it in the tree; click a module to zoom in.';
    container.appendChild(this.legend);
    this.plot = document.createElement("div");
    this.plot.className = "time-plot";
    container.appendChild(this.plot);
    this.empty = document.createElement("p");
    this.empty.className = "empty time-empty";
    this.empty.textContent = "The model's sub-problems appear here as soon as the FusionTree is built.";
    container.appendChild(this.empty);
  }

  TimeView.prototype.update = function () {
    if (this.model.version === this._drawnVersion || this._timer) return;
    var self = this;
    this._timer = setTimeout(function () {
      self._timer = null;
      self.redraw();
    }, THROTTLE_MS);
  };

  TimeView.prototype.boxes = function () {
    return this._boxes.slice();
  };

  /* The icicle's ids, parents, values, colours and hovers from the plan. */
  TimeView.prototype.build = function () {
    var items = this.model.viewItems();
    var ids = [ROOT], labels = ["model"], parents = [""], up = [-1], values = [0], chosen = [0];
    var kinds = ["module"], nodeIds = [""], texts = [""], hatch = [""];
    var at = new Map([[ROOT, 0]]);
    var boxes = [];
    function group(path) {
      if (!path) return 0;
      var key = "m:" + path;
      if (at.has(key)) return at.get(key);
      var dot = path.lastIndexOf(".");
      var parent = group(dot < 0 ? "" : path.slice(0, dot));
      at.set(key, ids.length);
      ids.push(key);
      labels.push(dot < 0 ? path : path.slice(dot + 1));
      parents.push(ids[parent]);
      up.push(parent);
      values.push(0);
      chosen.push(0);
      kinds.push("module");
      nodeIds.push("");
      texts.push(path);
      hatch.push("");
      return at.get(key);
    }
    // a sub-problem the cost model prices at 0 ms still gets a (thin) box
    var floor = 0;
    for (var f = 0; f < items.length; f++) floor = Math.max(floor, (items[f].baselineMs || 0) * 1e-3);
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      if (it.baselineMs === null) continue; // not timed yet
      if (!(floor > 0)) break;
      var parent = group(it.modulePath);
      var chosenMs = it.chosenMs === null ? it.baselineMs : it.chosenMs;
      var speedup = chosenMs > 0 ? it.baselineMs / chosenMs : null;
      var ops = it.opNames.map(function (o) { return o.replace(/^aten\./, "").replace(/\.default$/, ""); });
      ids.push("n:" + it.id);
      labels.push(shortLabel(it));
      parents.push(ids[parent]);
      up.push(parent);
      values.push(Math.max(it.baselineMs, floor));
      chosen.push(it.baselineMs > 0 ? chosenMs : floor); // a 0 ms box counts as "the same"
      kinds.push("item");
      nodeIds.push(it.id);
      hatch.push(it.measured ? "" : "/");
      texts.push(
        esc(it.label) + "<br>" +
        (it.implementation === "triton" ? "generated Triton kernel" : "library (PyTorch eager)") +
        ": " + fmtMs(chosenMs) + " vs library " + fmtMs(it.baselineMs) + " \u2192 " + fmtX(speedup) +
        "<br>" + (it.measured ? "measured" : "estimated by the cost model") +
        "<br>" + esc(ops.slice(0, 6).join(", ") + (ops.length > 6 ? ", \u2026" : ""))
      );
      boxes.push({ nodeId: it.id, valueMs: it.baselineMs, size: values[values.length - 1], chosenMs: chosenMs, speedup: speedup, colour: colourOf(speedup), estimated: !it.measured });
      // a module's totals: its sub-problems' sums
      for (var p = parent; p >= 0; p = up[p]) {
        values[p] += values[values.length - 1];
        chosen[p] += chosen[chosen.length - 1];
      }
    }
    var colours = [];
    for (var k = 0; k < ids.length; k++) {
      colours.push(colourOf(chosen[k] > 0 ? values[k] / chosen[k] : null));
      if (kinds[k] === "module") {
        texts[k] = "<b>" + esc(texts[k] || "model") + "</b><br>library " + fmtMs(values[k]) + ", plan " +
          fmtMs(chosen[k]) + " \u2192 " + fmtX(chosen[k] > 0 ? values[k] / chosen[k] : null);
      }
    }
    // branchvalues "remainder": a module's own value is 0 and Plotly sums its
    // sub-problems (no rounding of our sums against Plotly's)
    var own = values.map(function (v, k) { return kinds[k] === "module" ? 0 : v; });
    return { ids: ids, labels: labels, parents: parents, values: own, totals: values, colours: colours, texts: texts, nodeIds: nodeIds, boxes: boxes, hatch: hatch };
  };

  function shortLabel(it) {
    var label = it.label || it.id;
    var dot = label.indexOf(" \u00b7 ");
    if (dot >= 0) label = label.slice(dot + 3);
    return label.length > 28 ? label.slice(0, 27) + "\u2026" : label;
  }

  TimeView.prototype.redraw = function () {
    if (this._timer) {
      clearTimeout(this._timer);
      this._timer = null;
    }
    this._drawnVersion = this.model.version;
    var b = this.build();
    this._boxes = b.boxes;
    this.plot.dataset.boxes = String(b.boxes.length);
    this.empty.hidden = b.boxes.length > 0;
    this.plot.hidden = b.boxes.length === 0;
    if (!b.boxes.length || typeof Plotly === "undefined") return;
    var trace = {
      type: "icicle",
      ids: b.ids,
      labels: b.labels,
      parents: b.parents,
      values: b.values,
      customdata: b.nodeIds,
      text: b.texts,
      branchvalues: "remainder",
      sort: false,
      hovertemplate: "%{text}<extra></extra>",
      texttemplate: "%{label}",
      tiling: { orientation: "v" },
      pathbar: { visible: true, side: "top" },
      marker: {
        colors: b.colours.map(colourHex),
        line: { color: "#ffffff", width: 1 },
        // hatched: the cost model's estimate, not measured yet
        pattern: { shape: b.hatch, fgcolor: "#6b7280", fgopacity: 0.45, size: 6, solidity: 0.15 },
      },
      maxdepth: 6,
    };
    var layout = {
      uirevision: "time-view",
      margin: { l: 4, r: 4, t: 28, b: 4 },
      paper_bgcolor: "rgba(0,0,0,0)",
      font: { family: 'system-ui, -apple-system, "Segoe UI", sans-serif', size: 12, color: "#1d2330" },
      hoverlabel: { align: "left" },
    };
    Plotly.react(this.plot, [trace], layout, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["toImage"] });
    this._attach();
  };

  TimeView.prototype._attach = function () {
    if (this._attached || typeof this.plot.on !== "function") return;
    this._attached = true;
    var self = this;
    // a sub-problem box selects its node; returning false keeps Plotly from
    // zooming into a leaf (a module box still zooms)
    this.plot.on("plotly_icicleclick", function (ev) {
      var pt = ev && ev.points && ev.points[0];
      var id = pt ? pt.customdata : "";
      if (!id) return true;
      if (self.onSelect) self.onSelect(String(id));
      return false;
    });
  };

  TimeView.colourOf = colourOf;
  TimeView.colourHex = colourHex;
  LEGO.TimeView = TimeView;
})();
