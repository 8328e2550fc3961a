"""A chat-completions server on 127.0.0.1 for the LLM agent's tests, replying from a script.

``ScriptedEndpoint(script)``: ``script`` is a list of steps, one per request,
in order (the last one repeats): ``{"reply": text}`` answers with ``text``
(streamed as server-sent events when the request asks for ``stream``, with a
final usage chunk; whole otherwise), ``{"status": 429}`` (or any status) an
error, ``{"sleep": s}`` waits ``s`` seconds before the next step's answer
(a timeout when ``s`` is beyond the client's).  Or a callable
``script(request_json, n) -> step``.  ``requests`` keeps every request's
JSON body and headers.  Usage: ``prompt_tokens`` is the request's characters
/ 4, ``completion_tokens`` the reply's characters / 4.
"""
from __future__ import annotations

import http.server
import json
import threading
import time


class ScriptedEndpoint:
    def __init__(self, script):
        self.script, self.requests = script, []
        self._lock = threading.Lock()
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with endpoint._lock:
                    n = len(endpoint.requests)
                    endpoint.requests.append({"body": body, "headers": {k.lower(): v for k, v in self.headers.items()}, "path": self.path})
                step = endpoint.step(body, n)
                while "sleep" in step:
                    time.sleep(step["sleep"])
                    step = step.get("then", {"status": 504})
                if "status" in step:
                    return self._send(step["status"], {"error": {"message": f"scripted {step['status']}", "type": "scripted"}})
                text = step["reply"]
                usage = {"prompt_tokens": len(json.dumps(body["messages"])) // 4, "completion_tokens": max(1, len(text) // 4)}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                if body.get("stream"):
                    return self._stream(body, text, usage, step.get("pause", 0.0))
                self._send(200, {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                 "usage": usage})

            def _send(self, status, data):
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                if status == 429:
                    self.send_header("retry-after", "0")
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, body, text, usage, pause):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
                for k in range(0, len(text), 40):
                    chunk = dict(base, choices=[{"index": 0, "delta": {"content": text[k:k + 40]}, "finish_reason": None}])
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(pause)
                self.wfile.write(f"data: {json.dumps(dict(base, choices=[], usage=usage))}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def step(self, body, n):
        if callable(self.script):
            return self.script(body, n)
        return self.script[min(n, len(self.script) - 1)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
