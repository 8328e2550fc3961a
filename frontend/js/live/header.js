// LEGO.Header: the run page's summary numbers, kept up to date from a
// LEGO.RunModel: state (#run-state), elapsed time (#run-elapsed, ticking
// while the run is active), stage and progress (#run-stage), agent calls
// (#run-agent-calls), tokens (#run-tokens) and the best plan's speedup
// with measured/estimated (#run-speedup-live).
//
// The stage reads "done"/"failed" as soon as the page knows the run ended.
// options.replaying (a page rendered for an ended run, replaying its log):
// until caughtUp() or the model's run_finished/run_failed, the
// server-rendered final numbers (agent calls, tokens, speedup) stay and the
// stage shows the final one, not the replay's "construct" or "search 0/690".
// stopFollowing(reason) (the stream was refused: 4403/4404): the clock stops,
// the state stays the last known one, marked "stopped following".
// The Cancel button (#run-cancel-form) is hidden and disabled as soon as the
// run has ended: the stream says so, or the log's run_finished/run_failed
// arrived (the database still says "running" while the worker saves the
// result); it never comes back.  The state only moves forward: a stream
// message read from the database before it caught up with the log's end
// does not turn "finished" back into "running".
(function () {
  "use strict";
  const LEGO = (window.LEGO = window.LEGO || {});

  const ACTIVE = new Set(["queued", "running"]);
  const RANK = { queued: 1, running: 2, finished: 3, failed: 3, cancelled: 3 };

  function formatDuration(seconds) {
    const s = Math.max(0, Math.floor(seconds || 0));
    const minutes = Math.floor(s / 60);
    return minutes ? `${minutes} min ${s % 60} s` : `${s} s`;
  }

  function formatCount(n) {
    return typeof n === "number" && isFinite(n) ? n.toLocaleString("en-US") : "—";
  }

  function formatSpeedup(x) {
    return typeof x === "number" && isFinite(x) ? `${x.toFixed(2)}×` : "—";
  }

  class Header {
    // options: {state, elapsedS, active, root (document)}
    constructor(model, options = {}) {
      this.model = model;
      this.root = options.root || document;
      this.state = options.state || (model && model.header && model.header.state) || "";
      this.elapsedS = options.elapsedS || 0;
      this.since = performance.now();
      this.active = options.active !== undefined ? !!options.active : ACTIVE.has(this.state);
      this.replaying = !!options.replaying;
      this.following = true;
      this.timer = null;
      if (this.active) this.timer = setInterval(() => this.renderElapsed(), 250);
      this.renderElapsed();
    }

    el(id) {
      return this.root.getElementById ? this.root.getElementById(id) : this.root.querySelector(`#${id}`);
    }

    elapsed() {
      if (this.active) return this.elapsedS + (performance.now() - this.since) / 1000;
      const h = (this.model && this.model.header) || {};
      // no server time (a report of a run without one): the events' own span
      if (!this.elapsedS && typeof h.startedTs === "number" && typeof h.endedTs === "number") {
        return Math.max(0, h.endedTs - h.startedTs);
      }
      return this.elapsedS;
    }

    renderElapsed() {
      const el = this.el("run-elapsed");
      if (!el) return;
      const seconds = this.elapsed();
      el.textContent = formatDuration(seconds);
      el.dataset.seconds = seconds.toFixed(1);
    }

    // The run's place in the queue from the stream's `state` message
    // (#run-queue-position; hidden once the run left the queue).
    setQueuePosition(position) {
      const el = this.el("run-queue-position");
      if (!el) return;
      const place = typeof position === "number" && position > 0 ? position : null;
      el.hidden = !place || this.state !== "queued";
      el.dataset.position = place ? String(place) : "";
      el.textContent = place ? Header.describePosition(place) : "";
      // the expected wait was rendered with the page; it goes once the run left the queue
      const wait = this.el("run-expected-wait");
      if (wait && el.hidden) wait.hidden = true;
    }

    // The run's state from the stream (or the model); ends the ticking once
    // the run is no longer active.
    setState(state) {
      if (!state) return;
      // never back from an ended state to an active one
      if (RANK[this.state] === 3 && ACTIVE.has(state)) return;
      this.state = state;
      if (state !== "queued") this.setQueuePosition(null);
      const el = this.el("run-state");
      if (el) {
        el.textContent = state;
        el.className = `state state-${state}` + (this.following ? "" : " state-stale");
      }
      if (!ACTIVE.has(state) && this.active) {
        this.elapsedS = this.elapsed();
        this.active = false;
        clearInterval(this.timer);
        this.timer = null;
        this.renderElapsed();
      }
      this.renderControls();
    }

    // Whether the run has ended: its state, or the end event in the log.
    ended() {
      return (!ACTIVE.has(this.state) && !!RANK[this.state]) || !!(this.model && this.model.ended);
    }

    // The owner's Cancel button: gone once the run has ended.
    renderControls() {
      const form = this.el("run-cancel-form");
      if (!form || !this.ended()) return;
      form.hidden = true;
      const button = this.el("run-cancel");
      if (button) button.disabled = true;
    }

    // The replay of an ended run's log has caught up: show the model's numbers.
    caughtUp() {
      this.replaying = false;
      this.update();
    }

    // The stream was refused (share link revoked, run deleted): stop the
    // clock and mark the last known state as no longer followed.
    stopFollowing(reason) {
      this.following = false;
      if (this.active) {
        this.elapsedS = this.elapsed();
        this.active = false;
        clearInterval(this.timer);
        this.timer = null;
      }
      const el = this.el("run-state");
      if (el) {
        el.classList.add("state-stale");
        el.dataset.following = "stopped";
        if (reason) el.title = reason;
        let note = this.el("run-following");
        if (!note && el.ownerDocument) {
          note = el.ownerDocument.createElement("span");
          note.id = "run-following";
          note.className = "following-stopped";
          el.insertAdjacentElement("afterend", note);
        }
        if (note) note.textContent = "last known state; stopped following";
      }
      this.renderElapsed();
    }

    update() {
      const h = (this.model && this.model.header) || {};
      // the events only move the state forward (queued -> running -> finished/failed)
      if (h.state && (RANK[h.state] || 0) > (RANK[this.state] || 0)) this.setState(h.state);
      this.renderControls();
      const set = (id, text) => {
        const el = this.el(id);
        if (el && el.textContent !== text) el.textContent = text;
      };
      const ended = !ACTIVE.has(this.state) && RANK[this.state];
      const final = this.state === "failed" || this.state === "cancelled" ? this.state : "done";
      const modelEnded = !!(this.model && (this.model.finished || this.model.failure));
      if (this.replaying && !modelEnded) {
        // replaying an ended run: keep the server's final numbers meanwhile
        set("run-stage", ended ? final : this.el("run-stage") ? this.el("run-stage").textContent : "");
        this.renderElapsed();
        return;
      }
      set("run-agent-calls", formatCount(h.agentCalls));
      set("run-tokens", formatCount(h.tokens));
      if (h.promptTokens || h.completionTokens) {
        const cost = h.costUsd ? `, $${h.costUsd.toFixed(4)}` : "";
        set("run-tokens-split", ` (${formatCount(h.promptTokens)} prompt + ${formatCount(h.completionTokens)} completion${cost})`);
      }
      const agents = Header.describeAgents(h.agents || []);
      if (agents.text) set("run-agents-text", agents.text);
      // tokens: only when an LLM ran (the template agent spends none)
      const llm = agents.llm || h.tokens > 0;
      ["run-tokens-label", "run-tokens-row"].forEach((id) => {
        const el = this.el(id);
        if (el && llm) el.hidden = false;
      });
      const items = this.model && typeof this.model.computeItems === "function" && this.model.plan ? this.model.computeItems().length : null;
      if (items !== null) set("run-subproblems", String(items));
      const times = Header.planTimes(this.model);
      if (times) {
        const outcome = this.model.finished || this.state === "finished" ? "finished" : this.ended() ? "ended" : "active";
        set("run-plan-times", Header.describePlanTimes(times, outcome));
        const el = this.el("run-plan-times");
        el.dataset.first = String(times.first);
        el.dataset.best = String(times.final);
        // "final" only once the run finished: until then it is the best so far
        el.dataset.final = outcome === "finished" ? String(times.final) : "";
      }
      let stage = h.stage ? Header.describeStage(h) : ACTIVE.has(this.state) ? (this.state === "queued" ? "waiting for a worker" : "starting") : "—";
      if (ended) stage = final;
      if (this.model && this.model.finished) stage = "done";
      if (this.model && this.model.failure) stage = this.model.header.state === "cancelled" ? "cancelled" : "failed";
      set("run-stage", stage);
      this.renderActivity();
      const speedupEl = this.el("run-speedup-live");
      if (speedupEl) {
        const has = typeof h.speedup === "number" && isFinite(h.speedup);
        speedupEl.querySelector(".value").textContent = formatSpeedup(h.speedup);
        const kind = speedupEl.querySelector(".kind");
        kind.textContent = has ? (h.measured ? "measured on the GPU" : "estimated by the cost model for a GPU, not measured") : "";
        kind.title = has && !h.measured ? "No GPU timing: every time is the cost model's estimate for the target device" : "";
        speedupEl.dataset.speedup = has ? String(h.speedup) : "";
        const detail = speedupEl.querySelector(".detail");
        if (detail) {
          detail.textContent =
            has && typeof h.costMs === "number" && typeof h.baselineMs === "number"
              ? ` (${LEGO.formatMs(h.costMs)} vs ${LEGO.formatMs(h.baselineMs)} eager)`
              : "";
        }
      }
      this.renderElapsed();
    }
  }

  // The activity line (#run-activity): the model's last few happenings,
  // newest first, each with the seconds since the run started; redrawn only
  // when a new line came in.
  Header.prototype.renderActivity = function () {
    const list = this.el("run-activity");
    const lines = (this.model && this.model.activity) || [];
    if (!list) return;
    const last = lines.length ? lines[lines.length - 1] : null;
    const key = last ? `${last.seq}|${lines.length}|${last.text}` : "";
    if (list.dataset.key === key) return;
    list.dataset.key = key;
    while (list.firstChild) list.removeChild(list.firstChild);
    const origin = this.model.header.startedTs;
    for (let i = lines.length - 1; i >= 0; i--) {
      const li = document.createElement("li");
      const when = document.createElement("span");
      when.className = "activity-time note";
      when.textContent = origin !== null && lines[i].ts !== null ? `+${(lines[i].ts - origin).toFixed(1)} s ` : "";
      li.appendChild(when);
      li.appendChild(document.createTextNode(lines[i].text));
      if (lines[i].nodeId) li.dataset.nodeId = lines[i].nodeId;
      list.appendChild(li);
    }
    const card = list.closest(".activity-card");
    if (card) card.hidden = !lines.length;
  };

  // The stage with its own progress: "constructing · 1,077 nodes", "search ·
  // 4 agents busy · 12/148 signatures attempted", "end-to-end check".
  Header.describeStage = function (h) {
    const stage = h.stage || "";
    const count = (n, one, many) => `${formatCount(n)} ${n === 1 ? one : many}`;
    if (stage === "construct") return `constructing · ${count(h.nodes || 0, "node", "nodes")}`;
    if (stage === "search") {
      const parts = ["search", `${count(h.busy || 0, "agent", "agents")} busy`];
      if (h.total) parts.push(`${formatCount(h.done || 0)}/${formatCount(h.total)} signatures attempted`);
      return parts.join(" · ");
    }
    const named = { load: "loading the model", capture: "capturing the graph", compose: "composing the plan",
                    verify: "end-to-end check", launch: "choosing the launch" }[stage];
    const text = named || stage;
    return h.total ? `${text} ${h.done || 0}/${h.total}` : text;
  };

  // "next in the queue", "3rd in the queue (2 runs ahead)": the server's
  // queue.describe_position.
  Header.describePosition = function (place) {
    if (place === 1) return "next in the queue";
    const tens = place % 100;
    const suffix = tens >= 10 && tens <= 20 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[place % 10] || "th";
    const ahead = place - 1;
    return `${place}${suffix} in the queue (${ahead} run${ahead === 1 ? "" : "s"} ahead)`;
  };

  // The agents seen in the run's events: {text, llm}. "template" is the
  // built-in offline agent; any other name is an LLM agent (its model).
  Header.describeAgents = function (names) {
    const parts = [];
    let llm = false;
    for (const name of names) {
      if (name === "template") parts.push("template agent (built in, no LLM)");
      else {
        llm = true;
        parts.push(`LLM ${name}`);
      }
    }
    return { text: [...new Set(parts)].join(", "), llm: llm };
  };

  // Seconds to the first and the final plan, from the same plan_improved
  // events (and clock) the speedup chart draws: the first plan (the library
  // plan, priced the moment the tree exists: report.json's
  // metrics.time_to_first_plan_s, which the server's summary shows) and the
  // last improvement (the first plan's time when none).
  Header.planTimes = function (model) {
    const hist = (model && model.planHistory) || [];
    const timed = hist.filter((p) => typeof p.t === "number" && isFinite(p.t));
    if (!timed.length) return null;
    const better = timed.filter((p) => !p.initial);
    const first = timed[0].t;
    const final = better.length ? better[better.length - 1].t : first;
    return { first: first, final: final };
  };

  // The summary's "Plans" line (the server's _run_summary.html says the
  // same): the last better plan is "final" only once the run finished; while
  // it runs it is the best so far, and a failed or cancelled run has none.
  Header.describePlanTimes = function (times, outcome) {
    const first = `first after ${times.first.toFixed(2)} s`;
    const last = times.final.toFixed(2);
    if (outcome === "finished") return `${first}, final after ${last} s of the search`;
    if (outcome === "active") return `${first}, best so far after ${last} s of the search`;
    return `${first}, best after ${last} s of the search (no final plan: the run ended without one)`;
  };

  Header.formatDuration = formatDuration;

  LEGO.Header = Header;
})();
