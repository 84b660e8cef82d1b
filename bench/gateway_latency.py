#!/usr/bin/python3
"""Exec round trip over TLS through the network gateway against the local unix socket, in the
same run. Run as root:  bench/gateway_latency.py   (PADDOCK_BUILD, BENCH_RUNS=N per row)

Every row sends `POST /v1/envs/lat/exec {"cmd":["true"]}` and reads the whole answer:

  unix       the root-only unix socket, one keep-alive connection (http.client)
  tls        TLS to 127.0.0.1 through paddock-gateway, one keep-alive connection, a token in
             `Authorization: Bearer`; client -> gateway (TLS, token check) -> socketpair ->
             paddockd -> exec helper -> back
  tls-new    the same with a new TLS connection (handshake included) per request

The TLS rows need a token: the script makes an admin token with `POST /v1/tokens` (or uses
BENCH_TOKEN). Without a token store, they time the gateway's 401 refusal of the same request
instead and say so in the table (the transport without the exec).

Rows are interleaved in shuffled blocks so load on a shared machine skews them alike. It starts
a private paddockd (own --root under /var/tmp, own socket, its own network namespace with
loopback up, --no-network) and removes everything at the end. It measures and reports, never
asserts. Results: bench/results-gateway.md."""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from conftest import TLSConnection, UnixHTTPConnection  # noqa: E402

BUILD = os.environ.get("PADDOCK_BUILD", os.path.join(REPO, "build"))
RUNS = int(os.environ.get("BENCH_RUNS", "400"))
BLOCK = 20
PORT = 8443
RESULTS = os.environ.get("BENCH_RESULTS_GATEWAY", os.path.join(HERE, "results-gateway.md"))
BODY = json.dumps({"cmd": ["true"]}).encode()


class Row:
    """One keep-alive connection (or a new one per request) sending the exec request."""

    def __init__(self, connect, headers, new_each=False):
        self.connect = connect
        self.headers = dict(headers, **{"Content-Type": "application/json"})
        self.new_each = new_each
        self.conn = None
        self.status = None

    def trip(self):
        t0 = time.perf_counter()
        if self.conn is None or self.new_each:
            if self.conn:
                self.conn.close()
            self.conn = self.connect()
        self.conn.request("POST", "/v1/envs/lat/exec", body=BODY, headers=self.headers)
        r = self.conn.getresponse()
        r.read()
        dt = time.perf_counter() - t0
        self.status = r.status
        if r.will_close:
            self.conn.close()
            self.conn = None
        return dt

    def close(self):
        if self.conn:
            self.conn.close()


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def unix_json(sock, method, path, body=None):
    c = UnixHTTPConnection(sock)
    try:
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


def main():
    if os.geteuid() != 0:
        sys.exit("bench/gateway_latency.py: run as root")
    work = tempfile.mkdtemp(prefix="paddock-bench-gw-", dir="/var/tmp")
    netns = "pdk-bench-gw-%d" % os.getpid()
    netns_path = "/run/netns/" + netns
    sock = os.path.join(work, "sock")
    root = os.path.join(work, "root")
    paddock = [os.path.join(BUILD, "paddock"), "--socket", sock]
    daemon = None
    rows = {}
    try:
        subprocess.run(["ip", "netns", "add", netns], check=True)
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
        log = open(os.path.join(work, "log"), "wb")
        daemon = subprocess.Popen(
            ["nsenter", "--net=" + netns_path, os.path.join(BUILD, "paddockd"), "--root", root,
             "--socket", sock, "--uid-registry", os.path.join(work, "uids"), "--no-network",
             "--default-image", "base", "--listen", "127.0.0.1:%d" % PORT],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        img = os.path.join(work, "img")
        subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), img], check=True,
                       stdout=subprocess.DEVNULL)
        for _ in range(200):
            if subprocess.run(paddock + ["system"], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        subprocess.run(paddock + ["image", "import", "base", img], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(paddock + ["create", "lat", "--sandbox", "--ttl", "1h"], check=True,
                       stdout=subprocess.DEVNULL)
        fp = unix_json(sock, "GET", "/v1/system")[1]["gateway"]["tls_fingerprint"]
        token = os.environ.get("BENCH_TOKEN")
        if not token:
            st, j = unix_json(sock, "POST", "/v1/tokens", {"name": "bench", "admin": True})
            if st in (200, 201) and isinstance(j, dict):
                token = j.get("secret") or j.get("token")
        auth = {"Authorization": "Bearer " + token} if token else {}

        def tls():
            c = TLSConnection(netns_path, "127.0.0.1", PORT, fp)
            c.connect()
            return c

        def unix():
            c = UnixHTTPConnection(sock)
            c.connect()
            return c

        rows = {"unix": Row(unix, {}), "tls": Row(tls, auth), "tls-new": Row(tls, auth, True)}
        samples = {k: [] for k in rows}
        order = list(rows)
        for k in order:  # warm-up
            for _ in range(BLOCK):
                rows[k].trip()
        statuses = {k: rows[k].status for k in rows}
        while min(len(v) for v in samples.values()) < RUNS:
            random.shuffle(order)
            for k in order:
                for _ in range(BLOCK):
                    samples[k].append(rows[k].trip())
        what = "exec `true`" if statuses["tls"] == 200 else \
            "the gateway's 401 (no token store in this build: transport only, no exec)"
        label = {
            "unix": "unix socket, keep-alive: exec `true`",
            "tls": "TLS via paddock-gateway, keep-alive: %s" % what,
            "tls-new": "TLS via paddock-gateway, new connection each (handshake): %s" % what,
        }
        ref = statistics.median(samples["unix"])
        out = ["# Exec round trip: TLS gateway vs unix socket (`bench/gateway_latency.py`)", "",
               "%s, kernel %s, %d requests per row (interleaved blocks of %d); "
               "`POST /v1/envs/NAME/exec {\"cmd\":[\"true\"]}` into a sandbox, answers %s." % (
                   time.strftime("%Y-%m-%d"), os.uname().release, RUNS, BLOCK,
                   ", ".join("%s %s" % (k, statuses[k]) for k in rows)), "",
               "| path | median | p90 | vs unix socket |", "|---|---|---|---|"]
        for k in ("unix", "tls", "tls-new"):
            m = statistics.median(samples[k])
            out.append("| %s | %.2f ms | %.2f ms | %s |" % (
                label[k], m * 1e3, quantile(samples[k], 0.9) * 1e3,
                "—" if k == "unix" else "+%.2f ms" % ((m - ref) * 1e3) if statuses[k] == 200
                else "not comparable (no exec)"))
        text = "\n".join(out) + "\n"
        print(text)
        with open(RESULTS, "w") as f:
            f.write(text)
    finally:
        for r in rows.values():
            try:
                r.close()
            except Exception:
                pass
        if daemon:
            try:
                subprocess.run(paddock + ["rm", "-f", "lat"], capture_output=True, timeout=30)
            except Exception:
                pass
            daemon.terminate()
            try:
                daemon.wait(15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        subprocess.run(["ip", "netns", "delete", netns], stderr=subprocess.DEVNULL)
        subprocess.run(["umount", os.path.join(root, "pool")], stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", "--one-file-system", work])


if __name__ == "__main__":
    main()
