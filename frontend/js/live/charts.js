// LEGO.Charts: the run page's two Plotly charts, drawn from a LEGO.RunModel.
//
// - #speedup-chart: the best plan's speedup over time (x: seconds since the
//   search started, the origin of the report's "first plan after … s, final
//   after … s"; since the run started before a search stage was seen;
//   y: speedup), a step line with a marker per improvement, extended to the
//   latest event.
// - #subproblem-chart: for each compute sub-problem of the chosen plan, its
//   library (baseline) time and the chosen implementation's time in ms, as
//   grouped horizontal bars labelled measured/estimated; the chosen bar is
//   blue for a Triton kernel and slate for the library, each with its own
//   legend entry.  Library rows as cheap as a fifth of the largest time or
//   less collapse into one "N other sub-problems (library)" row.  The ms
//   labels are never rotated (as many ticks as fit).  Before any plan: only
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
  const TINY = 0.2; // library rows at most this fraction of the largest time collapse into one
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
      const rows = collapseRows(items);
      const n = rows.length;
      const width = this.subproblemEl.clientWidth || 560;
      const margin = { l: 240, r: 16, t: 92, b: 16 };
      const layout = {
        uirevision: "subproblems",
        barmode: "group",
        bargap: 0.25,
        height: Math.max(260, 90 + n * 34),
        margin: margin,
        font: FONT,
        // the axis on top, where it stays in view while the list scrolls;
        // labels never rotated: as many ticks as fit side by side
        xaxis: {
          rangemode: "tozero",
          side: "top",
          tickangle: 0,
          nticks: Math.max(2, Math.min(8, Math.floor((width - margin.l - margin.r) / TICK_PX))),
          title: { text: "ms", standoff: 6, font: { size: 11, color: "#667085" } },
        },
        yaxis: { tickvals: rows.map((_, i) => i), ticktext: rows.map((r) => r.short), autorange: "reversed", automargin: true },
        // one row from the chart's left edge (not the plot area's), where it fits
        legend: { orientation: "h", x: -margin.l / Math.max(1, width - margin.l - margin.r), xanchor: "left", yanchor: "bottom" },
        paper_bgcolor: "rgba(0,0,0,0)",
        plot_bgcolor: "#fff",
      };
      // the legend above the axis title and tick labels: 58 px over the plot area
      layout.legend.y = 1 + 58 / Math.max(1, layout.height - margin.t - margin.b);
      this.subproblemEl.dataset.items = String(items.length);
      this.subproblemEl.dataset.rows = String(n);
      if (n === 0) {
        // just the note: no bare axes, no legend
        layout.height = 160;
        layout.margin = { l: 16, r: 16, t: 16, b: 16 };
        layout.xaxis = { visible: false };
        layout.yaxis = { visible: false };
        layout.showlegend = false;
        layout.annotations = [{ xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, text: "no chosen plan yet",
                                font: { color: "#667085" } }];
        window.Plotly.react(this.subproblemEl, [], layout, CONFIG);
        return;
      }
      const baseKind = kindOf(rows.map((r) => r.baselineMeasured));
      const chosenKind = kindOf(rows.map((r) => r.measured));
      layout.xaxis.title.text = `ms, ${baseKind === chosenKind ? baseKind : `library ${baseKind}, chosen ${chosenKind}`}`;
      const hover = (r, which) => {
        const ms = which === "baseline" ? r.baselineMs : r.chosenMs;
        const measured = which === "baseline" ? r.baselineMeasured : r.measured;
        const kind = measured ? "measured" : "estimated";
        if (r.group) {
          return `${r.label}: the plan keeps their library implementation<br>each at most ${LEGO_sig(ms)} ms, ` +
            `${LEGO_sig(r.totalMs)} ms together (${kind})`;
        }
        return `${r.label}<br>${which === "baseline" ? "library" : r.triton ? "Triton kernel" : "library (kept)"}: ` +
          `${ms === null ? "—" : LEGO_sig(ms)} ms (${kind})`;
      };
      const bars = (name, subset, which, color, group) => ({
        type: "bar",
        orientation: "h",
        name: name,
        offsetgroup: group, // both chosen traces share one slot beside the library bar
        y: subset.map((r) => r.index),
        x: subset.map((r) => (which === "baseline" ? r.baselineMs : r.chosenMs)),
        text: subset.map((r) => hover(r, which)),
        hovertemplate: "%{text}<extra></extra>",
        textposition: "none", // text is for the hover only
        marker: { color: color },
      });
      const triton = rows.filter((r) => r.triton);
      const library = rows.filter((r) => !r.triton);
      const traces = [bars("library baseline", rows, "baseline", COLORS.baseline, "baseline")];
      if (triton.length) traces.push(bars("chosen: Triton kernel", triton, "chosen", COLORS.triton, "chosen"));
      if (library.length) traces.push(bars("chosen: library", library, "chosen", COLORS.library, "chosen"));
      window.Plotly.react(this.subproblemEl, traces, layout, CONFIG);
    }
  }

  // Rows of the per-sub-problem chart: one per chosen item, except that
  // items where the plan keeps the library implementation at a tiny cost
  // (chosen = library time, at most TINY of the largest time) collapse into
  // one "N other sub-problems (library)" row at the end (two or more of them).
  function collapseRows(items) {
    let max = 0;
    for (const it of items) max = Math.max(max, it.baselineMs || 0, it.chosenMs || 0);
    const tiny = (it) =>
      it.implementation !== "triton" && it.chosenMs !== null && it.chosenMs === it.baselineMs && it.chosenMs <= TINY * max;
    const small = items.filter(tiny);
    const keep = small.length >= 2 ? items.filter((it) => !tiny(it)) : items;
    const rows = keep.map((it) => ({
      label: it.label,
      short: it.label.length > LABEL_CHARS ? it.label.slice(0, LABEL_CHARS - 1) + "…" : it.label,
      baselineMs: it.baselineMs,
      chosenMs: it.chosenMs,
      measured: it.measured,
      baselineMeasured: it.baselineMeasured,
      triton: it.implementation === "triton",
      group: false,
    }));
    if (small.length >= 2) {
      const most = Math.max(...small.map((it) => it.chosenMs));
      const label = `${small.length} other sub-problems (library)`;
      rows.push({
        label: label,
        short: label,
        baselineMs: most,
        chosenMs: most,
        totalMs: small.reduce((t, it) => t + it.chosenMs, 0),
        measured: small.every((it) => it.measured),
        baselineMeasured: small.every((it) => it.baselineMeasured),
        triton: false,
        group: true,
      });
    }
    rows.forEach((r, i) => (r.index = i));
    return rows;
  }

  function LEGO_sig(x) {
    return Number(x.toPrecision(3)).toString();
  }

  Charts.chosenItems = chosenItems;
  Charts.collapseRows = collapseRows;
  LEGO.Charts = Charts;
})();
