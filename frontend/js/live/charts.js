// LEGO.Charts: the run page's two Plotly charts, drawn from a LEGO.RunModel.
//
// - #speedup-chart: the best plan's speedup over time (x: seconds since the
//   search started, the origin of the report's "first plan after … s, final
//   after … s"; since the run started before a search stage was seen;
//   y: speedup), a step line with a marker per improvement, extended to the
//   latest event.
// - #subproblem-chart: the compute sub-problems of the chosen plan that save
//   (or lose) the most time against the library, one bar each (blue saved,
//   red lost, the time view's colours), the rest summed in one row; measured
//   bars solid, the cost model's estimates hatched, the source in the hover.
//   Before any plan: only
//   the note "no chosen plan yet".  A finished run's report.json
//   (options.report) gives the final numbers; before that the model's
//   chosenItems().  data-items: sub-problems; data-rows: rows drawn.
//
// update() is throttled (at most one redraw per THROTTLE_MS); Plotly.react
// with a fixed uirevision keeps the user's zoom across redraws.
(function () {
  "use strict";
  const LEGO = (window.LEGO = window.LEGO || {});

  const THROTTLE_MS = 300;
  const TICK_PX = 64; // room per tick label of the sub-problem chart's ms axis
  const LABEL_CHARS = 40; // sub-problem labels longer than this are cut (the hover has them whole)
  const TOP = 10; // sub-problem rows by time saved or lost; the rest are summed in one row
  const COLORS = { baseline: "#98a2b3", triton: "#2f5bea", library: "#667085", measured: "#12805c", estimated: "#2f5bea",
                   saved: "#2166ac", lost: "#b2182b" };
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
          (p.costMs !== null && p.baselineMs !== null ? `<br>${LEGO.formatMs(p.costMs)} vs ${LEGO.formatMs(p.baselineMs)}` : "")
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

    // Per sub-problem, the time the plan saves (or loses) against the
    // library: the TOP entries by |saved|, the rest summed in one row; one
    // bar each, green saved, red lost; estimated bars hatched (the cost
    // model's, named in the hover), measured ones solid. A fixed height, no
    // inner scrolling.
    drawSubproblems() {
      const items = chosenItems(this.model, this.report);
      const rows = savedRows(items, TOP);
      const n = rows.length;
      const layout = {
        uirevision: "subproblems",
        height: Math.max(200, 70 + n * 26),
        margin: { l: 16, r: 16, t: 30, b: 40 },
        font: FONT,
        bargap: 0.3,
        xaxis: { title: { text: "ms saved (+) or lost (−) against the library", font: { size: 11, color: "#667085" } },
                 zeroline: true, zerolinecolor: "#98a2b3", tickangle: 0, nticks: 6,
                 exponentformat: "none" },  // ms in plain decimals: Plotly's default would write 0.00002 ms as "20µ"
        yaxis: { tickvals: rows.map((_, i) => i), ticktext: rows.map((r) => r.short), autorange: "reversed", automargin: true },
        showlegend: true,
        legend: { orientation: "h", x: 0, y: 1.02, xanchor: "left", yanchor: "bottom" },
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "#fff",
      };
      this.subproblemEl.dataset.items = String(items.length);
      this.subproblemEl.dataset.rows = String(n);
      if (n === 0) {
        layout.height = 160;
        layout.xaxis = { visible: false };
        layout.yaxis = { visible: false };
        layout.showlegend = false;
        layout.annotations = [{ xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, text: "no chosen plan yet",
                                font: { color: "#667085" } }];
        window.Plotly.react(this.subproblemEl, [], layout, CONFIG);
        return;
      }
      const source = (r) => (r.measured && r.baselineMeasured ? "measured on the GPU" :
        "estimated by the cost model (no GPU timing" + (r.measured || r.baselineMeasured ? " for one of the two" : "") + ")");
      const hover = (r) =>
        `${r.label}<br>${r.group ? `${r.count} sub-problems together` : r.triton ? "Triton kernel" : "library (kept)"}: ` +
        `${LEGO.formatMs(r.chosenMs)} vs library ${LEGO.formatMs(r.baselineMs)}<br>` +
        `${r.savedMs >= 0 ? "saves" : "loses"} ${LEGO.formatMs(Math.abs(r.savedMs))}, ${source(r)}`;
      const bars = (name, subset, measured) => ({
        type: "bar",
        orientation: "h",
        name: name,
        y: subset.map((r) => r.index),
        x: subset.map((r) => r.savedMs),
        text: subset.map(hover),
        hovertemplate: "%{text}<extra></extra>",
        textposition: "none",
        marker: {
          color: subset.map((r) => (r.savedMs >= 0 ? COLORS.saved : COLORS.lost)),
          line: { color: subset.map((r) => (r.savedMs >= 0 ? COLORS.saved : COLORS.lost)), width: 1 },
          pattern: measured ? { shape: "" } : { shape: "/", fillmode: "overlay", fgcolor: "#ffffff", size: 6, solidity: 0.35 },
        },
      });
      const measured = rows.filter((r) => r.measured && r.baselineMeasured);
      const estimated = rows.filter((r) => !(r.measured && r.baselineMeasured));
      const traces = [];
      if (measured.length) traces.push(bars("measured", measured, true));
      if (estimated.length) traces.push(bars("estimated (cost model)", estimated, false));
      window.Plotly.react(this.subproblemEl, traces, layout, CONFIG);
    }
  }

  // Rows of the per-sub-problem chart: the `top` items by |ms saved|, then
  // the rest summed in one "N other sub-problems" row.
  function savedRows(items, top) {
    const timed = items
      .filter((it) => it.baselineMs !== null)
      .map((it) => ({ it: it, saved: it.baselineMs - (it.chosenMs === null ? it.baselineMs : it.chosenMs) }));
    timed.sort((a, b) => Math.abs(b.saved) - Math.abs(a.saved));
    const row = (label, list, group) => {
      const baselineMs = list.reduce((t, x) => t + x.it.baselineMs, 0);
      const chosenMs = list.reduce((t, x) => t + (x.it.chosenMs === null ? x.it.baselineMs : x.it.chosenMs), 0);
      return {
        label: label,
        short: label.length > LABEL_CHARS ? label.slice(0, LABEL_CHARS - 1) + "…" : label,
        baselineMs: baselineMs,
        chosenMs: chosenMs,
        savedMs: baselineMs - chosenMs,
        measured: list.every((x) => x.it.measured),
        baselineMeasured: list.every((x) => x.it.baselineMeasured),
        triton: !group && list[0].it.implementation === "triton",
        group: group,
        count: list.length,
      };
    };
    const head = timed.length > top + 1 ? timed.slice(0, top) : timed;
    const rest = timed.length > top + 1 ? timed.slice(top) : [];
    const rows = head.map((x) => row(x.it.label, [x], false));
    if (rest.length) rows.push(row(`${rest.length} other sub-problems`, rest, true));
    rows.forEach((r, i) => (r.index = i));
    return rows;
  }

  Charts.chosenItems = chosenItems;
  Charts.savedRows = savedRows;
  LEGO.Charts = Charts;
})();
