// LEGO.Charts: the run page's two Plotly charts, drawn from a LEGO.RunModel.
//
// - #speedup-chart: the best plan's speedup over time (x: seconds since the
//   search started, the origin of the report's "first plan after … s, final
//   after … s"; since the run started before a search stage was seen;
//   y: speedup), a step line with a marker per improvement, extended to the
//   latest event.
// - #subproblem-chart: for each compute sub-problem of the chosen plan, its
//   library (baseline) time and the chosen implementation's time in ms, as
//   grouped horizontal bars labelled measured/estimated.  A finished run's
//   report.json (options.report) gives the final numbers; before that the
//   model's chosenItems().
//
// update() is throttled (at most one redraw per THROTTLE_MS); Plotly.react
// with a fixed uirevision keeps the user's zoom across redraws.
(function () {
  "use strict";
  const LEGO = (window.LEGO = window.LEGO || {});

  const THROTTLE_MS = 300;
  const COLORS = { baseline: "#98a2b3", triton: "#2f5bea", library: "#667085", measured: "#12805c", estimated: "#2f5bea" };
  const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  const FONT = { family: 'system-ui, -apple-system, "Segoe UI", sans-serif', size: 12, color: "#1d2330" };

  function num(x) {
    return typeof x === "number" && isFinite(x) ? x : null;
  }

  function kindOf(flags) {
    const measured = flags.filter(Boolean).length;
    if (!flags.length || measured === 0) return "estimated";
    return measured === flags.length ? "measured" : "measured/estimated";
  }

  // Seconds since `origin` (RunModel.timeOrigin(): the search's start);
  // event times are epoch seconds, planHistory's t already relative.
  function sinceStart(t, origin) {
    if (num(t) === null) return null;
    return t > 1e6 && num(origin) !== null ? Math.max(0, t - origin) : t;
  }

  function timeOrigin(model) {
    if (model && typeof model.timeOrigin === "function") return model.timeOrigin();
    const h = (model && model.header) || {};
    return num(h.startedTs);
  }

  // The chosen plan's compute items: [{id, label, baselineMs, chosenMs, measured, baselineMeasured, implementation}].
  function chosenItems(model, report) {
    const subs = report && Array.isArray(report.subproblems) ? report.subproblems : null;
    let items;
    if (subs && subs.length) {
      items = subs
        .filter((s) => s.kind !== "layout")
        .map((s) => ({
          id: s.node_id || s.id,
          label: s.label || s.id,
          baselineMs: num(s.baseline_ms),
          chosenMs: num(s.time_ms),
          measured: s.time_kind === "measured",
          baselineMeasured: (s.baseline_kind || s.time_kind) === "measured",
          implementation: s.implementation || "",
        }));
    } else {
      const raw = model && typeof model.chosenItems === "function" ? model.chosenItems() : [];
      items = raw.map((it) => ({
        id: it.id,
        label: it.label || it.id,
        baselineMs: num(it.baselineMs),
        chosenMs: num(it.chosenMs),
        measured: !!it.measured,
        baselineMeasured: !!it.measured,
        implementation: it.implementation || "",
      }));
    }
    // layout steps (views) take no time: nothing to compare
    return items.filter((it) => (it.baselineMs || 0) > 0 || (it.chosenMs || 0) > 0);
  }

  class Charts {
    // options: {report: report.json or null, throttleMs}
    constructor(speedupEl, subproblemEl, model, options = {}) {
      this.speedupEl = speedupEl;
      this.subproblemEl = subproblemEl;
      this.model = model;
      this.report = options.report || null;
      this.throttleMs = options.throttleMs === undefined ? THROTTLE_MS : options.throttleMs;
      this.timer = null;
      this.lastDraw = 0;
      this.draws = 0;
      this.ready = typeof window.Plotly !== "undefined";
      if (!this.ready) {
        for (const el of [speedupEl, subproblemEl]) {
          if (el) el.textContent = "Charts need plotly.min.js, which did not load.";
        }
      }
    }

    setReport(report) {
      this.report = report || null;
      this.update(true);
    }

    // Redraw soon (or now with force), at most once per throttle interval.
    update(force) {
      if (!this.ready) return;
      if (force) {
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        this.draw();
        return;
      }
      if (this.timer) return;
      const wait = Math.max(0, this.lastDraw + this.throttleMs - performance.now());
      this.timer = setTimeout(() => {
        this.timer = null;
        this.draw();
      }, wait);
    }

    draw() {
      this.lastDraw = performance.now();
      this.draws += 1;
      if (this.speedupEl) this.drawSpeedup();
      if (this.subproblemEl) this.drawSubproblems();
    }

    speedupPoints() {
      const origin = timeOrigin(this.model);
      const history = (this.model && this.model.planHistory) || [];
      return history
        .map((p) => ({
          x: sinceStart(p.t, origin),
          y: num(p.speedup),
          measured: !!p.measured,
          initial: !!p.initial,
          costMs: num(p.costMs),
          baselineMs: num(p.baselineMs),
        }))
        .filter((p) => p.x !== null && p.y !== null);
    }

    drawSpeedup() {
      const h = (this.model && this.model.header) || {};
      const points = this.speedupPoints();
      const xs = points.map((p) => p.x);
      const ys = points.map((p) => p.y);
      const text = points.map(
        (p) =>
          `${p.initial ? "library plan" : "improved"}: ${p.y.toFixed(3)}× (${p.measured ? "measured" : "estimated"})` +
          (p.costMs !== null && p.baselineMs !== null ? `<br>${LEGO_sig(p.costMs)} ms vs ${LEGO_sig(p.baselineMs)} ms` : "")
      );
      // the step line runs on to the latest event (or the end of the run)
      const endX = sinceStart(h.endedTs || h.lastTs, timeOrigin(this.model));
      const lineX = xs.slice();
      const lineY = ys.slice();
      if (points.length && endX !== null && endX > xs[xs.length - 1]) {
        lineX.push(endX);
        lineY.push(ys[ys.length - 1]);
      }
      const traces = [
        {
          type: "scatter",
          mode: "lines",
          name: "best plan",
          x: lineX,
          y: lineY,
          line: { shape: "hv", color: COLORS.triton, width: 2 },
          hoverinfo: "skip",
          showlegend: false,
        },
        {
          type: "scatter",
          mode: "markers",
          name: "plan improved",
          x: xs,
          y: ys,
          text: text,
          hovertemplate: "%{x:.2f} s<br>%{text}<extra></extra>",
          marker: {
            size: 8,
            color: points.map((p) => (p.measured ? COLORS.measured : COLORS.estimated)),
            symbol: points.map((p) => (p.initial ? "square" : "circle")),
            line: { color: "#fff", width: 1 },
          },
          showlegend: false,
        },
      ];
      const kind = kindOf(points.map((p) => p.measured));
      const layout = {
        uirevision: "speedup",
        margin: { l: 56, r: 16, t: 24, b: 44 },
        font: FONT,
        annotations: [
          {
            xref: "paper", yref: "paper", x: 1, y: 1.02, xanchor: "right", yanchor: "bottom", showarrow: false,
            text: points.length ? `${points.length} plan${points.length === 1 ? "" : "s"}, ${kind}` : "no plan yet",
            font: { size: 11, color: "#667085" },
          },
        ],
        xaxis: {
          title: { text: num(h.searchStartedTs) !== null ? "seconds since the search started" : "seconds since the run started" },
          rangemode: "tozero",
          zeroline: false,
        },
        yaxis: { title: { text: "speedup ×" }, rangemode: "tozero" },
        // speedup 1: the library plan
        shapes: [{ type: "line", layer: "below", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1, line: { color: "#c0c4cc", dash: "dot", width: 1 } }],
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "#fff",
      };
      window.Plotly.react(this.speedupEl, traces, layout, CONFIG);
      this.speedupEl.dataset.points = String(points.length);
    }

    drawSubproblems() {
      const items = chosenItems(this.model, this.report);
      const n = items.length;
      const ticks = items.map((_, i) => i);
      const labels = items.map((it) => (it.label.length > 48 ? it.label.slice(0, 47) + "…" : it.label));
      const baseKind = kindOf(items.map((it) => it.baselineMeasured));
      const chosenKind = kindOf(items.map((it) => it.measured));
      const hover = (which) =>
        items.map((it) => {
          const ms = which === "baseline" ? it.baselineMs : it.chosenMs;
          const measured = which === "baseline" ? it.baselineMeasured : it.measured;
          return `${it.label}<br>${which === "baseline" ? "library" : it.implementation || "chosen"}: ` +
            `${ms === null ? "—" : LEGO_sig(ms)} ms (${measured ? "measured" : "estimated"})`;
        });
      const traces = [
        {
          type: "bar",
          orientation: "h",
          name: `library baseline (${baseKind})`,
          y: ticks,
          x: items.map((it) => it.baselineMs),
          text: hover("baseline"),
          hovertemplate: "%{text}<extra></extra>",
          marker: { color: COLORS.baseline },
        },
        {
          type: "bar",
          orientation: "h",
          name: `chosen (${chosenKind})`,
          y: ticks,
          x: items.map((it) => it.chosenMs),
          text: hover("chosen"),
          hovertemplate: "%{text}<extra></extra>",
          marker: { color: items.map((it) => (it.implementation === "triton" ? COLORS.triton : COLORS.library)) },
        },
      ];
      const layout = {
        uirevision: "subproblems",
        barmode: "group",
        bargap: 0.25,
        height: Math.max(260, 90 + n * 34),
        margin: { l: 240, r: 16, t: 64, b: 16 },
        font: FONT,
        // the axis on top, where it stays in view while the list scrolls
        xaxis: { rangemode: "tozero", side: "top", ticksuffix: " ms" },
        yaxis: { tickvals: ticks, ticktext: labels, autorange: "reversed", automargin: true },
        legend: { orientation: "h", x: 0, xanchor: "left", yanchor: "bottom" },
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "#fff",
      };
      // the legend above the tick labels: 26 px over the plot area
      layout.legend.y = 1 + 26 / Math.max(1, layout.height - layout.margin.t - layout.margin.b);
      if (n === 0) {
        layout.annotations = [{ xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, text: "no chosen plan yet",
                                font: { color: "#667085" } }];
      }
      // text is for the hover only
      for (const t of traces) t.textposition = "none";
      window.Plotly.react(this.subproblemEl, traces, layout, CONFIG);
      this.subproblemEl.dataset.items = String(n);
    }
  }

  function LEGO_sig(x) {
    return Number(x.toPrecision(3)).toString();
  }

  Charts.chosenItems = chosenItems;
  LEGO.Charts = Charts;
})();
