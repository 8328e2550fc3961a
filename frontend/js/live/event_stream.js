// LEGO.EventStream: a run's events over its websocket (webapp/runs/consumers.py).
//
//   const stream = new LEGO.EventStream(live, onEvents, onState, {statusEl, onEnd});
//   stream.start();
//
// `live` is the page's #run-live JSON ({run_id, ws_path, share_token, state,
// active}).  The server sends {"type":"events","events":[{seq,type,data}],
// "state"}, {"type":"state","state","last_seq"} and {"type":"end","state",
// "last_seq"} and then closes with 1000.  Events come in increasing seq; an
// event already applied (seq <= lastSeq) is dropped and a gap (seq >
// lastSeq + 1) makes the stream reconnect with ?after=lastSeq.  Close codes
// 4403 (not allowed) and 4404 (no such run) end the stream with a message;
// any other close before `end` reconnects after 0.5 s, doubling up to 5 s.
(function () {
  "use strict";
  const LEGO = (window.LEGO = window.LEGO || {});

  const FIRST_DELAY_MS = 500;
  const MAX_DELAY_MS = 5000;
  const CLOSE_MESSAGES = {
    4403: "You may not watch this run (the share link was revoked, or you were logged out).",
    4404: "This run does not exist any more.",
  };

  class EventStream {
    constructor(live, onEvents, onState, options = {}) {
      this.live = live || {};
      this.onEvents = onEvents || (() => {});
      this.onState = onState || (() => {});
      this.onEnd = options.onEnd || (() => {});
      this.statusEl = options.statusEl || null;
      this.WebSocket = options.WebSocket || window.WebSocket;
      this.lastSeq = options.after || 0;
      this.received = []; // every seq applied, in order (tests read it)
      this.connections = 0; // sockets opened so far
      this.gaps = 0;
      this.ended = false; // `end` arrived: no more reconnects
      this.stopped = false; // 4403/4404 or stop(): no more reconnects
      this.state = this.live.state || "";
      this.delay = FIRST_DELAY_MS;
      this.ws = null;
      this.timer = null;
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
      if (!this.ws && !this.ended && !this.stopped) this.connect();
      return this;
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
        if (this.ws === ws) this.showStatus(this.live.active ? "live" : "replaying…", "live");
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
        this.handle(data);
      };
      ws.onerror = () => {}; // a close event follows
      ws.onclose = (event) => {
        if (this.ws !== ws) return;
        this.ws = null;
        if (this.ended || this.stopped) return;
        if (CLOSE_MESSAGES[event.code]) {
          this.stopped = true;
          this.showStatus(CLOSE_MESSAGES[event.code], "closed");
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
        if (typeof message.last_seq === "number" && message.last_seq > this.lastSeq) this.gap(message.last_seq);
      } else if (message.type === "end") {
        if (typeof message.last_seq === "number" && message.last_seq > this.lastSeq) {
          // events are missing: fetch them, the server ends again afterwards
          this.gap(message.last_seq);
          return;
        }
        this.ended = true;
        this.setState(message.state);
        this.showStatus(message.state === "failed" ? "run failed" : "run finished", "ended");
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
      if (this.timer) clearTimeout(this.timer);
      const ws = this.ws;
      this.ws = null;
      if (ws) ws.close(1000, "page closed");
    }

    showStatus(text, kind) {
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
