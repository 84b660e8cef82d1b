#!/usr/bin/python3
"""Paddock at scale: what every request costs as the population grows.

Starts a private paddockd the way the integration tests do (tests/conftest.py's Daemon: its
own --root under /var/tmp, socket, uid registry and network namespace), imports the busybox
image, then for each N in BENCH_SCALE_N (default "0 100 1000") grows the population to N
environments (half networked computers, "network":{"mode":"open"}, half sandboxes without
network; BENCH_SCALE_NET=0: all sandboxes) and measures over the raw unix socket, keep-alive:

  - ls:       GET /v1/envs (what `paddock ls` asks), median of BENCH_LIST_RUNS
  - inspect:  GET /v1/envs/NAME, median of BENCH_RUNS
  - exec:     POST /v1/envs/NAME/exec {"cmd":["true"]} into a sandbox, median of BENCH_RUNS
  - create:   POST /v1/envs of one more sandbox / one more networked computer (each then
              deleted: the population stays N), medians of BENCH_CREATE_RUNS
  - c-e-d:    create a sandbox, exec `true` in it, DELETE ?force=1: median of BENCH_CREATE_RUNS
  - metrics:  GET /metrics, median of BENCH_LIST_RUNS
  - stalls:   the loop's worst stall during BENCH_LIST_RUNS scrapes, and during as many
              listings: the daemon's own measure (paddock_loop_turn_max_seconds, the longest
              turn of its single event loop, i.e. the longest it answered nobody else), and a
              second client's: it sends GET /v1/envs/NAME back to back on its own connection,
              in its own process, and its slowest answer minus its idle median is how long it
              was kept waiting (that includes CPU contention with the listing client on a
              small machine)
  - restart:  SIGTERM, start again, until GET /v1/system answers (every environment re-adopted);
              BENCH_RESTART=0 skips it

Prints a Markdown table and removes everything it made (the Daemon's teardown: every
environment, the daemon by its pid, cgroups, mounts, the netns, the directories).

    make && sudo bench/scale.py                      # N = 0 100 1000
    BENCH_SCALE_N="0 100 1000 2000" sudo bench/scale.py
    PADDOCK_BUILD=/tmp/b sudo bench/scale.py         # binaries from another build

Run as root. Measures and reports; never asserts a timing.
"""
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import multiprocessing
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
import conftest  # noqa: E402  (the integration harness: Daemon, UnixHTTPConnection)

NS = [int(x) for x in os.environ.get("BENCH_SCALE_N", "0 100 1000").split()]
NET = os.environ.get("BENCH_SCALE_NET", "1") != "0"
LIST_RUNS = int(os.environ.get("BENCH_LIST_RUNS", "7"))
RUNS = int(os.environ.get("BENCH_RUNS", "41"))
CREATE_RUNS = int(os.environ.get("BENCH_CREATE_RUNS", "11"))
RESTART = os.environ.get("BENCH_RESTART", "1") != "0"


class Conn:
    """One keep-alive connection to the daemon (reconnects if the daemon closed it)."""

    def __init__(self, sock):
        self.sock = sock
        self.c = None

    def request(self, method, path, body=None, expect=(200,)):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            if self.c is None:
                self.c = conftest.UnixHTTPConnection(self.sock, timeout=3600)
            try:
                t0 = time.perf_counter()
                self.c.request(method, path, body=data, headers=headers)
                r = self.c.getresponse()
                payload = r.read()
                dt = time.perf_counter() - t0
                break
            except (OSError, conftest.http.client.HTTPException):
                self.c.close()
                self.c = None
                if attempt:
                    raise
        if r.status not in expect:
            raise RuntimeError("%s %s: %d %s" % (method, path, r.status, payload[:300]))
        return dt, payload

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def create_body(name, kind):
    body = {"name": name, "kind": kind}
    if kind == "computer":
        body["network"] = {"mode": "open"}
    return body


def fmt(s):
    if s is None:
        return "-"
    return "%.2f ms" % (s * 1e3) if s < 0.01 else "%.1f ms" % (s * 1e3) if s < 1 else "%.2f s" % s


def med(xs):
    return statistics.median(xs) if xs else None


def cgroup_mode():
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "v2"
    return "v1 hybrid" if os.path.isdir("/sys/fs/cgroup/unified") else "v1"


def probe_loop(sock, path, stop, out):
    """In a process of its own (no GIL shared with the client it watches): GET path back to
    back, then send the (start, latency) pairs."""
    conn = Conn(sock)
    samples = []
    while not stop.is_set():
        t0 = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        dt, _ = conn.request("GET", path)
        samples.append((t0, dt))
    conn.close()
    out.send(samples)


class Prober:
    def __init__(self, sock, name):
        self.stop = multiprocessing.Event()
        self.rx, tx = multiprocessing.Pipe(duplex=False)
        self.p = multiprocessing.Process(target=probe_loop,
                                         args=(sock, "/v1/envs/" + name, self.stop, tx))
        self.samples = None

    def start(self):
        self.p.start()

    def finish(self):
        self.stop.set()
        self.samples = self.rx.recv()
        self.p.join()
        return self.samples


def loop_turn_max(c):
    """paddock_loop_turn_max_seconds: the daemon's longest loop turn since the last scrape."""
    for line in c.request("GET", "/metrics")[1].decode().splitlines():
        if line.startswith("paddock_loop_turn_max_seconds "):
            return float(line.split()[1])
    return None


def stall(d, c, path):
    """While c sends GET path LIST_RUNS times: the daemon's longest loop turn (its own
    measure, paddock_loop_turn_max_seconds), and the slowest answer a second client (inspect,
    back to back, in its own process) got, minus that client's idle median."""
    p = Prober(d.sock, "probe")
    p.start()
    time.sleep(0.5)
    t_idle = time.perf_counter()
    loop_turn_max(c)  # starts the daemon's count again
    windows = []
    for _ in range(LIST_RUNS):
        time.sleep(0.05)
        t0 = time.perf_counter()
        dt, _ = c.request("GET", path)
        windows.append((t0, t0 + dt))
    turn = loop_turn_max(c)
    time.sleep(0.05)
    samples = p.finish()
    idle = [dt for t, dt in samples if t + dt < t_idle]
    during = [dt for t, dt in samples if any(a <= t + dt and t <= b for a, b in windows)]
    return turn, (max(during) - (med(idle) or 0) if during else None)


def measure(d, c, n):
    row = {"n": n}
    row["ls"] = med([c.request("GET", "/v1/envs")[0] for _ in range(LIST_RUNS)])
    row["inspect"] = med([c.request("GET", "/v1/envs/probe")[0] for _ in range(RUNS)])
    ex = {"cmd": ["true"]}
    row["exec"] = med([c.request("POST", "/v1/envs/probe/exec", ex)[0] for _ in range(RUNS)])

    c.request("GET", "/metrics")
    row["metrics"] = med([c.request("GET", "/metrics")[0] for _ in range(LIST_RUNS)])
    row["stall_metrics"] = stall(d, c, "/metrics")
    row["stall_ls"] = stall(d, c, "/v1/envs")

    mk_s, mk_c, rm, ced = [], [], [], []
    for _ in range(CREATE_RUNS):
        mk_s.append(c.request("POST", "/v1/envs", create_body("extra-s", "sandbox"), (201,))[0])
        rm.append(c.request("DELETE", "/v1/envs/extra-s?force=1")[0])
        if NET:
            mk_c.append(c.request("POST", "/v1/envs", create_body("extra-c", "computer"),
                                  (201,))[0])
            c.request("DELETE", "/v1/envs/extra-c?force=1")
        t0 = time.perf_counter()
        c.request("POST", "/v1/envs", create_body("ced", "sandbox"), (201,))
        c.request("POST", "/v1/envs/ced/exec", ex)
        c.request("DELETE", "/v1/envs/ced?force=1")
        ced.append(time.perf_counter() - t0)
    row.update(create_s=med(mk_s), create_c=med(mk_c), destroy=med(rm), ced=med(ced))

    row["restart"] = None
    if RESTART and n:
        c.close()
        d.stop(timeout=600)
        t1 = time.perf_counter()
        d.start(timeout=600)
        row["restart"] = time.perf_counter() - t1
    return row


def main():
    if os.geteuid() != 0:
        sys.exit("bench/scale.py runs as root")
    img = tempfile.mkdtemp(prefix="paddock-scale-img-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    d = None
    rows = []
    try:
        d = conftest.Daemon(rootfs)
        c = Conn(d.sock)
        c.request("POST", "/v1/envs", create_body("probe", "sandbox"), (201,))
        have = 0
        for n in NS:
            t0 = time.perf_counter()
            for i in range(have, n):
                kind = "computer" if NET and i % 2 == 0 else "sandbox"
                c.request("POST", "/v1/envs", create_body("e%d" % i, kind), (201,))
            grow = time.perf_counter() - t0
            have = max(have, n)
            envs = json.loads(c.request("GET", "/v1/envs")[1])["envs"]
            assert len(envs) == have + 1, len(envs)
            row = measure(d, c, have)
            rows.append(row)
            print("N=%d (grown in %.0f s): %s" % (have, grow, ", ".join(
                "%s %s" % (k, "/".join(fmt(x) for x in v) if isinstance(v, tuple) else fmt(v))
                for k, v in row.items() if k != "n")),
                file=sys.stderr, flush=True)
        c.close()
    finally:
        if d is not None:
            t0 = time.perf_counter()
            problems = d.teardown()
            print("teardown: %.0f s%s" % (time.perf_counter() - t0,
                                          "; problems: %s" % problems if problems else ""),
                  file=sys.stderr)
        shutil.rmtree(img, ignore_errors=True)

    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("%s, kernel %s, %d cores, cgroup %s, load %s; N environments = %s; "
          "ls/metrics median of %d, inspect/exec of %d, create/destroy/c-e-d of %d" % (
              time.strftime("%Y-%m-%d"), platform.release(), os.cpu_count(), cgroup_mode(),
              load, "half open computers, half sandboxes" if NET else "sandboxes",
              LIST_RUNS, RUNS, CREATE_RUNS))
    print()
    print("| N | ls | inspect | exec | create sandbox | create computer | destroy sandbox "
          "| create→exec→destroy | /metrics | loop's longest turn (probe's worst wait) during "
          "/metrics | the same during ls | restart |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %s |" % (r["n"], " | ".join(
            "%s (%s)" % (fmt(r[k][0]), fmt(r[k][1])) if isinstance(r[k], tuple) else fmt(r[k])
            for k in ("ls", "inspect", "exec", "create_s", "create_c", "destroy", "ced",
                      "metrics", "stall_metrics", "stall_ls", "restart"))))


if __name__ == "__main__":
    main()
