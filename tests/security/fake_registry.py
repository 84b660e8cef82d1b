"""Fake registries and a connection catcher for the registry-destination tests
(tests/security/test_network_escapes.py). Every server listens on [::] (IPv4 too), inside the test daemon's
network namespace, so one port answers on every address the test put on its dummy interface.

    python3 fake_registry.py LOGFILE CONFIG.json

CONFIG: [{"port": N, "mode": "registry" | "catch", "redirect": URL-PREFIX?, "realm": URL?}, ...]
- registry: serves one tiny image (one layer holding /etc/ssrf-test) under any repository and
  tag. With "redirect", blob requests are answered 307 to REDIRECT-PREFIX + path (and that
  path, /storage/..., is served too); with "realm", /v2/ wants `Authorization: Bearer tok`
  and sends a Bearer challenge naming that realm (every server hands out tokens at /token).
- catch: accepts TCP connections (TLS or not, nothing is spoken) and logs each one.
Log lines: "PORT GET PATH auth=... host=..." per request, "PORT connect LOCAL-ADDRESS" per caught
connection."""
import gzip
import hashlib
import http.server
import io
import json
import socket
import socketserver
import sys
import tarfile
import threading

LOG = sys.argv[1]
CONFIG = json.load(open(sys.argv[2]))
TOKEN = "tok"
lock = threading.Lock()


def log(line):
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def make_image():
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        for d in ("etc",):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            t.addfile(ti)
        data = b"pulled\n"
        ti = tarfile.TarInfo("etc/ssrf-test")
        ti.size, ti.mode = len(data), 0o644
        t.addfile(ti, io.BytesIO(data))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [digest(raw.getvalue())]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest(layer), "size": len(layer)}]}).encode()
    return manifest, {digest(config): config, digest(layer): layer}


MANIFEST, BLOBS = make_image()


class V6Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def handler(cfg):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def reply(self, status, body=b"", headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            auth = self.headers.get("Authorization", "-")
            log("%d GET %s auth=%s host=%s" % (cfg["port"], self.path, auth,
                                                self.headers.get("Host", "-")))
            if self.path.startswith("/token"):
                return self.reply(200, json.dumps({"token": TOKEN}).encode(),
                                  [("Content-Type", "application/json")])
            if self.path.startswith("/storage/"):
                blob = BLOBS.get(self.path.rsplit("/", 1)[-1])
                return self.reply(200, blob) if blob else self.reply(404)
            if cfg.get("realm") and auth != "Bearer " + TOKEN:
                challenge = 'Bearer realm="%s",service="fake"' % cfg["realm"]
                return self.reply(401, b'{"errors":[{"message":"authentication required"}]}',
                                  [("WWW-Authenticate", challenge)])
            parts = self.path.split("/")
            if "/manifests/" in self.path:
                return self.reply(200, MANIFEST,
                                  [("Content-Type", "application/vnd.oci.image.manifest.v1+json")])
            if "/blobs/" in self.path and parts[-1] in BLOBS:
                if cfg.get("redirect"):
                    return self.reply(307, b"", [("Location", cfg["redirect"] + "/storage/" + parts[-1])])
                return self.reply(200, BLOBS[parts[-1]])
            self.reply(404)

    return Handler


class Catch(socketserver.BaseRequestHandler):
    def handle(self):
        log("%d connect %s" % (self.server.server_address[1], self.request.getsockname()[0]))


class CatchServer(socketserver.ThreadingTCPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


servers = []
for c in CONFIG:
    if c["mode"] == "catch":
        servers.append(CatchServer(("::", c["port"]), Catch))
    else:
        servers.append(V6Server(("::", c["port"]), handler(c)))
for s in servers[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
log("ready")
servers[0].serve_forever()
