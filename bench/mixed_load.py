#!/usr/bin/python3
"""One agent's exec latency while the daemon is busy with others (issue 12, item 2).

    sudo bench/mixed_load.py                        # 2,000 environments, 10 s a phase
    BENCH_MIX_N=500 BENCH_MIX_SECONDS=5 sudo bench/mixed_load.py

Starts a private paddockd the way the integration tests do (tests/conftest.py's Daemon: own
root, socket, uid registry and network namespace) with the busybox image, grows the population
to BENCH_MIX_N environments (half networked computers, "network":{"mode":"open"}, half
sandboxes; BENCH_MIX_NET=0: all sandboxes), times `GET /v1/envs` alone (median of 7), then
measures client A: POST /v1/envs/probe/exec {"cmd":["true"]} back to back on one keep-alive
connection into a sandbox, for BENCH_MIX_SECONDS in each of four phases:

  - alone;
  - while client B lists every environment (GET /v1/envs, the whole answer read) back to back;
  - while client C creates a sandbox, execs `true` in it and deletes it (?force=1) in a loop;
  - while B and C both run;
  - while D stops (timeout 0) and starts a networked computer of its own in a loop.

B and C are processes of their own (no shared interpreter lock with A). For each phase it
prints A's median, p99 and worst, how many listings and cycles B and C finished, and the
daemon's longest loop turn in the phase (paddock_loop_turn_max_seconds: the longest it
answered nobody else) and its longest single callback (one request's or event's own share of
a turn). BENCH_MIX_ARGS adds paddockd flags (e.g. "--nice 0"). BENCH_MIX_SLOW_NAMES=1 runs the daemon with --debug and ends with the functions that
held the loop 10 ms or more (addr2line on the daemon's offsets). On a 2-core machine A also competes with B, C, their environments'
processes and the daemon for CPU: the loop turn tells the daemon's own share of a wait.
Removes everything it made. Measures and reports; never asserts a timing.
"""
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
import conftest  # noqa: E402

N = int(os.environ.get("BENCH_MIX_N", "2000"))
NET = os.environ.get("BENCH_MIX_NET", "1") != "0"
SECONDS = float(os.environ.get("BENCH_MIX_SECONDS", "10"))
SLOW_NAMES = os.environ.get("BENCH_MIX_SLOW_NAMES", "0") != "0"
EXEC_TRUE = json.dumps({"cmd": ["true"]}).encode()
JSON = {"Content-Type": "application/json"}


def request(c, method, path, body=None):
    c.request(method, path, body, JSON if body is not None else {})
    r = c.getresponse()
    data = r.read()
    return r.status, data


def create(c, name, kind, net):
    spec = {"name": name, "kind": kind, "image": "base"}
    if net:
        spec["network"] = {"mode": "open"}
    status, data = request(c, "POST", "/v1/envs", json.dumps(spec).encode())
    if status != 201:
        raise SystemExit("create %s: %d %s" % (name, status, data[:200]))


def lister(sock, stop, done):
    c = conftest.UnixHTTPConnection(sock)
    while not stop.is_set():
        status, _ = request(c, "GET", "/v1/envs")
        if status != 200:
            raise SystemExit("list: %d" % status)
        done.value += 1


def cycler(sock, stop, done):
    c = conftest.UnixHTTPConnection(sock)
    i = 0
    while not stop.is_set():
        name = "mix-c%d" % i
        i += 1
        create(c, name, "sandbox", False)
        status, data = request(c, "POST", "/v1/envs/%s/exec" % name, EXEC_TRUE)
        if status != 200:
            raise SystemExit("exec %s: %d %s" % (name, status, data[:200]))
        status, data = request(c, "DELETE", "/v1/envs/%s?force=1" % name)
        if status not in (200, 204):
            raise SystemExit("delete %s: %d %s" % (name, status, data[:200]))
        done.value += 1


def restarter(sock, stop, done):
    c = conftest.UnixHTTPConnection(sock)
    while not stop.is_set():
        for action in ("stop?timeout=0", "start"):
            status, data = request(c, "POST", "/v1/envs/mix-r/" + action, b"")
            if status != 200:
                raise SystemExit("%s mix-r: %d %s" % (action, status, data[:200]))
        done.value += 1


def loop_maxima(c):
    """The daemon's longest loop turn and longest single callback since the previous scrape
    (a scrape starts both again)."""
    found = {}
    for line in request(c, "GET", "/metrics")[1].decode().splitlines():
        name, _, value = line.partition(" ")
        found[name] = value
    return (float(found.get("paddock_loop_turn_max_seconds", "nan")),
            float(found.get("paddock_loop_callback_max_seconds", "nan")))


def phase(d, admin, probe, with_lister, with_cycler, with_restarter=False):
    stop = multiprocessing.Event()
    listed = multiprocessing.Value("i", 0)
    cycled = multiprocessing.Value("i", 0)
    procs = []
    if with_lister:
        procs.append(multiprocessing.Process(target=lister, args=(d.sock, stop, listed)))
    if with_cycler:
        procs.append(multiprocessing.Process(target=cycler, args=(d.sock, stop, cycled)))
    if with_restarter:
        procs.append(multiprocessing.Process(target=restarter, args=(d.sock, stop, cycled)))
    for p in procs:
        p.start()
    time.sleep(0.5 if procs else 0)  # let them get going
    loop_maxima(admin)
    times = []
    end = time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        status, data = request(probe, "POST", "/v1/envs/probe/exec", EXEC_TRUE)
        times.append(time.perf_counter() - t0)
        if status != 200:
            raise SystemExit("probe exec: %d %s" % (status, data[:200]))
    turn, callback = loop_maxima(admin)
    stop.set()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit("a load client failed")
    times.sort()
    return {"median": statistics.median(times), "p99": times[int(len(times) * 0.99)],
            "max": times[-1], "n": len(times), "listed": listed.value,
            "cycled": cycled.value, "turn": turn, "callback": callback}


def print_slow_callbacks(logpath, build):
    """Which functions held the loop 10 ms or more (the daemon's --debug lines), by count."""
    import collections
    import re
    seen = collections.defaultdict(list)
    with open(logpath, errors="replace") as f:
        for line in f:
            m = re.search(r"held the loop ([0-9.]+) ms \((\S+)\+(0x[0-9a-f]+)\): ([0-9.]+) ms "
                          r"on the CPU, (\d+) waits, (\d+) preemptions", line)
            if m:
                seen[m.group(3)].append((float(m.group(1)), float(m.group(4)),
                                         int(m.group(5)), int(m.group(6))))
    if not seen:
        print("\nNo callback held the loop 10 ms or more.")
        return
    offsets = list(seen)
    out = subprocess.run(["addr2line", "-f", "-s", "-e", os.path.join(build, "paddockd")]
                         + offsets, capture_output=True, text=True).stdout.split("\n")
    names = {off: (out[2 * i], out[2 * i + 1]) for i, off in enumerate(offsets)}
    print("\nCallbacks that held the loop 10 ms or more (growth and all phases):\n")
    print("| function | where | times | median | worst | median on the CPU | "
          "median waits / preemptions |")
    print("|---|---|---|---|---|---|---|")
    for off, runs in sorted(seen.items(), key=lambda kv: -len(kv[1])):
        fn, where = names[off]
        took = [r[0] for r in runs]
        print("| `%s` | %s | %d | %.1f ms | %.1f ms | %.1f ms | %g / %g |" % (
            fn, where, len(runs), statistics.median(took), max(took),
            statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs),
            statistics.median(r[3] for r in runs)))


def main():
    if os.geteuid() != 0:
        sys.exit("bench/mixed_load.py runs as root")
    img = tempfile.mkdtemp(prefix="paddock-mixload-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    build = os.environ.get("PADDOCK_BUILD", os.path.join(REPO, "build"))
    conftest.BUILD = build
    conftest.PADDOCKD = os.path.join(build, "paddockd")
    conftest.PADDOCK = os.path.join(build, "paddock")
    extra = os.environ.get("BENCH_MIX_ARGS", "").split() + (["--debug"] if SLOW_NAMES else [])
    d = conftest.Daemon(rootfs, extra_args=extra)
    try:
        admin = conftest.UnixHTTPConnection(d.sock)
        create(admin, "probe", "sandbox", False)
        create(admin, "mix-r", "computer", NET)
        t0 = time.perf_counter()
        for i in range(N):
            computer = NET and i % 2 == 0
            create(admin, "mix-p%d" % i, "computer" if computer else "sandbox", computer)
        grown = time.perf_counter() - t0
        probe = conftest.UnixHTTPConnection(d.sock)
        for _ in range(20):  # warm: the probe's slot, the connection
            request(probe, "POST", "/v1/envs/probe/exec", EXEC_TRUE)
        ls = []
        for _ in range(7):  # `paddock ls` alone: the whole answer, read
            t0 = time.perf_counter()
            status, _ = request(admin, "GET", "/v1/envs")
            ls.append(time.perf_counter() - t0)
            if status != 200:
                raise SystemExit("list: %d" % status)
        rows = [("alone", False, False, False), ("while B lists", True, False, False),
                ("while C creates, execs, deletes", False, True, False),
                ("while B and C run", True, True, False),
                ("while D stops and starts a computer", False, False, True)]
        results = [(label, phase(d, admin, probe, b, c, r)) for label, b, c, r in rows]
        idle = results[0][1]
        print("Exec `true` into a sandbox (client A, raw HTTP keep-alive) with %d other "
              "environments (%s); %.0f s a phase; %s, load %.1f; population grown in %.0f s; "
              "GET /v1/envs alone: median of 7 %.1f ms" % (
                  N, "half of them networked computers" if NET else "all sandboxes", SECONDS,
                  time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0],
                  grown, statistics.median(ls) * 1e3))
        print()
        print("| A's execs | median | p99 | worst | p99 / alone's median | B's listings | "
              "C's (D's) cycles | daemon's longest loop turn | longest callback |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, r in results:
            print("| %s (%d) | %.2f ms | %.2f ms | %.2f ms | %.1f× | %s | %s | %.2f ms | "
                  "%.2f ms |" % (
                      label, r["n"], r["median"] * 1e3, r["p99"] * 1e3, r["max"] * 1e3,
                      r["p99"] / idle["median"], r["listed"] or "-", r["cycled"] or "-",
                      r["turn"] * 1e3, r["callback"] * 1e3))
        if SLOW_NAMES:
            print_slow_callbacks(d.logpath, build)
    except BaseException:
        # The daemon's log goes with its directory: keep a copy of a failed run's.
        subprocess.run(["cp", d.logpath, "/tmp/mixed_load-paddockd.log"])
        print("the daemon's log: /tmp/mixed_load-paddockd.log", file=sys.stderr)
        raise
    finally:
        d.teardown()
        subprocess.run(["rm", "-rf", img])


if __name__ == "__main__":
    main()
