"""A tiny OpenAI-compatible server that crashes mid-stream after N completions.

Used as a managed target (``target.command``) to check that a server dying
mid-run fails the test with its log tail.  Usage:
``python dying_server.py PORT DIE_AFTER``.
"""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, DIE_AFTER = int(sys.argv[1]), int(sys.argv[2])
served = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        sys.stderr.write("request " + (args[0] % args[1:]) + "\n")

    def _json(self, obj, code=200):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            return self._json({"status": "ok"})
        if self.path == "/v1/models":
            return self._json({"data": [{"id": "dying", "max_model_len": 4096}]})
        self._json({"error": "not found"}, 404)

    def do_POST(self):
        global served
        if os.environ.get("LEAK_HEADERS"):  # a careless server that logs credentials
            sys.stderr.write(f"headers: {dict(self.headers)}\n")
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/tokenize":
            return self._json({"count": len(body.get("prompt", "").split()) + 1})
        n = int(body.get("max_tokens", 4))
        p = len(body.get("prompt", "").split()) + 1
        served += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(n):
            self.wfile.write(b'data: {"choices":[{"index":0,"text":" t","finish_reason":%s}]}\n\n'
                             % (b'"length"' if i == n - 1 else b"null"))
            self.wfile.flush()
            if served > DIE_AFTER and i == 1:
                sys.stderr.write("fatal: simulated crash (CUDA error: an illegal memory access)\n")
                sys.stderr.flush()
                os._exit(1)
        self.wfile.write(b'data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}\n\n' % (p, n))
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
