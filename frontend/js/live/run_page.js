// The run page (runs/detail.html) and the self-contained report.html: builds
// a LEGO.RunModel from the run's events and shows it in the tree view
// (#tree-view), the node panel (#node-panel), the header numbers
// (LEGO.Header) and the two charts (LEGO.Charts).
//
// Two modes, chosen by what the page holds:
// - live (#run-live JSON): the events come over the websocket
//   (LEGO.EventStream); a finished run's page opens it once to replay the
//   log and then gets `end` (meanwhile the header keeps the server's final
//   numbers and stage: LEGO.Header's `replaying`).  A page rendered while the
//   run was active reloads once when the run ends, so the server renders the
//   final plan table, metrics and error.  A refused stream (4403: share link
//   revoked or not allowed; 4404: run gone) shows #stream-banner at the top
//   of the views and the header stops following (clock stopped, last known
//   state marked).
// - static (#run-events JSON, report.html): every event is inline; no
//   stream, no server.
//
// window.LEGO.page = {model, tree, panel, header, charts, stream, mode}
// and window.LEGO.stream (live mode) are there for tests and the console.
(function () {
  "use strict";
  const LEGO = (window.LEGO = window.LEGO || {});

  const RENDER_MS = 200;

  function readJSON(id) {
    const el = document.getElementById(id);
    if (!el) return undefined;
    try {
      return JSON.parse(el.textContent);
    } catch (err) {
      console.error(`LEGO: #${id} is not JSON`, err);
      return undefined;
    }
  }

  function missing(what) {
    console.error(`LEGO: ${what} is missing; the run page cannot show the tree and charts`);
  }

  function setupCopyButton() {
    const button = document.getElementById("share-copy");
    const input = document.getElementById("share-url");
    if (!button || !input) return;
    button.addEventListener("click", async () => {
      let ok = false;
      try {
        if (navigator.clipboard && window.isSecureContext) {
          await navigator.clipboard.writeText(input.value);
          ok = true;
        }
      } catch (err) {
        ok = false;
      }
      if (!ok) {
        input.select();
        try {
          ok = document.execCommand("copy");
        } catch (err) {
          ok = false;
        }
      }
      button.textContent = ok ? "Copied" : "Select and copy";
      setTimeout(() => (button.textContent = "Copy"), 2000);
    });
    input.addEventListener("focus", () => input.select());
  }

  class RunPage {
    constructor(options) {
      this.mode = options.mode;
      this.live = options.live || null;
      this.report = options.report || null;
      this.model = new LEGO.RunModel();
      this.renderTimer = null;
      this.renders = 0;

      const treeEl = document.getElementById("tree-view");
      const panelEl = document.getElementById("node-panel");
      this.panel = panelEl && LEGO.NodePanel ? new LEGO.NodePanel(panelEl, this.model) : null;
      this.tree =
        treeEl && LEGO.TreeView
          ? new LEGO.TreeView(treeEl, this.model, { onSelect: (id) => this.select(id) })
          : null;

      const timeEl = document.getElementById("time-view");
      this.timeView = timeEl && LEGO.TimeView ? new LEGO.TimeView(timeEl, this.model, { onSelect: (id) => this.selectEverywhere(id) }) : null;

      const elapsedEl = document.getElementById("run-elapsed");
      const state = options.state || "";
      this.header = new LEGO.Header(this.model, {
        state: state,
        elapsedS: elapsedEl ? parseFloat(elapsedEl.dataset.seconds) || 0 : 0,
        active: this.mode === "live" && !!(this.live && this.live.active),
        replaying: this.mode === "live" && !!this.live && !this.live.active,
      });
      this.charts = LEGO.Charts
        ? new LEGO.Charts(document.getElementById("speedup-chart"), document.getElementById("subproblem-chart"), this.model, {
            report: this.report,
          })
        : null;
      this.stream = null;
    }

    select(id) {
      if (this.panel) this.panel.show(id);
    }

    // from the time view (or the tree's search): the tree shows and rings
    // the node, the panel fills
    selectEverywhere(id) {
      if (this.tree) this.tree.reveal(id);
      this.select(id);
    }

    apply(events) {
      const wasEnded = this.model.ended;
      this.model.applyAll(events);
      // the log's end (run_finished / run_failed): the header says so now,
      // not at the next render, and the Cancel button goes at once
      if (this.model.ended && !wasEnded) this.header.update();
      // replaying the log of a run that had ended when the page was
      // rendered: a few large batches, each drawn at once, so the page
      // shows every event it holds (LEGO.stream.lastSeq) without a delay
      if (this.live && !this.live.active) this.renderNow();
      else this.scheduleRender();
    }

    // Draw everything now, the tree included (TreeView.update() coalesces
    // into a later animation frame; redraw() is synchronous).
    renderNow() {
      if (this.tree && typeof this.tree.redraw === "function") this.tree.redraw();
      if (this.timeView) this.timeView.redraw();
      this.render(true);
    }

    scheduleRender() {
      if (this.renderTimer) return;
      this.renderTimer = setTimeout(() => {
        this.renderTimer = null;
        this.render();
      }, RENDER_MS);
    }

    render(force) {
      if (this.renderTimer) {
        clearTimeout(this.renderTimer);
        this.renderTimer = null;
      }
      this.renders += 1;
      if (this.tree) this.tree.update();
      if (this.timeView) this.timeView.update();
      if (this.panel) this.panel.refresh();
      this.header.update();
      if (this.charts) this.charts.update(force);
    }

    startStatic(events) {
      this.model.applyAll(events || []);
      this.renderNow();
      this.hideEmptyViews(this.header.state);
    }

    // A run that failed before it built a tree (a broken file): the error
    // card says it all, an empty tree and empty charts would only add noise.
    hideEmptyViews(state) {
      const views = document.getElementById("live-views");
      if (views && (state === "failed" || state === "cancelled") && this.model.nodes.size === 0) views.hidden = true;
    }

    // The stream stopped for good without `end`: say so where it is seen.
    stopFollowing(message) {
      this.renderNow();
      this.header.stopFollowing(message);
      let banner = document.getElementById("stream-banner");
      if (!banner) {
        banner = document.createElement("div");
        banner.id = "stream-banner";
        banner.className = "stream-banner";
        banner.setAttribute("role", "alert");
        const views = document.getElementById("live-views");
        if (views) views.insertBefore(banner, views.firstChild);
        else document.body.insertBefore(banner, document.body.firstChild);
      }
      banner.textContent = "";
      const strong = document.createElement("strong");
      strong.textContent = "Stopped following this run. ";
      banner.appendChild(strong);
      banner.appendChild(document.createTextNode(message + " The page shows the last state it received; reload to try again."));
      banner.hidden = false;
      const views = document.getElementById("live-views");
      if (views) views.hidden = false;
    }

    startLive() {
      const statusEl = document.getElementById("stream-status");
      const renderedActive = !!this.live.active;
      this.stream = new LEGO.EventStream(
        this.live,
        (events) => this.apply(events),
        (state) => this.header.setState(state),
        {
          statusEl: statusEl,
          onStop: (code, message) => this.stopFollowing(message),
          onQueuePosition: (position) => this.header.setQueuePosition(position),
          onEnd: (state) => {
            this.header.caughtUp();
            this.renderNow();
            this.header.setState(state);
            this.hideEmptyViews(state);
            if (renderedActive) {
              // the run ended while we watched: the server renders the
              // final plan table, metrics or error
              if (statusEl) statusEl.textContent = `run ${state}; loading the results…`;
              setTimeout(() => window.location.reload(), 300);
            }
          },
        }
      );
      LEGO.stream = this.stream;
      this.render(true);
      this.stream.start();
    }
  }

  function boot() {
    setupCopyButton();
    const events = readJSON("run-events");
    const live = readJSON("run-live");
    const report = readJSON("run-report");
    if (events === undefined && live === undefined) return; // not a run page
    if (!LEGO.RunModel) return missing("run_model.js (LEGO.RunModel)");
    const stateEl = document.getElementById("run-state");
    const state = (live && live.state) || (stateEl ? stateEl.textContent.trim() : "");
    if (events !== undefined) {
      const page = new RunPage({ mode: "static", live: null, report: report, state: state });
      LEGO.page = page;
      page.startStatic(events);
    } else {
      const page = new RunPage({ mode: "live", live: live, report: report, state: state });
      LEGO.page = page;
      page.startLive();
    }
  }

  LEGO.RunPage = RunPage;
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
