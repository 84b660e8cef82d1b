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
  - while B and C both run.

B and C are processes of their own (no shared interpreter lock with A). For each phase it
prints A's median, p99 and worst, how many listings and cycles B and C finished, and the
daemon's longest loop turn in the phase (paddock_loop_turn_max_seconds: the longest it
answered nobody else). On a 2-core machine A also competes with B, C, their environments'
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


def loop_turn_max(c):
    """The daemon's longest loop turn since the previous scrape (a scrape starts it again)."""
    for line in request(c, "GET", "/metrics")[1].decode().splitlines():
        if line.startswith("paddock_loop_turn_max_seconds "):
            return float(line.split()[1])
    return float("nan")


def phase(d, admin, probe, with_lister, with_cycler):
    stop = multiprocessing.Event()
    listed = multiprocessing.Value("i", 0)
    cycled = multiprocessing.Value("i", 0)
    procs = []
    if with_lister:
        procs.append(multiprocessing.Process(target=lister, args=(d.sock, stop, listed)))
    if with_cycler:
        procs.append(multiprocessing.Process(target=cycler, args=(d.sock, stop, cycled)))
    for p in procs:
        p.start()
    time.sleep(0.5 if procs else 0)  # let them get going
    loop_turn_max(admin)
    times = []
    end = time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        status, data = request(probe, "POST", "/v1/envs/probe/exec", EXEC_TRUE)
        times.append(time.perf_counter() - t0)
        if status != 200:
            raise SystemExit("probe exec: %d %s" % (status, data[:200]))
    turn = loop_turn_max(admin)
    stop.set()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit("a load client failed")
    times.sort()
    return {"median": statistics.median(times), "p99": times[int(len(times) * 0.99)],
            "max": times[-1], "n": len(times), "listed": listed.value,
            "cycled": cycled.value, "turn": turn}


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
    d = conftest.Daemon(rootfs)
    try:
        admin = conftest.UnixHTTPConnection(d.sock)
        create(admin, "probe", "sandbox", False)
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
        rows = [("alone", False, False), ("while B lists", True, False),
                ("while C creates, execs, deletes", False, True), ("while B and C run", True, True)]
        results = [(label, phase(d, admin, probe, b, c)) for label, b, c in rows]
        idle = results[0][1]
        print("Exec `true` into a sandbox (client A, raw HTTP keep-alive) with %d other "
              "environments (%s); %.0f s a phase; %s, load %.1f; population grown in %.0f s; "
              "GET /v1/envs alone: median of 7 %.1f ms" % (
                  N, "half of them networked computers" if NET else "all sandboxes", SECONDS,
                  time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0],
                  grown, statistics.median(ls) * 1e3))
        print()
        print("| A's execs | median | p99 | worst | p99 / alone's median | B's listings | "
              "C's cycles | daemon's longest loop turn |")
        print("|---|---|---|---|---|---|---|---|")
        for label, r in results:
            print("| %s (%d) | %.2f ms | %.2f ms | %.2f ms | %.1f× | %s | %s | %.2f ms |" % (
                label, r["n"], r["median"] * 1e3, r["p99"] * 1e3, r["max"] * 1e3,
                r["p99"] / idle["median"], r["listed"] or "-", r["cycled"] or "-",
                r["turn"] * 1e3))
    finally:
        d.teardown()
        subprocess.run(["rm", "-rf", img])


if __name__ == "__main__":
    main()
