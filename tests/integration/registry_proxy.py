"""A token-authenticating front for a docker-registry, the way Docker Hub answers: /v2/...
without `Authorization: Bearer <token>` gets 401 and a WWW-Authenticate challenge naming the
realm /token, which hands out anonymous tokens. Everything else is passed to the registry.

    python3 registry_proxy.py LISTEN_PORT REGISTRY_PORT LOGFILE [CANNED.json]
Runs on 127.0.0.1 (inside the test's network namespace). Logs one line per request.
Blobs of repositories with a /slow/ component stall after their first 16 KiB (for the
cancel and crash tests)."""
import base64
import http.client
import http.server
import json
import sys
import time

TOKEN = "paddock-test-token-1"
LISTEN, UPSTREAM, LOG = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
# Canned answers (a hostile registry): {path: {"status", "type", "body" (base64)}}
CANNED = json.load(open(sys.argv[4])) if len(sys.argv) > 4 else {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        with open(LOG, "a") as f:
            f.write("%s %s auth=%s\n" % (self.command, self.path,
                                         self.headers.get("Authorization", "-")))

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/token"):
            ok = "service=test-registry" in self.path and "scope=repository%3A" in self.path
            return self.reply(200 if ok else 400, json.dumps({"token": TOKEN}).encode(),
                              [("Content-Type", "application/json")])
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            repo = self.path.split("/")[2:4]
            challenge = ('Bearer realm="http://127.0.0.1:%d/token",service="test-registry",'
                         'scope="repository:%s:pull"' % (LISTEN, "/".join(repo)))
            return self.reply(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}',
                              [("WWW-Authenticate", challenge), ("Content-Type", "application/json")])
        canned = CANNED.get(self.path)
        if canned:
            return self.reply(canned["status"], base64.b64decode(canned["body"]),
                              [("Content-Type", canned["type"])])
        c = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() in ("accept",)}
        c.request(self.command, self.path, headers=hdrs)
        r = c.getresponse()
        body = r.read()
        keep = [(k, v) for k, v in r.getheaders()
                if k.lower() in ("content-type", "docker-content-digest", "location")]
        c.close()
        if "/slow/" in self.path and "/blobs/" in self.path and r.status == 200:
            return self.trickle(body, keep)
        self.reply(r.status, body, keep)

    def trickle(self, body, headers):
        """Blobs of repositories named */slow/* send their first 16 KiB at once, then one byte a
        second: a pull of one is mid-download until it is cancelled, however loaded the machine
        (a steady trickle sometimes finished before the test could act)."""
        self.send_response(200)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body[:16384])
            self.wfile.flush()
            for i in range(16384, len(body)):
                time.sleep(1)
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
        except OSError:
            pass

    do_HEAD = do_GET


http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN), Handler).serve_forever()
