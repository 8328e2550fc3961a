// LEGO.EventStream: a run's events over its websocket (webapp/runs/consumers.py).
//
//   const stream = new LEGO.EventStream(live, onEvents, onState, {statusEl, onEnd, onStop, onQueuePosition, staleMs});
//   stream.start();
//
// `live` is the page's #run-live JSON ({run_id, ws_path, share_token, state,
// active}).  The server sends {"type":"events","events":[{seq,type,data}],
// "state"}, {"type":"state","state","last_seq"} and {"type":"end","state",
// "last_seq"} and then closes with 1000.  Events come in increasing seq; an
// event already applied (seq <= lastSeq) is dropped and a gap (seq >
// lastSeq + 1) makes the stream reconnect with ?after=lastSeq.  Close codes
// 4403 (not allowed) and 4404 (no such run) end the stream with a message
// and call onStop(code, message); any other close before `end` reconnects
// after 0.5 s, doubling up to 5 s.
//
// A stale connection: the window's `offline` event closes the socket and
// shows "offline…" (no reconnect attempts while offline); `online`
// reconnects at once with ?after=lastSeq.  On an active run (state queued or
// running), no message for staleMs (30 s) shows "no events for N s;
// checking…" and reconnects with ?after=lastSeq: the server answers a
// caught-up connection with a `state` message, so a quiet but healthy run
// costs one reconnect per staleMs and a dead connection (no close event
// ever came) is replaced.  The server sends no heartbeats.
(function () {
  "use strict";
  const LEGO = (window.LEGO = window.LEGO || {});

  const FIRST_DELAY_MS = 500;
  const MAX_DELAY_MS = 5000;
  const STALE_MS = 30000;
  const ACTIVE_STATES = new Set(["queued", "running"]);
  // the server checks access when a socket connects (and a share token at
  // every read), so a refusal means the link was revoked or replaced, or
  // this account may not see the run
  const CLOSE_MESSAGES = {
    4403: "The share link was revoked, or you may not watch this run.",
    4404: "This run does not exist any more.",
  };

  class EventStream {
    constructor(live, onEvents, onState, options = {}) {
      this.live = live || {};
      this.onEvents = onEvents || (() => {});
      this.onState = onState || (() => {});
      this.onEnd = options.onEnd || (() => {});
      this.onStop = options.onStop || (() => {});
      this.onQueuePosition = options.onQueuePosition || (() => {});
      this.staleMs = options.staleMs || STALE_MS;
      this.window = options.window || window;
      this.statusEl = options.statusEl || null;
      this.WebSocket = options.WebSocket || window.WebSocket;
      this.lastSeq = options.after || 0;
      this.received = []; // every seq applied, in order (tests read it)
      this.connections = 0; // sockets opened so far
      this.gaps = 0;
      this.ended = false; // `end` arrived: no more reconnects
      this.stopped = false; // 4403/4404 or stop(): no more reconnects
      this.stopCode = null; // 4403 or 4404 when the server refused
      this.offline = false; // the window said `offline`: wait for `online`
      this.staleChecks = 0; // reconnects after staleMs without a message
      this.lastMessageAt = 0; // performance.now() of the last message (or open)
      this.state = this.live.state || "";
      this.delay = FIRST_DELAY_MS;
      this.ws = null;
      this.timer = null;
      this.watchdog = null;
      this._onOffline = () => this.goOffline();
      this._onOnline = () => this.goOnline();
    }

    url() {
      const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
      const token = this.live.share_token;
      return (
        scheme + window.location.host + this.live.ws_path + "?after=" + this.lastSeq +
        (token ? "&share=" + encodeURIComponent(token) : "")
      );
    }

    start() {
      if (!this.listening && this.window && this.window.addEventListener) {
        this.window.addEventListener("offline", this._onOffline);
        this.window.addEventListener("online", this._onOnline);
        this.listening = true;
      }
      if (typeof navigator !== "undefined" && navigator.onLine === false) {
        this.goOffline();
        return this;
      }
      if (!this.ws && !this.ended && !this.stopped) this.connect();
      return this;
    }

    // Queued or running as far as we know (a replay of an ended run is not).
    isActive() {
      if (this.ended || this.stopped) return false;
      return this.state ? ACTIVE_STATES.has(this.state) : !!this.live.active;
    }

    // No message since staleMs on an active run: check by reconnecting.
    armWatchdog() {
      if (this.watchdog) clearTimeout(this.watchdog);
      this.watchdog = null;
      this.lastMessageAt = performance.now();
      if (!this.isActive() || this.offline) return;
      this.watchdog = setTimeout(() => this.stale(), this.staleMs);
    }

    stale() {
      this.watchdog = null;
      if (!this.isActive() || this.offline || !this.ws) return;
      this.staleChecks += 1;
      const seconds = Math.round((performance.now() - this.lastMessageAt) / 1000);
      console.warn(`LEGO stream: no message for ${seconds} s; reconnecting with after=${this.lastSeq}`);
      const ws = this.ws;
      this.ws = null;
      ws.close(4000, "stale");
      this.connect();
      // until the new connection's first message (the server's `state`)
      this.showStatus(`no events for ${seconds} s; checking…`, "stale");
    }

    goOffline() {
      if (this.ended || this.stopped) return;
      this.offline = true;
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      if (this.watchdog) clearTimeout(this.watchdog);
      this.watchdog = null;
      const ws = this.ws;
      this.ws = null;
      if (ws) ws.close(4000, "offline");
      this.showStatus("offline…", "offline");
    }

    goOnline() {
      if (!this.offline) return;
      this.offline = false;
      if (this.ended || this.stopped || this.ws) return;
      this.delay = FIRST_DELAY_MS;
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.showStatus("reconnecting…", "reconnecting");
      this.connect();
    }

    unlisten() {
      if (this.watchdog) clearTimeout(this.watchdog);
      this.watchdog = null;
      if (this.listening) {
        this.window.removeEventListener("offline", this._onOffline);
        this.window.removeEventListener("online", this._onOnline);
        this.listening = false;
      }
    }

    connect() {
      this.timer = null;
      let ws;
      try {
        ws = new this.WebSocket(this.url());
      } catch (err) {
        console.warn("LEGO stream: cannot open the websocket", err);
        this.scheduleReconnect();
        return;
      }
      this.ws = ws;
      this.connections += 1;
      if (this.connections > 1) this.showStatus("reconnecting…", "reconnecting");
      else if (!this.ended) this.showStatus("connecting…", "connecting");
      ws.onopen = () => {
        if (this.ws !== ws) return;
        if (this.statusKind !== "stale") this.showStatus(this.live.active ? "live" : "replaying…", "live");
        this.armWatchdog();
      };
      ws.onmessage = (message) => {
        if (this.ws !== ws) return; // a socket we gave up on
        let data;
        try {
          data = JSON.parse(message.data);
        } catch (err) {
          console.warn("LEGO stream: not JSON", message.data);
          return;
        }
        this.delay = FIRST_DELAY_MS; // the connection works: the next drop retries quickly
        if (this.statusKind === "stale") {
          this.showStatus(this.live.active ? "live" : "replaying…", "live");
        }
        this.handle(data);
        this.armWatchdog();
      };
      ws.onerror = () => {}; // a close event follows
      ws.onclose = (event) => {
        if (this.ws !== ws) return;
        this.ws = null;
        if (this.ended || this.stopped) return;
        if (CLOSE_MESSAGES[event.code]) {
          this.stopped = true;
          this.stopCode = event.code;
          this.unlisten();
          this.showStatus(CLOSE_MESSAGES[event.code], "closed");
          this.onStop(event.code, CLOSE_MESSAGES[event.code]);
          return;
        }
        this.scheduleReconnect();
      };
    }

    handle(message) {
      if (message.type === "events") {
        const fresh = [];
        for (const event of message.events || []) {
          if (event.seq <= this.lastSeq) continue; // already applied
          if (event.seq > this.lastSeq + 1) {
            this.gap(event.seq);
            break;
          }
          fresh.push(event);
          this.lastSeq = event.seq;
          this.received.push(event.seq);
        }
        if (fresh.length) this.onEvents(fresh);
        if (message.state) this.setState(message.state);
      } else if (message.type === "state") {
        if (message.state) this.setState(message.state);
        if ("queue_position" in message) this.onQueuePosition(message.queue_position);
        if (typeof message.last_seq === "number" && message.last_seq > this.lastSeq) this.gap(message.last_seq);
      } else if (message.type === "end") {
        if (typeof message.last_seq === "number" && message.last_seq > this.lastSeq) {
          // events are missing: fetch them, the server ends again afterwards
          this.gap(message.last_seq);
          return;
        }
        this.ended = true;
        this.unlisten();
        this.setState(message.state);
        this.showStatus(`run ${message.state === "failed" || message.state === "cancelled" ? message.state : "finished"}`, "ended");
        this.onEnd(message.state);
      }
    }

    setState(state) {
      if (!state) return;
      this.state = state;
      this.onState(state);
    }

    // Events between lastSeq and `seq` never came: start again after lastSeq.
    gap(seq) {
      this.gaps += 1;
      console.warn(`LEGO stream: gap after seq ${this.lastSeq} (got ${seq}); reconnecting with after=${this.lastSeq}`);
      const ws = this.ws;
      this.ws = null;
      if (ws) ws.close(4000, "gap");
      if (!this.ended && !this.stopped) this.connect();
    }

    scheduleReconnect() {
      if (this.timer || this.ended || this.stopped) return;
      if (this.offline) return; // `online` reconnects
      this.showStatus("reconnecting…", "reconnecting");
      const delay = this.delay;
      this.delay = Math.min(this.delay * 2, MAX_DELAY_MS);
      this.timer = setTimeout(() => this.connect(), delay);
    }

    // Close the socket as a network drop would (tests use it): the stream reconnects.
    drop() {
      if (this.ws) this.ws.close(4000, "dropped");
    }

    stop() {
      this.stopped = true;
      this.unlisten();
      if (this.timer) clearTimeout(this.timer);
      const ws = this.ws;
      this.ws = null;
      if (ws) ws.close(1000, "page closed");
    }

    showStatus(text, kind) {
      this.statusKind = kind;
      const el = this.statusEl;
      if (!el) return;
      el.textContent = text;
      el.dataset.status = kind;
      el.className = `stream-status stream-${kind}`;
      el.hidden = false;
    }
  }

  LEGO.EventStream = EventStream;
})();
