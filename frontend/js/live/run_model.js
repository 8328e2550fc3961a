/*
 * LEGO.RunModel: the run page's state, folded from the run's event log.
 * Pure data, no DOM. A classic script (not an ES module) so the same file can
 * be inlined into the self-contained report.html opened from file://.
 *
 *   var model = new LEGO.RunModel();
 *   model.apply({seq: 7, type: "node_created", data: {...}});  // true when applied
 *   model.applyAll(listOfEvents);
 *
 * apply() ignores an event whose seq is <= model.lastSeq, so the duplicates a
 * reconnecting websocket replays are harmless. An event without seq (a raw
 * dict from lego_core, {type, ts, ...fields}) gets lastSeq + 1. Every applied
 * event bumps model.version; every change to a node bumps that node's rev.
 *
 * Node states (node.state; node.outcome is the same without the "chosen"
 * override, e.g. what a chosen node's own result was):
 *
 * OR nodes
 *   pending   created, no work on it yet (also: leaves no agent is asked for)
 *   unexplored  what pending becomes once the run ended (run_finished or
 *             run_failed): the search never worked on the node. A distinct
 *             state with its own neutral colour, so a finished tree does not
 *             look as if it still waited for work.
 *   running   node_started was seen and its result has not arrived: waiting
 *             for the cache/agent, or a proposed kernel waits for verification
 *   verified  some kernel candidate passed verification
 *   failed    every kernel candidate failed verification (a retry's
 *             node_started makes the node running again)
 *   library   the node's work is over without any kernel candidate, so it
 *             keeps the library (PyTorch eager) implementation: lego_core
 *             says so with node_finished {outcome: "library"} (the agent
 *             answered without a kernel, the cache holds "no kernel", the
 *             sub-problem is over the memory limit, or a budget ran out
 *             while the agent worked). Nothing else makes a node "library";
 *             a retry's node_started makes it running again.
 *   Work cut short by the run's end (run_failed while a node was running)
 *   leaves the node's state to its candidates: failed when every kernel
 *   failed, otherwise unexplored.
 *   chosen    the node is in the plan: it is in the latest plan_improved's
 *             `chosen` list (a plan item), or one of its AND children is
 *             chosen (the plan goes through that decomposition; see
 *             chosenVia()). This overrides all of the above, so the chosen
 *             sub-tree from the root down to the plan items is coloured.
 *   Reused nodes (node_reused) are flagged reused (reusedFrom, reusedVia).
 *   via dedupe: the node follows its source node's outcome (its candidates are
 *   the source's); via cache: the node's own cached candidate decides.
 *
 * AND nodes
 *   chosen    any of its children (structural, by `parent`) is chosen
 *   verified  it has children and all of them are verified or chosen
 *   pending   otherwise (a "combined" mutation AND, which has no children of
 *             its own, only `shared` ones, stays pending)
 *   unexplored  what pending becomes once the run ended: the search did not
 *             finish this decomposition
 *
 * Header: agentCalls = node_started events minus cache hits (node_reused via
 * cache); tokens = sum of transcript tokens plus the prompt and completion
 * tokens of agent_usage events (promptTokens, completionTokens, costUsd: their
 * parts; per node in n.usage); speedup, costMs, baselineMs and
 * measured come from the latest plan_improved; done/total from progress
 * (reset by stage_started to 0/its total); searchStartedTs from the first
 * stage_started with stage "search".
 *
 * Streaming LLM replies: transcript_chunk events fill n.streams (one entry per
 * agent call, {agent, call, text}, pieces joined in seq order) while the call
 * goes; the call's stored transcript replaces its stream when it arrives (the
 * first "user" message of that agent on the node closes the oldest open
 * stream; chunks of a closed call are dropped).
 *
 * Live view (issue 32): node.estimateMs is the cost model's library estimate
 * from node_created (what the time view shows until a time is measured);
 * node.bornSeq the seq that created it (the tree keeps the newest nodes, the
 * construction frontier, drawn); header.busy the OR nodes agents work on now
 * (running); header.nodes the nodes made so far. activity holds the last
 * ACTIVITY_MAX lines of what happened ({seq, ts, text, nodeId}), newest
 * last: an agent started, a kernel verified or failed, a fusion tried, a
 * cache hit, a better plan, a stage; node_created events of one burst fold
 * into one "constructed N nodes" line.
 *
 * planHistory[i].t: seconds since the search started (the origin of the
 * report's time_to_first/final_plan_s), or since the run started for a plan
 * before any search stage (timeOrigin()).
 */
(function () {
  "use strict";
  var LEGO = (window.LEGO = window.LEGO || {});

  var ACTIVITY_MAX = 8;
  // what each pipeline stage is, in the activity line
  var STAGE_TEXT = {
    load: "loading the model", capture: "capturing the graph (torch.export)", construct: "constructing the FusionTree",
    search: "search started: agents at work", compose: "composing the plan", verify: "end-to-end check of the composed model",
    launch: "choosing the launch (plan or original forward)",
  };

  function num(v) {
    return typeof v === "number" && isFinite(v) ? v : null;
  }

  function list(v) {
    return Array.isArray(v) ? v : [];
  }

  /* The module an OR node's region belongs to: the event's module_path, or
     (logs from before it had one) the label's "layers.0.attn (Attention)" /
     "layers.0.attn · mul, add" prefix; "" for the model's own ops. */
  function modulePathOf(d) {
    if (typeof d.module_path === "string") return d.module_path;
    var label = d.label == null ? "" : String(d.label);
    var m = /^([A-Za-z_][\w.]*)(?: \(| \u00b7 )/.exec(label);
    return m && m[1] !== "model" ? m[1] : "";
  }

  function RunModel() {
    this.lastSeq = 0;
    this.version = 0;
    this.nodes = new Map();
    this.order = [];
    this.chosen = new Set();
    this.plan = null; // the latest plan_improved data (chosen in schedule order)
    this.header = {
      state: "queued",
      model: "",
      dtype: "",
      device: "",
      overrides: null,
      stage: "",
      startedTs: null,
      searchStartedTs: null,
      lastTs: null,
      endedTs: null,
      agentCalls: 0,
      tokens: 0,
      promptTokens: 0,
      completionTokens: 0,
      costUsd: 0,
      agents: [], // agent names seen in node_started events, in order ("template", or an LLM agent's)
      speedup: null,
      costMs: null,
      baselineMs: null,
      measured: false,
      items: 0,
      done: 0,
      total: 0,
      busy: 0, // OR nodes agents work on now
      nodes: 0, // tree nodes made so far
    };
    this.activity = []; // the last ACTIVITY_MAX happenings, newest last
    this.planHistory = [];
    this.failure = null;
    this.finished = null;
    this.ended = false; // run_finished or run_failed applied: pending reads "unexplored"
    this._firstTs = null;
    this._starts = 0;
    this._cacheHits = 0;
    this._running = new Set(); // OR node ids in the running state
    this._followers = new Map(); // source id -> ids of nodes reusing it via dedupe
    this._orphans = new Map(); // parent id not seen yet -> child ids
  }

  RunModel.prototype.apply = function (event) {
    if (!event || typeof event.type !== "string") return false;
    var seq = typeof event.seq === "number" ? event.seq : this.lastSeq + 1;
    if (seq <= this.lastSeq) return false;
    this.lastSeq = seq;
    var data = event.data && typeof event.data === "object" ? event.data : event;
    var ts = num(data.ts);
    if (ts !== null) {
      this.header.lastTs = ts;
      if (this._firstTs === null) this._firstTs = ts;
    }
    var handler = HANDLERS[event.type];
    if (handler) handler.call(this, data, ts);
    this.version++;
    return true;
  };

  RunModel.prototype.applyAll = function (events) {
    var applied = 0;
    for (var i = 0; i < events.length; i++) if (this.apply(events[i])) applied++;
    return applied;
  };

  /* The implementation the plan would use for an OR node: the fastest of its
     library time and its verified, timed kernels (library on a tie, as
     lego_core's plan does). Reused (dedupe) nodes use their source's kernels.
     -> {implementation: "triton"|"library", ms, measured, candidateId} */
  RunModel.prototype.bestImplementation = function (id) {
    var n = this.nodes.get(id);
    if (!n) return { implementation: "library", ms: null, measured: false, candidateId: null };
    var lib = n.library || (this.sourceOf(n) || {}).library || null;
    var best = {
      implementation: "library",
      ms: lib ? lib.ms : null,
      measured: lib ? !!lib.measured : false,
      candidateId: lib ? n.id + "-library" : null,
    };
    var cands = this.candidatesOf(n);
    for (var i = 0; i < cands.length; i++) {
      var c = cands[i];
      if (c.implementation === "library" || !c.verification || !c.verification.passed || !c.timing) continue;
      if (best.ms === null || c.timing.ms < best.ms) {
        best = { implementation: "triton", ms: c.timing.ms, measured: !!c.timing.measured, candidateId: c.id };
      }
    }
    return best;
  };

  /* The node a dedupe-reused node follows, or null. */
  RunModel.prototype.sourceOf = function (n) {
    if (typeof n === "string") n = this.nodes.get(n);
    if (!n || !n.reusedFrom || n.reusedFrom === "cache") return null;
    var src = this.nodes.get(n.reusedFrom);
    return src && src !== n ? src : null;
  };

  /* Candidates that decide a node's result: a dedupe-reused node's are its source's. */
  RunModel.prototype.candidatesOf = function (n) {
    if (typeof n === "string") n = this.nodes.get(n);
    if (!n) return [];
    var src = this.sourceOf(n);
    return src && !n.candidates.length ? src.candidates : n.candidates;
  };

  /* Epoch seconds the plan history counts from: the search's start, else
     the run's start, else the first event's time (null without any). */
  RunModel.prototype.timeOrigin = function () {
    var h = this.header;
    if (h.searchStartedTs !== null) return h.searchStartedTs;
    if (h.startedTs !== null) return h.startedTs;
    return this._firstTs;
  };

  /* Why an OR node is chosen: {item: true} when it is a plan item itself,
     {item: false, via: [AND ids]} when the plan goes through its chosen
     decomposition(s), null when it is not in the plan. */
  RunModel.prototype.chosenVia = function (id) {
    var n = this.nodes.get(String(id));
    if (!n || n.state !== "chosen") return null;
    if (n.kind === "and") return { item: false, via: [] };
    if (this.chosen.has(n.id)) return { item: true, via: [] };
    var via = [];
    for (var i = 0; i < n.children.length; i++) {
      var c = this.nodes.get(n.children[i]);
      if (c && c.kind === "and" && c.state === "chosen") via.push(c.id);
    }
    return { item: false, via: via };
  };

  /* The plan's compute sub-problems (its items but the layout-only ones:
     views and permutes, free in the cost model), the count the report calls
     "sub-problems". */
  RunModel.prototype.computeItems = function () {
    var self = this;
    return this.chosenItems().filter(function (it) {
      var n = self.nodes.get(it.id);
      return !n || n.regionKind !== "layout";
    });
  };

  /* The time view's boxes: the plan's compute items, or before any plan
     (the tree is built, the first library timings are not in) those of
     the partition the search starts from (startingItems), with the cost
     model's estimates. */
  RunModel.prototype.viewItems = function () {
    if (this.plan || this.chosen.size) return this.computeItems();
    return this.itemsOf(this.startingItems()).filter(function (it) {
      return it.regionKind !== "layout";
    });
  };

  /* The latest plan's items, in schedule order. */
  RunModel.prototype.chosenItems = function () {
    return this.itemsOf(this.plan ? list(this.plan.chosen) : Array.from(this.chosen));
  };

  /* Plan items for OR node ids: label, ops, library (baseline) time (the
     cost model's estimate until one is timed), the chosen implementation's
     time, whether measured. */
  RunModel.prototype.itemsOf = function (ids) {
    var out = [];
    for (var i = 0; i < ids.length; i++) {
      var id = ids[i];
      var n = this.nodes.get(id);
      var best = this.bestImplementation(id);
      var lib = n ? n.library || (this.sourceOf(n) || {}).library || null : null;
      if (!lib && n && n.estimateMs !== null) lib = { ms: n.estimateMs, measured: false };
      out.push({
        id: id,
        label: n ? n.label : id,
        ops: n ? n.ops.length : 0,
        opNames: n ? n.ops.slice() : [],
        baselineMs: lib ? lib.ms : null,
        chosenMs: best.ms,
        measured: best.implementation === "library" ? (lib ? !!lib.measured : false) : best.measured,
        implementation: best.implementation,
        candidateId: best.candidateId,
        reused: n ? n.reused : false,
        modulePath: n ? n.modulePath : "",
        regionKind: n ? n.regionKind : "",
      });
    }
    return out;
  };

  /* Ids of the OR leaves under the root through each OR node's first AND
     child (the top-down construction's own split), in tree order. */
  RunModel.prototype.startingItems = function () {
    var out = [];
    var roots = [];
    for (var i = 0; i < this.order.length; i++) {
      var r = this.nodes.get(this.order[i]);
      if (r && r.kind === "or" && (!r.parent || !this.nodes.has(r.parent))) roots.push(r);
    }
    var stack = roots.reverse();
    while (stack.length) {
      var n = stack.pop();
      if (n.kind === "and") {
        for (var k = n.children.length - 1; k >= 0; k--) {
          var c = this.nodes.get(n.children[k]);
          if (c) stack.push(c);
        }
        continue;
      }
      var split = null;
      for (var j = 0; j < n.children.length && !split; j++) {
        var a = this.nodes.get(n.children[j]);
        if (a && a.kind === "and" && a.children.length) split = a;
      }
      if (split) stack.push(split);
      else out.push(n.id);
    }
    return out;
  };

  // ------------------------------------------------------------ internals

  RunModel.prototype._node = function (id) {
    return id == null ? null : this.nodes.get(String(id)) || null;
  };

  RunModel.prototype._newNode = function (d) {
    return {
      id: String(d.node_id),
      kind: d.kind === "and" ? "and" : "or",
      parent: d.parent == null ? null : String(d.parent),
      label: d.label == null ? "" : String(d.label),
      signature: d.signature || "",
      ops: list(d.ops),
      shapes: list(d.shapes),
      inputShapes: list(d.input_shapes),
      reference: d.reference || "",
      modulePath: modulePathOf(d),
      regionKind: d.region_kind || "",
      shared: list(d.shared).map(String),
      children: [],
      depth: 0,
      state: "pending",
      outcome: "pending",
      reused: !!d.reused,
      reusedFrom: null,
      reusedVia: null,
      usable: null,
      candidates: [],
      library: null,
      transcript: [],
      streams: [],
      usage: { promptTokens: 0, completionTokens: 0, costUsd: 0, calls: 0 },
      _closedCalls: {},
      attempts: 0,
      createdTs: num(d.ts),
      estimateMs: num(d.estimate_ms),
      bornSeq: this.lastSeq,
      agent: "",
      rev: 0,
      _running: false,
      _noKernel: false,
    };
  };

  RunModel.prototype._setDepth = function (n, depth) {
    var stack = [[n, depth]];
    while (stack.length) {
      var item = stack.pop();
      item[0].depth = item[1];
      for (var i = 0; i < item[0].children.length; i++) {
        var c = this.nodes.get(item[0].children[i]);
        if (c) stack.push([c, item[1] + 1]);
      }
    }
  };

  RunModel.prototype._computeOutcome = function (n) {
    if (n.kind === "and") {
      var anyChosen = false;
      var allDone = n.children.length > 0;
      for (var i = 0; i < n.children.length; i++) {
        var c = this.nodes.get(n.children[i]);
        var s = c ? c.state : "pending";
        if (s === "chosen") anyChosen = true;
        if (s !== "verified" && s !== "chosen") allDone = false;
      }
      return anyChosen ? "chosen" : allDone ? "verified" : this._pending();
    }
    var src = this.sourceOf(n);
    if (src && !n.candidates.length && !n._running) return src.outcome;
    if (n._running) return "running";
    var kernels = 0;
    var failed = 0;
    var waiting = 0;
    for (var j = 0; j < n.candidates.length; j++) {
      var cand = n.candidates[j];
      if (cand.implementation === "library") continue;
      kernels++;
      if (!cand.verification) waiting++;
      else if (cand.verification.passed) return "verified";
      else failed++;
    }
    if (kernels && failed === kernels) return "failed";
    if (n._noKernel) return "library";
    if (waiting && !this.ended) return "running";
    return this._pending();
  };

  RunModel.prototype._pending = function () {
    return this.ended ? "unexplored" : "pending";
  };

  /* An OR node is in the plan when it is a plan item or when one of its
     decompositions (AND children) is chosen. */
  RunModel.prototype._inPlan = function (n) {
    if (this.chosen.has(n.id)) return true;
    for (var i = 0; i < n.children.length; i++) {
      var c = this.nodes.get(n.children[i]);
      if (c && c.kind === "and" && c.state === "chosen") return true;
    }
    return false;
  };

  /* Recompute a node's state and, when it changes, its dependents' (nodes
     reusing it, its parent: an AND follows its parts, an OR its
     decompositions). */
  RunModel.prototype._refresh = function (id) {
    var stack = [id];
    var guard = 0;
    while (stack.length && guard++ < 100000) {
      var n = this.nodes.get(stack.pop());
      if (!n) continue;
      var outcome = this._computeOutcome(n);
      var state = n.kind === "or" && this._inPlan(n) ? "chosen" : outcome;
      if (outcome === n.outcome && state === n.state) continue;
      n.outcome = outcome;
      n.state = state;
      n.rev++;
      if (n.kind === "or") {
        var followers = this._followers.get(n.id);
        if (followers) for (var i = 0; i < followers.length; i++) stack.push(followers[i]);
      }
      if (n.parent && this.nodes.has(n.parent)) stack.push(n.parent);
    }
  };

  /* The run ended: no node runs any more; every node still pending (or
     cut short while running) becomes unexplored. */
  RunModel.prototype._end = function () {
    if (this.ended) return;
    this.ended = true;
    for (var i = 0; i < this.order.length; i++) {
      var n = this.nodes.get(this.order[i]);
      if (!n) continue;
      if (n._running) this._setRunning(n, false);
      if (n.outcome === "pending" || n.outcome === "running") this._refresh(n.id);
    }
  };

  RunModel.prototype._closeStream = function (n, agent) {
    // the oldest open stream of `agent`: its call ended and its whole transcript is here
    for (var i = 0; i < n.streams.length; i++) {
      if (n.streams[i].agent === agent) {
        n._closedCalls[n.streams[i].call] = true;
        n.streams.splice(i, 1);
        return;
      }
    }
  };

  RunModel.prototype._touch = function (n) {
    n.rev++;
    this._refresh(n.id);
  };

  RunModel.prototype._setRunning = function (n, running) {
    n._running = running;
    if (running) this._running.add(n.id);
    else this._running.delete(n.id);
    this.header.busy = this._running.size;
  };

  /* One line of the activity ticker; ``fold``: a key whose last line is
     replaced instead of adding one (a burst of node_created events). */
  RunModel.prototype._note = function (text, nodeId, ts, fold) {
    var last = this.activity[this.activity.length - 1];
    var line = { seq: this.lastSeq, ts: ts, text: text, nodeId: nodeId == null ? null : String(nodeId), fold: fold || null };
    if (fold && last && last.fold === fold) this.activity[this.activity.length - 1] = line;
    else {
      this.activity.push(line);
      if (this.activity.length > ACTIVITY_MAX) this.activity.shift();
    }
  };

  /* A node's name in the ticker: its label, cut at 60 characters. */
  RunModel.prototype._name = function (n) {
    if (!n) return "?";
    var label = String(n.label || n.id);
    return label.length > 60 ? label.slice(0, 59) + "\u2026" : label;
  };

  RunModel.prototype._candidate = function (n, id, create) {
    for (var i = 0; i < n.candidates.length; i++) if (n.candidates[i].id === id) return n.candidates[i];
    if (!create) return null;
    var c = { id: id, agent: "", implementation: "triton", source: "", verification: null, timing: null };
    n.candidates.push(c);
    return c;
  };

  // --------------------------------------------------------------- events

  var HANDLERS = {
    run_started: function (d, ts) {
      var h = this.header;
      h.state = "running";
      h.model = d.model || "";
      h.dtype = d.dtype || "";
      h.device = d.device || "";
      h.overrides = d.overrides || null;
      h.startedTs = ts;
    },

    stage_started: function (d, ts) {
      if (d.stage === "search" && this.header.searchStartedTs === null) this.header.searchStartedTs = ts;
      this.header.stage = d.stage || "";
      if (d.stage) this._note(STAGE_TEXT[d.stage] || d.stage, null, ts);
      this.header.done = 0;
      this.header.total = num(d.total) || 0;
    },

    progress: function (d) {
      if (d.stage) this.header.stage = d.stage;
      this.header.done = num(d.done) || 0;
      this.header.total = num(d.total) || 0;
    },

    node_created: function (d) {
      if (d.node_id == null) return;
      var id = String(d.node_id);
      var n = this.nodes.get(id);
      if (n) {
        // the same node announced again: take the new fields, keep what happened to it
        var fresh = this._newNode(d);
        ["kind", "label", "signature", "ops", "shapes", "inputShapes", "reference", "shared", "modulePath", "regionKind"].forEach(function (k) {
          n[k] = fresh[k];
        });
        this._touch(n);
        return;
      }
      n = this._newNode(d);
      this.nodes.set(id, n);
      this.order.push(id);
      this.header.nodes = this.order.length;
      this._note("constructed " + this.order.length + " tree node" + (this.order.length === 1 ? "" : "s"), id, num(d.ts), "construct");
      var parent = this._node(n.parent);
      if (parent) {
        parent.children.push(id);
        n.depth = parent.depth + 1;
      } else if (n.parent) {
        if (!this._orphans.has(n.parent)) this._orphans.set(n.parent, []);
        this._orphans.get(n.parent).push(id);
      }
      var orphans = this._orphans.get(id);
      if (orphans) {
        this._orphans.delete(id);
        for (var i = 0; i < orphans.length; i++) n.children.push(orphans[i]);
        this._setDepth(n, n.depth);
      }
      this._refresh(id);
      if (parent) this._refresh(parent.id); // an AND with a new pending child is no longer all verified
    },

    node_reused: function (d) {
      var n = this._node(d.node_id);
      if (!n) return;
      var from = d.reused_from == null ? null : String(d.reused_from);
      n.reused = true;
      n.reusedFrom = from;
      n.reusedVia = d.via || (from === "cache" ? "cache" : "dedupe");
      n.usable = d.usable !== false;
      if (n.reusedVia === "cache" || from === "cache") {
        this._note("cache hit for " + this._name(n) + (n.usable ? "" : " (no kernel)"), n.id, num(d.ts));
        this._cacheHits++;
        this.header.agentCalls = Math.max(0, this._starts - this._cacheHits);
      } else if (from) {
        if (!this._followers.has(from)) this._followers.set(from, []);
        if (this._followers.get(from).indexOf(n.id) < 0) this._followers.get(from).push(n.id);
      }
      this._touch(n);
    },

    node_started: function (d, ts) {
      var n = this._node(d.node_id);
      this._starts++;
      this.header.agentCalls = Math.max(0, this._starts - this._cacheHits);
      if (!n) return;
      var attempt = num(d.attempt);
      n.attempts = attempt !== null ? Math.max(attempt, n.attempts) : n.attempts + 1;
      n.agent = d.agent || n.agent || "";
      if (d.agent && this.header.agents.indexOf(d.agent) < 0) this.header.agents.push(d.agent);
      n.startedTs = ts;
      this._note("agent " + (n.agent || "?") + " started on " + this._name(n) + (n.attempts > 1 ? " (attempt " + n.attempts + ")" : ""), n.id, ts);
      n._noKernel = false;
      this._setRunning(n, true);
      this._touch(n);
    },

    node_finished: function (d, ts) {
      // lego_core says how the node's work ended: verified, failed or library
      var n = this._node(d.node_id);
      if (!n) return;
      this._setRunning(n, false);
      n._noKernel = d.outcome === "library";
      if (n._noKernel) this._note("no kernel for " + this._name(n) + ": the library implementation stays", n.id, ts);
      this._touch(n);
    },

    candidate_proposed: function (d) {
      var n = this._node(d.node_id);
      if (!n || d.candidate_id == null) return;
      var c = this._candidate(n, String(d.candidate_id), true);
      c.agent = d.agent || "";
      c.implementation = d.implementation || "triton";
      c.source = d.source || "";
      if (c.implementation !== "library" && !c.verification) this._setRunning(n, true);
      this._touch(n);
    },

    transcript: function (d, ts) {
      var tokens = num(d.tokens) || 0;
      this.header.tokens += tokens;
      var n = this._node(d.node_id);
      if (!n) return;
      n.transcript.push({
        agent: d.agent || "",
        role: d.role || "",
        content: d.content == null ? "" : String(d.content),
        tokens: tokens,
        ts: ts,
      });
      if (d.agent === "mutation" || d.agent === "scheduler" || d.agent === "judge") this._note((d.agent === "mutation" ? "fusion tried: " : d.agent + ": ") + String(d.content || "").slice(0, 90), n.id, ts);
      if (d.role === "user") this._closeStream(n, d.agent || "");
      n.rev++;
    },

    transcript_chunk: function (d) {
      var n = this._node(d.node_id);
      if (!n || d.call == null || n._closedCalls[String(d.call)]) return;
      var call = String(d.call);
      var s = null;
      for (var i = 0; i < n.streams.length; i++) if (n.streams[i].call === call) s = n.streams[i];
      if (!s) {
        s = { agent: d.agent || "", call: call, parts: [], text: "" };
        n.streams.push(s);
      }
      var seq = num(d.seq);
      s.parts[seq !== null && seq >= 0 && seq < 100000 ? seq : s.parts.length] = d.text == null ? "" : String(d.text);
      s.text = s.parts.join("");
      n.rev++;
    },

    agent_usage: function (d) {
      var p = num(d.prompt_tokens) || 0, c = num(d.completion_tokens) || 0, cost = num(d.cost_usd) || 0;
      var h = this.header;
      h.tokens += p + c;
      h.promptTokens += p;
      h.completionTokens += c;
      h.costUsd += cost;
      var n = this._node(d.node_id);
      if (!n) return;
      n.usage.promptTokens += p;
      n.usage.completionTokens += c;
      n.usage.costUsd += cost;
      n.usage.calls++;
      n.rev++;
    },

    verification: function (d) {
      var n = this._node(d.node_id);
      if (!n || d.candidate_id == null) return;
      var c = this._candidate(n, String(d.candidate_id), true);
      c.verification = {
        passed: !!d.passed,
        max_abs_error: d.max_abs_error == null ? null : d.max_abs_error,
        reason: d.reason || "",
      };
      this._note((d.passed ? "kernel verified for " : "kernel failed verification for ") + this._name(n), n.id, num(d.ts));
      var waiting = n.candidates.some(function (x) {
        return x.implementation !== "library" && !x.verification;
      });
      if (!waiting) this._setRunning(n, false);
      this._touch(n);
    },

    timing: function (d) {
      var n = this._node(d.node_id);
      if (!n || d.candidate_id == null) return;
      var cid = String(d.candidate_id);
      if (cid === n.id + "-library" || /-library$/.test(cid)) {
        n.library = { ms: num(d.ms), measured: !!d.measured };
      } else {
        var c = this._candidate(n, cid, true);
        c.timing = { ms: num(d.ms), measured: !!d.measured, baseline_ms: num(d.baseline_ms) };
        this._note(this._name(n) + ": kernel " + LEGO.formatMs(num(d.ms)) + (num(d.baseline_ms) !== null ? " vs library " + LEGO.formatMs(num(d.baseline_ms)) : "") +
          (d.measured ? "" : " (estimated)"), n.id, num(d.ts));
        if (!n.library && num(d.baseline_ms) !== null) n.library = { ms: num(d.baseline_ms), measured: !!d.measured };
      }
      n.rev++;
    },

    plan_improved: function (d, ts) {
      var h = this.header;
      h.speedup = num(d.speedup);
      h.costMs = num(d.cost_ms);
      h.baselineMs = num(d.baseline_ms);
      h.measured = !!d.measured;
      h.items = num(d.items) || list(d.chosen).length;
      this.plan = d;
      if (!d.initial && h.speedup !== null) this._note("better plan: " + h.speedup.toFixed(2) + "\u00d7 over the library (" + (h.measured ? "measured" : "estimated") + ")", null, ts);
      var origin = this.timeOrigin();
      // the search's own clock when the event has it: the same numbers as the
      // report's time_to_first/final_plan_s
      var t = num(d.elapsed_s);
      if (t === null) t = ts !== null && origin !== null ? ts - origin : null;
      this.planHistory.push({
        t: t,
        speedup: h.speedup,
        costMs: h.costMs,
        baselineMs: h.baselineMs,
        measured: h.measured,
        initial: !!d.initial,
      });
      var next = new Set(list(d.chosen).map(String));
      var prev = this.chosen;
      this.chosen = next;
      var self = this;
      prev.forEach(function (id) {
        if (!next.has(id)) self._refresh(id);
      });
      next.forEach(function (id) {
        if (!prev.has(id)) self._refresh(id);
      });
    },

    run_finished: function (d, ts) {
      this.header.state = "finished";
      this.header.endedTs = ts;
      this.finished = d;
      this._end();
    },

    run_failed: function (d, ts) {
      // a cancel is stored as run_failed with error_type "RunCancelled"
      this.header.state = d.error_type === "RunCancelled" ? "cancelled" : "failed";
      this.header.endedTs = ts;
      this.failure = d;
      this._end();
    },
  };

  RunModel.STATES = ["pending", "unexplored", "running", "verified", "failed", "library", "chosen"];
  LEGO.RunModel = RunModel;

  /* Times are shown in milliseconds everywhere (report.json's *_ms fields),
   * never switched to µs: LEGO.msNumber(0.00312) is "0.00312", the same text
   * as the server's |ms_number filter (webapp/runs/templatetags/run_format.py)
   * for the same number; LEGO.formatMs adds " ms". Three significant digits,
   * plain decimals from 1e-4 on, "1.23e-5" below; null for a non-number
   * (formatMs: `missing`, default "?"). */
  LEGO.msNumber = function (x) {
    if (typeof x !== "number" || !isFinite(x)) return null;
    if (x === 0) return "0";
    if (Math.abs(x) < 1e-4) {
      var parts = x.toExponential(2).split("e");
      return Number(parts[0]) + "e" + Number(parts[1]);
    }
    var r = Number(x.toPrecision(3));
    var text = r.toFixed(Math.max(0, 2 - Math.floor(Math.log10(Math.abs(r)))));
    return text.indexOf(".") >= 0 ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
  };
  LEGO.formatMs = function (x, missing) {
    var text = LEGO.msNumber(x);
    return text === null ? (missing === undefined ? "?" : missing) : text + " ms";
  };
})();
