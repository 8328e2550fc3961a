/*
 * LEGO.NodePanel: everything known about one FusionTree node.
 * A classic script (not an ES module); needs LEGO.RunModel's model object.
 *
 *   var panel = new LEGO.NodePanel(element, model, {onSelect: function (nodeId) {...}});
 *   panel.show(nodeId);   // render that node
 *   panel.refresh();      // re-render the shown node if it changed (cheap otherwise)
 *
 * Node ids inside the panel (parent, children, reused-from, shared) are links;
 * clicking one calls options.onSelect(nodeId) (or panel.onSelect), and without
 * a callback shows that node here. It also dispatches a bubbling
 * "lego:select-node" CustomEvent ({detail: {nodeId}}) on the element.
 * All text is set with textContent: nothing from an event is parsed as HTML.
 * Which <details> are open and the scroll position survive a refresh.
 * Stable hooks: the element gets id "node-panel" if it has none, class
 * "node-panel"; sections .node-summary, .node-reference, .node-candidates,
 * .node-transcript; a reply still streaming is a .transcript-streaming
 * message (data-call: the agent call) after the stored ones.
 */
(function () {
  "use strict";
  var LEGO = (window.LEGO = window.LEGO || {});

  var STATE_TEXT = {
    pending: "pending",
    running: "running",
    verified: "verified kernel",
    failed: "every kernel failed verification",
    library: "library (the agent gave no kernel)",
    chosen: "in the current plan",
    unexplored: "not explored (the run ended before any work on it)",
  };
  var LONG_REFERENCE_LINES = 60;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }

  // milliseconds, as everywhere on the page (LEGO.formatMs, run_model.js)
  function fmtMs(ms) {
    return LEGO.formatMs(ms);
  }

  function fmtShapes(shapes) {
    if (!shapes || !shapes.length) return "\u2014";
    return shapes
      .map(function (s) {
        return Array.isArray(s) ? "[" + s.join(", ") + "]" : s == null ? "(not a tensor)" : String(s);
      })
      .join(", ");
  }

  function fmtUsage(u) {
    var text = (u.promptTokens + u.completionTokens) + " (" + u.promptTokens + " prompt + " + u.completionTokens +
      " completion, " + u.calls + " call" + (u.calls === 1 ? "" : "s") + ")";
    return u.costUsd ? text + ", $" + u.costUsd.toFixed(4) : text;
  }

  function fmtErr(v) {
    if (v === null || v === undefined) return "?";
    if (typeof v === "number") return v === 0 ? "0" : v.toExponential(2);
    return String(v);
  }

  function NodePanel(element, model, options) {
    options = options || {};
    this.element = element;
    this.model = model;
    this.onSelect = options.onSelect || null;
    this.nodeId = null;
    this._renderedKey = null;
    if (!element.id && !document.getElementById("node-panel")) element.id = "node-panel";
    element.classList.add("node-panel");
    var self = this;
    element.addEventListener("click", function (ev) {
      var a = ev.target && ev.target.closest ? ev.target.closest("a[data-node-id]") : null;
      if (!a || !element.contains(a)) return;
      ev.preventDefault();
      var id = a.getAttribute("data-node-id");
      element.dispatchEvent(new CustomEvent("lego:select-node", { bubbles: true, detail: { nodeId: id } }));
      if (self.onSelect) self.onSelect(id);
      else self.show(id);
    });
    this._renderEmpty();
  }

  NodePanel.prototype.show = function (nodeId) {
    this.nodeId = nodeId == null ? null : String(nodeId);
    this._renderedKey = null;
    this.refresh();
    this.element.scrollTop = 0;
  };

  NodePanel.prototype._key = function () {
    var n = this.model.nodes.get(this.nodeId);
    if (!n) return "missing:" + this.nodeId + ":" + this.model.nodes.size;
    var src = this.model.sourceOf(n);
    var key = n.id + ":" + n.rev + ":" + n.state;
    if (src) key += "|" + src.id + ":" + src.rev;
    for (var i = 0; i < n.children.length; i++) {
      var c = this.model.nodes.get(n.children[i]);
      if (c) key += "," + c.state;
    }
    return key + "|" + n.children.length;
  };

  NodePanel.prototype.refresh = function () {
    if (this.nodeId == null) return;
    var key = this._key();
    if (key === this._renderedKey) return;
    var scroll = this.element.scrollTop;
    var open = {};
    var closed = {};
    var details = this.element.querySelectorAll("details[data-key]");
    for (var i = 0; i < details.length; i++) {
      if (details[i].open) open[details[i].getAttribute("data-key")] = true;
      else closed[details[i].getAttribute("data-key")] = true;
    }
    var sameNode = this._renderedNode === this.nodeId;
    this._render();
    if (sameNode) {
      var again = this.element.querySelectorAll("details[data-key]");
      for (var j = 0; j < again.length; j++) {
        var k = again[j].getAttribute("data-key");
        if (open[k]) again[j].open = true;
        else if (closed[k]) again[j].open = false;
      }
      this.element.scrollTop = scroll;
    }
    this._renderedKey = key;
    this._renderedNode = this.nodeId;
  };

  NodePanel.prototype._clear = function () {
    while (this.element.firstChild) this.element.removeChild(this.element.firstChild);
  };

  NodePanel.prototype._renderEmpty = function () {
    this._clear();
    this.element.appendChild(el("p", "node-empty", "Click a node of the tree to see its sub-problem, candidates and agent transcript."));
  };

  NodePanel.prototype._link = function (id) {
    var a = el("a", "node-link", id);
    a.href = "#";
    a.setAttribute("data-node-id", id);
    if (this.model.nodes.has(id)) a.title = this.model.nodes.get(id).label;
    return a;
  };

  NodePanel.prototype._links = function (ids, max) {
    var frag = document.createDocumentFragment();
    var shown = Math.min(ids.length, max || ids.length);
    for (var i = 0; i < shown; i++) {
      if (i) frag.appendChild(document.createTextNode(" "));
      frag.appendChild(this._link(ids[i]));
    }
    if (ids.length > shown) frag.appendChild(document.createTextNode(" \u2026 (" + ids.length + " in all)"));
    return frag;
  };

  function row(dl, term, value) {
    dl.appendChild(el("dt", null, term));
    var dd = el("dd");
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = value == null || value === "" ? "\u2014" : String(value);
    dl.appendChild(dd);
    return dd;
  }

  function details(key, summary, open) {
    var d = el("details");
    d.setAttribute("data-key", key);
    if (open) d.open = true;
    d.appendChild(el("summary", null, summary));
    return d;
  }

  NodePanel.prototype._render = function () {
    var model = this.model;
    var n = model.nodes.get(this.nodeId);
    this._clear();
    var root = this.element;
    if (!n) {
      root.appendChild(el("p", "node-empty", "Node " + this.nodeId + " is not in the tree (yet)."));
      return;
    }

    // summary
    var head = el("section", "node-summary");
    var title = el("h3", "node-title");
    title.appendChild(el("span", "node-kind node-kind-" + n.kind, n.kind === "and" ? "AND" : "OR"));
    title.appendChild(document.createTextNode(" "));
    title.appendChild(el("span", "node-label", n.label || n.id));
    head.appendChild(title);
    var badges = el("p", "node-badges");
    var why = typeof model.chosenVia === "function" ? model.chosenVia(n.id) : null;
    var via = why && !why.item && why.via.length ? why.via : null;
    var badge = el("span", "node-state node-state-" + n.state, STATE_TEXT[n.state] || n.state);
    if (via) {
      // an OR node whose plan goes through one of its decompositions
      badge.textContent = "in the plan through decomposition ";
      badge.appendChild(this._links(via, 4));
      badge.classList.add("node-state-via");
    }
    badges.appendChild(badge);
    if (n.state === "chosen" && n.outcome && n.outcome !== "chosen") {
      badges.appendChild(el("span", "node-outcome", "own result: " + (STATE_TEXT[n.outcome] || n.outcome)));
    }
    if (n.reused) badges.appendChild(el("span", "node-reused-badge", "reused"));
    head.appendChild(badges);

    var dl = el("dl", "node-facts");
    row(dl, "id", n.id);
    row(dl, "parent", n.parent ? this._link(n.parent) : "\u2014 (root)");
    if (n.children.length) row(dl, n.kind === "or" ? "decompositions" : "parts", this._links(n.children, 40));
    if (n.kind === "and" && n.shared.length) row(dl, "shared OR nodes", this._links(n.shared, 40));
    if (n.kind === "or") {
      row(dl, "signature", n.signature);
      var ops = el("span");
      ops.textContent = n.ops.length + " op" + (n.ops.length === 1 ? "" : "s");
      if (n.ops.length) {
        var od = details("ops", n.ops.length + " op" + (n.ops.length === 1 ? "" : "s"), n.ops.length <= 8);
        od.appendChild(el("pre", "node-ops", n.ops.join("\n")));
        row(dl, "ops", od);
      } else {
        row(dl, "ops", ops);
      }
      row(dl, "input shapes", fmtShapes(n.inputShapes));
      row(dl, "output shapes", fmtShapes(n.shapes));
      if (n.reused) {
        var rf = el("span");
        if (n.reusedFrom && n.reusedFrom !== "cache") {
          rf.appendChild(this._link(n.reusedFrom));
          rf.appendChild(document.createTextNode(" (same signature, " + (n.reusedVia || "dedupe") + ")"));
        } else {
          rf.textContent = "the kernel cache of earlier runs" + (n.usable === false ? " (no kernel there)" : "");
        }
        row(dl, "reused from", rf);
      }
      if (n.attempts) row(dl, "agent attempts", n.attempts + (n.agent ? " (" + n.agent + ")" : ""));
      if (n.usage && n.usage.calls) row(dl, "tokens", fmtUsage(n.usage));
      var best = model.bestImplementation(n.id);
      if (best.ms !== null) {
        row(dl, "best time", fmtMs(best.ms) + " \u00b7 " + best.implementation + (best.measured ? ", measured" : ", estimated"));
      }
    }
    head.appendChild(dl);
    root.appendChild(head);

    if (n.kind === "and") return;

    // reference
    var ref = el("section", "node-reference");
    ref.appendChild(el("h4", null, "Reference (PyTorch)"));
    if (n.reference) {
      var lines = n.reference.split("\n").length;
      var rd = details("reference", lines + " lines", lines <= LONG_REFERENCE_LINES);
      rd.appendChild(el("pre", "code", n.reference));
      ref.appendChild(rd);
    } else {
      ref.appendChild(el("p", "muted", "No reference source for this node."));
    }
    root.appendChild(ref);

    // candidates
    var cands = el("section", "node-candidates");
    cands.appendChild(el("h4", null, "Implementations"));
    var src = model.sourceOf(n);
    var list = model.candidatesOf(n);
    if (src && list === src.candidates && list.length) {
      var note = el("p", "muted");
      note.appendChild(document.createTextNode("Kernels of "));
      note.appendChild(this._link(src.id));
      note.appendChild(document.createTextNode(", reused here:"));
      cands.appendChild(note);
    }
    var table = el("table", "node-candidate-table");
    var thead = el("tr");
    ["candidate", "agent", "verification", "time", "vs library"].forEach(function (h) {
      thead.appendChild(el("th", null, h));
    });
    table.appendChild(thead);
    var lib = n.library || (src ? src.library : null);
    var libRow = el("tr", "node-candidate node-candidate-library");
    libRow.appendChild(el("td", null, "library (PyTorch eager)"));
    libRow.appendChild(el("td", null, "\u2014"));
    libRow.appendChild(el("td", null, "reference"));
    libRow.appendChild(el("td", null, lib ? fmtMs(lib.ms) + (lib.measured ? "" : " (est.)") : "?"));
    libRow.appendChild(el("td", null, "1\u00d7"));
    table.appendChild(libRow);
    for (var i = 0; i < list.length; i++) {
      var c = list[i];
      var tr = el("tr", "node-candidate");
      tr.setAttribute("data-candidate-id", c.id);
      tr.appendChild(el("td", null, c.id + (c.implementation && c.implementation !== "triton" ? " (" + c.implementation + ")" : "")));
      tr.appendChild(el("td", null, c.agent || "\u2014"));
      var v = el("td", "node-verification");
      if (!c.verification) v.appendChild(el("span", "verdict verdict-wait", c.implementation === "library" ? "\u2014" : "waiting"));
      else {
        v.appendChild(el("span", "verdict " + (c.verification.passed ? "verdict-pass" : "verdict-fail"), c.verification.passed ? "passed" : "failed"));
        v.appendChild(document.createTextNode(" max err " + fmtErr(c.verification.max_abs_error)));
        if (c.verification.reason) v.appendChild(el("div", "verdict-reason", c.verification.reason));
      }
      tr.appendChild(v);
      tr.appendChild(el("td", null, c.timing ? fmtMs(c.timing.ms) + (c.timing.measured ? "" : " (est.)") : "\u2014"));
      var base = c.timing && c.timing.baseline_ms != null ? c.timing.baseline_ms : lib ? lib.ms : null;
      var ratio = c.timing && c.timing.ms && base != null ? (base / c.timing.ms).toFixed(2) + "\u00d7" : "\u2014";
      tr.appendChild(el("td", null, ratio));
      table.appendChild(tr);
      if (c.source) {
        var srcRow = el("tr", "node-candidate-source");
        var td = el("td");
        td.colSpan = 5;
        var sd = details("source:" + c.id, "kernel source (" + c.source.split("\n").length + " lines)", false);
        sd.appendChild(el("pre", "code", c.source));
        td.appendChild(sd);
        srcRow.appendChild(td);
        table.appendChild(srcRow);
      }
    }
    cands.appendChild(table);
    if (!list.length) {
      var none = el("p", "muted node-no-candidates");
      if (via) {
        none.appendChild(document.createTextNode("No kernel candidates: the plan uses this sub-problem through decomposition "));
        none.appendChild(this._links(via, 4));
        none.appendChild(document.createTextNode(" (its parts are implemented instead)."));
      } else if (n.state === "running") {
        none.textContent = "Waiting for the agent\u2026";
      } else if (n.state === "unexplored") {
        none.textContent = "No kernel candidates: the run ended without work on this node.";
      } else if (model.ended || n.state === "library") {
        none.textContent = "No kernel candidates.";
      } else {
        none.textContent = "No kernel candidates yet.";
      }
      cands.appendChild(none);
    }
    root.appendChild(cands);

    // transcript
    var tr2 = el("section", "node-transcript");
    var msgs = n.transcript;
    tr2.appendChild(el("h4", null, "Agent transcript (" + msgs.length + " message" + (msgs.length === 1 ? "" : "s") + ")"));
    if (src && src.transcript.length) {
      var tn = el("p", "muted");
      tn.appendChild(document.createTextNode("The agent's work is in the transcript of "));
      tn.appendChild(this._link(src.id));
      tn.appendChild(document.createTextNode("."));
      tr2.appendChild(tn);
    }
    if (!msgs.length) tr2.appendChild(el("p", "muted", "No messages."));
    for (var m = 0; m < msgs.length; m++) {
      var msg = msgs[m];
      var box = el("div", "transcript-message role-" + String(msg.role).replace(/[^a-z0-9_-]/gi, ""));
      var meta = el("div", "transcript-meta");
      meta.appendChild(el("span", "transcript-role", msg.role || "?"));
      meta.appendChild(el("span", "transcript-agent", msg.agent || ""));
      if (msg.tokens) meta.appendChild(el("span", "transcript-tokens", msg.tokens + " tokens"));
      box.appendChild(meta);
      box.appendChild(el("pre", "transcript-content", msg.content));
      tr2.appendChild(box);
    }
    var streams = n.streams || [];
    for (var w = 0; w < streams.length; w++) {
      // a reply still being written (transcript_chunk); the stored message replaces it
      var live = el("div", "transcript-message role-agent transcript-streaming");
      live.setAttribute("data-call", streams[w].call);
      var lm = el("div", "transcript-meta");
      lm.appendChild(el("span", "transcript-role", "agent"));
      lm.appendChild(el("span", "transcript-agent", streams[w].agent));
      lm.appendChild(el("span", "transcript-tokens", "writing\u2026"));
      live.appendChild(lm);
      live.appendChild(el("pre", "transcript-content", streams[w].text));
      tr2.appendChild(live);
    }
    root.appendChild(tr2);
  };

  LEGO.NodePanel = NodePanel;
})();
