#!/usr/bin/python3
"""PTY round-trip latency: one byte in, the same byte back, through a terminal inside an
environment. Run as root:  bench/pty_latency.py   (PADDOCK_BUILD, BENCH_RUNS=N round trips per row)

Every row echoes through `stty raw -echo; exec cat` running on a pty, so the byte passes the
line discipline and a process each way, never a shortcut:

  ws    paddock's WebSocket endpoint (GET /v1/envs/NAME/exec/ws), a raw Python client:
        client -> paddockd -> pty master -> cat inside the sandbox -> back
  cli   `paddock exec -it NAME -- ...` on a local pty (what a person in a terminal gets):
        local pty -> CLI (raw mode) -> WebSocket -> paddockd -> pty -> cat -> back
  ref   the reference: a pty made here and `nsenter -t PID -a` into the same sandbox's
        namespaces (pid 1's), the process reading and writing that pty directly
  host  floor: a local pty and cat on the host, no namespaces

Rows are interleaved in blocks so load on a shared machine skews them alike. It starts a
private paddockd (own --root under /var/tmp, own socket, in a network namespace of its own,
--no-network) and removes everything at the end. It measures and reports, never asserts."""
import json
import os
import pty
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tty

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from wsclient import WS  # noqa: E402

BUILD = os.environ.get("PADDOCK_BUILD", os.path.join(REPO, "build"))
RUNS = int(os.environ.get("BENCH_RUNS", "400"))
BLOCK = 20
RESULTS = os.environ.get("BENCH_RESULTS_PTY", os.path.join(HERE, "results-pty.md"))
ECHO = "stty raw -echo; echo ready; exec cat"


def read_until(fd, want, timeout=10):
    buf = b""
    deadline = time.monotonic() + timeout
    while want not in buf:
        r, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
        if not r:
            raise TimeoutError("waiting for %r, got %r" % (want, buf[-200:]))
        buf += os.read(fd, 65536)
    return buf


class PtyProc:
    """argv on a fresh local pty; round trips through its master."""

    def __init__(self, argv, env=None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execvpe(argv[0], argv, env or os.environ)
            finally:
                os._exit(127)
        tty.setraw(self.fd)
        read_until(self.fd, b"ready")

    def trip(self, byte):
        t0 = time.perf_counter()
        os.write(self.fd, byte)
        got = b""
        while not got:
            got = os.read(self.fd, 1)
        t1 = time.perf_counter()
        assert got == byte, (got, byte)
        return t1 - t0

    def close(self):
        os.close(self.fd)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)


class WsRow:
    def __init__(self, sock, env):
        self.ws = WS(sock, env, {"cmd": ["sh", "-c", ECHO]})
        self.ws.collect(until=lambda o: b"ready" in o)
        # whatever followed "ready" in the same message is the newline: read it away
        self.pending = b""

    def trip(self, byte):
        t0 = time.perf_counter()
        self.ws.send_bytes(byte)
        while True:
            op, p = self.ws.recv_frame()
            if op == 2 and p:
                break
        t1 = time.perf_counter()
        assert p.endswith(byte), p
        return t1 - t0

    def close(self):
        self.ws.close()


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    if os.geteuid() != 0:
        sys.exit("bench/pty_latency.py: run as root")
    work = tempfile.mkdtemp(prefix="paddock-bench-pty-", dir="/var/tmp")
    netns = "pdk-bench-pty-%d" % os.getpid()
    sock = os.path.join(work, "sock")
    paddock = [os.path.join(BUILD, "paddock"), "--socket", sock]
    daemon = None
    rows = {}
    try:
        subprocess.run(["ip", "netns", "add", netns], check=True)
        log = open(os.path.join(work, "log"), "wb")
        daemon = subprocess.Popen(
            ["nsenter", "--net=/run/netns/" + netns, os.path.join(BUILD, "paddockd"), "--root",
             os.path.join(work, "root"), "--socket", sock, "--uid-registry",
             os.path.join(work, "uids"), "--no-network", "--default-image", "base"], stdout=log, stderr=log,
            stdin=subprocess.DEVNULL)
        for _ in range(300):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        img = os.path.join(work, "img")
        subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), img], check=True,
                       stdout=subprocess.DEVNULL)
        for _ in range(100):
            if subprocess.run(paddock + ["system"], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        subprocess.run(paddock + ["image", "import", "base", img], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(paddock + ["create", "lat"], check=True, stdout=subprocess.DEVNULL)
        pid = json.loads(subprocess.run(paddock + ["--json", "inspect", "lat"], check=True,
                                        capture_output=True).stdout)["pid"]
        env = dict(os.environ, PADDOCK_SOCKET=sock, TERM="xterm")
        rows = {
            "ws": WsRow(sock, "lat"),
            "cli": PtyProc(paddock + ["exec", "-it", "lat", "--", "sh", "-c", ECHO], env),
            "ref": PtyProc(["nsenter", "-t", str(pid), "-a", "sh", "-c", "cd /; " + ECHO]),
            "host": PtyProc(["sh", "-c", ECHO]),
        }
        samples = {k: [] for k in rows}
        order = list(rows)
        for k in order:  # warm-up
            for _ in range(BLOCK):
                rows[k].trip(b"w")
        while min(len(v) for v in samples.values()) < RUNS:
            random.shuffle(order)
            for k in order:
                for _ in range(BLOCK):
                    samples[k].append(rows[k].trip(bytes([random.choice(b"abcdefgh")])))
        label = {
            "ws": "paddock: WebSocket `exec/ws`, raw client → paddockd → pty in sandbox → `cat` → back",
            "cli": "paddock: `paddock exec -it` on a local pty (CLI raw mode + WebSocket + pty)",
            "ref": "reference: local pty + `nsenter -t PID -a` into the same sandbox, `cat`",
            "host": "floor: local pty + `cat` on the host, no namespaces",
        }
        ref = statistics.median(samples["ref"])
        out = ["# PTY round-trip latency (`bench/pty_latency.py`)", "",
               "%s, kernel %s, %d round trips per row (interleaved blocks of %d); one byte in, "
               "the same byte back through `stty raw -echo; exec cat`." % (
                   time.strftime("%Y-%m-%d"), os.uname().release, RUNS, BLOCK), "",
               "| path | median | p90 | vs reference |", "|---|---|---|---|"]
        for k in ("ws", "cli", "ref", "host"):
            m = statistics.median(samples[k])
            out.append("| %s | %.0f µs | %.0f µs | %s |" % (
                label[k], m * 1e6, quantile(samples[k], 0.9) * 1e6,
                "%.1f×" % (m / ref) if k != "ref" else "1×"))
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
        subprocess.run(["rm", "-rf", "--one-file-system", work])


if __name__ == "__main__":
    main()
