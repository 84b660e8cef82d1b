#!/usr/bin/python3
"""Overhead of the Python SDK per exec, against the raw API: `env.exec(["true"])` versus the
same `POST /v1/envs/NAME/exec {"cmd":["true"]}` sent with http.client on one kept-alive
unix-socket connection and its JSON parsed. Both rows run interleaved (shuffled blocks), so
load from other work skews them alike; the difference of the medians is the SDK's cost.

Run as root:  bench/sdk_python.py     (PADDOCK_BUILD selects the binaries; BENCH_RUNS=N runs
per row, default 400). It starts its own private paddockd like the integration tests do (own
root under /var/tmp, socket, network namespace) and removes everything afterwards. Writes
bench/results-sdk-python.md."""
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import socket
import sys
import tempfile
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "sdk", "python"))
import paddock  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "400"))
BLOCK = 10
RESULTS = os.path.join(REPO, "bench", "results-sdk-python.md")


def load_harness():
    spec = importlib.util.spec_from_file_location(
        "paddock_it_conftest", os.path.join(REPO, "tests", "conftest.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class CannedServer:
    """A unix-socket server in this process that answers every request at once with the same
    buffered exec result: timing the client against it leaves out the daemon's work."""

    BODY = (b'{"exit_code":0,"stdout":"","stderr":"","duration_ms":1,"timed_out":false,'
            b'"truncated":false}')

    def __init__(self, path):
        self.path = path
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(path)
        self.ls.listen(8)
        self.answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(self.BODY)) + self.BODY
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        buf = b""
        while True:
            try:
                d = c.recv(65536)
            except OSError:
                return
            if not d:
                return
            buf += d
            while b"\r\n\r\n" in buf:
                head, _, rest = buf.partition(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":")[1])
                if len(rest) < n:
                    break
                buf = rest[n:]
                c.sendall(self.answer)

    def close(self):
        self.ls.close()


def interleave(rows, runs):
    samples = {k: [] for k in rows}
    for f in rows.values():  # warm-up
        for _ in range(BLOCK):
            f()
    order = list(rows)
    while min(len(v) for v in samples.values()) < runs:
        random.shuffle(order)
        for k in order:
            for _ in range(BLOCK):
                samples[k].append(rows[k]())
    return samples


def raw_exec_fn(conn, path, check=True):
    body = json.dumps({"cmd": ["true"]}).encode()

    def raw_exec():
        t0 = time.perf_counter()
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        j = json.loads(r.read())
        t1 = time.perf_counter()
        assert r.status == 200 and j["exit_code"] == 0, j
        return t1 - t0
    return raw_exec


def sdk_exec_fn(env):
    def sdk_exec():
        t0 = time.perf_counter()
        r = env.exec(["true"])
        t1 = time.perf_counter()
        assert r.exit_code == 0
        return t1 - t0
    return sdk_exec


def main():
    if os.geteuid() != 0:
        sys.exit("bench/sdk_python.py: run as root")
    it = load_harness()
    img = tempfile.mkdtemp(prefix="paddock-bench-sdk-img-", dir="/var/tmp")
    d = None
    try:
        subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), img + "/rootfs"],
                       check=True, stdout=subprocess.DEVNULL)
        d = it.Daemon(img + "/rootfs")
        client = paddock.Paddock(socket=d.sock)
        env = client.envs.create("bench", kind="sandbox")
        raw = it.UnixHTTPConnection(d.sock)

        def sdk_stream():
            t0 = time.perf_counter()
            with env.exec_stream(["true"]) as s:
                for _ in s:
                    pass
            t1 = time.perf_counter()
            assert s.result.exit_code == 0
            return t1 - t0

        rows = {"raw": raw_exec_fn(raw, "/v1/envs/bench/exec"), "sdk": sdk_exec_fn(env),
                "stream": sdk_stream}
        samples = interleave(rows, RUNS)
        # the same two clients against a canned answer: the client's own cost
        canned = CannedServer(os.path.join(img, "canned.sock"))
        craw = it.UnixHTTPConnection(canned.path)
        cenv = paddock.Env(paddock.Paddock(socket=canned.path), {"name": "bench"})
        csamples = interleave({"raw": raw_exec_fn(craw, "/v1/envs/bench/exec"),
                               "sdk": sdk_exec_fn(cenv)}, RUNS * 5)
        craw.close()
        canned.close()
        label = {
            "raw": "raw API: `http.client`, one kept-alive unix-socket connection, `json.loads`",
            "sdk": "SDK: `env.exec([\"true\"])` (buffered)",
            "stream": "SDK: `env.exec_stream([\"true\"])` (NDJSON, a new connection each)",
        }
        base = statistics.median(samples["raw"])
        out = ["# Python SDK overhead per exec (`bench/sdk_python.py`)", "",
               "%s, kernel %s, Python %s, %d runs per row (interleaved blocks of %d); "
               "`true` in a running sandbox; load average %.2f at the end." % (
                   time.strftime("%Y-%m-%d"), os.uname().release, sys.version.split()[0],
                   RUNS, BLOCK, os.getloadavg()[0]), "",
               "| path | median | p90 | median − raw |", "|---|---|---|---|"]
        for k in ("raw", "sdk", "stream"):
            m = statistics.median(samples[k])
            out.append("| %s | %.0f µs | %.0f µs | %s |" % (
                label[k], m * 1e6, quantile(samples[k], 0.9) * 1e6,
                "—" if k == "raw" else "%+.0f µs" % ((m - base) * 1e6)))
        cbase = statistics.median(csamples["raw"])
        out += ["", "The clients alone, against a canned answer from a server in the same "
                "process (%d runs per row):" % (RUNS * 5), "",
                "| client | median | median − raw |", "|---|---|---|"]
        for k, what in (("raw", "raw `http.client` + `json.loads`"),
                        ("sdk", "SDK `env.exec([\"true\"])`")):
            m = statistics.median(csamples[k])
            out.append("| %s | %.0f µs | %s |" % (what, m * 1e6, "—" if k == "raw"
                                                  else "%+.0f µs" % ((m - cbase) * 1e6)))
        text = "\n".join(out) + "\n"
        print(text)
        with open(RESULTS, "w") as f:
            f.write(text)
        raw.close()
        client.close()
    finally:
        if d is not None:
            problems = d.teardown()
            if problems:
                print("cleanup: %s" % problems, file=sys.stderr)
        shutil.rmtree(img, ignore_errors=True)


if __name__ == "__main__":
    main()
