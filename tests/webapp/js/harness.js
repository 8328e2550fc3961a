/* Test helpers for harness.html: wires a RunModel to a TreeView and a
   NodePanel the way the run page does, and finds a node's pixel position. */
(function () {
  "use strict";
  var T = (window.T = {});

  /* A fresh model and views; the previous ones are dropped. */
  T.start = function (options) {
    if (T.view) T.view.destroy();
    ["tree", "node-panel"].forEach(function (id) {
      var old = document.getElementById(id);
      var fresh = document.createElement("div");
      fresh.id = id;
      fresh.style.cssText = old.style.cssText;
      old.parentNode.replaceChild(fresh, old);
    });
    delete window.pwned;
    var model = new LEGO.RunModel();
    var panel = new LEGO.NodePanel(document.getElementById("node-panel"), model, {
      onSelect: function (id) {
        T.selected.push(["panel", id]);
        T.view.select(id);
        panel.show(id);
      },
    });
    var view = new LEGO.TreeView(document.getElementById("tree"), model, {
      minIntervalMs: options && options.minIntervalMs,
      fold: !!(options && options.fold), // the mechanics tests draw every node; test_browser_readable folds
      onSelect: function (id) {
        T.selected.push(["tree", id]);
        panel.show(id);
      },
    });
    T.model = model;
    T.view = view;
    T.panel = panel;
    T.selected = [];
    return true;
  };

  /* Apply wire events ({seq, type, data}) and tell the views. */
  T.feed = function (events) {
    var n = T.model.applyAll(events);
    T.view.update();
    T.panel.refresh();
    return n;
  };

  /* Plotly graph div's traces by name -> number of points. */
  T.tracePoints = function () {
    var out = {};
    (T.view.plot.data || []).forEach(function (t) {
      out[t.name] = (t.x || []).filter(function (v) { return v !== null; }).length;
    });
    return out;
  };

  /* Page coordinates of a node, from the axis ranges Plotly writes back to
     gd.layout after autorange and the margins the view sets. */
  T.pixelOf = function (id) {
    var gd = T.view.plot;
    var pos = T.view.position(id);
    var xr = gd.layout.xaxis.range;
    var yr = gd.layout.yaxis.range;
    var m = gd.layout.margin;
    var rect = gd.getBoundingClientRect();
    var w = rect.width - m.l - m.r;
    var h = rect.height - m.t - m.b;
    return {
      x: rect.left + m.l + ((pos.x - xr[0]) / (xr[1] - xr[0])) * w,
      y: rect.top + m.t + ((yr[1] - pos.y) / (yr[1] - yr[0])) * h,
    };
  };
})();
