#!/usr/bin/python3
"""One agent's exec latency while the daemon is busy with others (issue 12, item 2).

    sudo bench/mixed_load.py                        # 2,000 environments, 10 s a phase
    BENCH_MIX_N=500 BENCH_MIX_SECONDS=5 sudo bench/mixed_load.py

Starts a private paddockd the way the integration tests do (tests/conftest.py's Daemon: own
root, socket, uid registry and network namespace) with the busybox image, grows the population
to BENCH_MIX_N environments (half networked computers, "network":{"mode":"open"}, half
sandboxes; BENCH_MIX_NET=0: all sandboxes), times `GET /v1/envs` alone (median of 7), then
measures client A: POST /v1/envs/probe/exec {"cmd":["true"]} back to back on one keep-alive
connection into a sandbox, for BENCH_MIX_SECONDS in each of five phases:

  - alone;
  - while client B lists every environment (GET /v1/envs, the whole answer read) back to back;
  - while client C creates a sandbox, execs `true` in it and deletes it (?force=1) in a loop;
  - while B and C both run;
  - while D stops (timeout 0) and starts a networked computer of its own in a loop.

BENCH_MIX_PHASES=2,4 runs only those (numbered from 0 in that order; "alone" always runs).

B and C are processes of their own (no shared interpreter lock with A). For each phase it
prints A's median, p99 and worst, how many listings and cycles B and C finished, and the
daemon's longest loop turn in the phase (paddock_loop_turn_max_seconds: the longest it
answered nobody else) and its longest single callback (one request's or event's own share of
a turn).

The floor (BENCH_MIX_FLOOR=1, the default): in each phase, after A's execs and with the same
load still running, A spends as long again on each of three things that do less than an exec —
GET /v1/envs/probe (the daemon's cheapest answer: the daemon wakes, then A), a one-byte round
trip to a process of its own that only echoes (that process wakes, then A: no paddockd at all),
and /bin/true spawned and waited for by A itself (a new process, its exec and exit: the least
any exec does, without paddockd, namespaces or cgroups). An exec does all of that and more
(the daemon wakes, the environment's exec slot wakes and clones the command, the command runs
and exits, the daemon wakes again, then A), so the spawn's p99 in a phase is a floor that no
daemon could go under for an exec on this machine under that load. The echo stays far under
it: a wake-up alone is cheap; what a busy machine delays is a new process and its exit (see
bench/README.md, "Where an exec's tail under load comes from").

BENCH_MIX_ARGS adds paddockd flags (e.g. "--nice 0"). BENCH_MIX_SLOW_NAMES=1 runs the daemon
with --debug and ends with the functions that held the loop 10 ms or more (addr2line on the
daemon's offsets). On a 2-core machine A also competes with B, C, their environments'
processes and the daemon for CPU: the loop turn tells the daemon's own share of a wait.
Removes everything it made. Measures and reports; never asserts a timing.
"""
import http.client
import json
import multiprocessing
import os
import socket
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
FLOOR = os.environ.get("BENCH_MIX_FLOOR", "1") != "0"
PHASES = [p.strip() for p in os.environ.get("BENCH_MIX_PHASES", "").split(",") if p.strip()]
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


def phase(label, d, admin, probe, with_lister, with_cycler, with_restarter=False):
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
    # On stderr, for a profiler started by hand at the right moment (perf sched record -a).
    print("%s: A's execs from now for %g s" % (label, SECONDS), file=sys.stderr, flush=True)

    def exec_true():
        status, data = request(probe, "POST", "/v1/envs/probe/exec", EXEC_TRUE)
        if status != 200:
            raise SystemExit("probe exec: %d %s" % (status, data[:200]))

    times = timed(exec_true)
    turn, callback = loop_maxima(admin)
    n_listed, n_cycled = listed.value, cycled.value
    floor = {}
    if FLOOR:
        def inspect():
            status, data = request(probe, "GET", "/v1/envs/probe")
            if status != 200:
                raise SystemExit("probe inspect: %d %s" % (status, data[:200]))
        floor["inspect"] = summary(timed(inspect))
        floor["echo"] = summary(timed(echo_round_trip()))
        end_echoes()
        floor["spawn"] = summary(timed(spawn_true))
    stop.set()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit("a load client failed")
    return dict(summary(times), listed=n_listed, cycled=n_cycled, turn=turn,
                callback=callback, floor=floor)


def timed(call):
    """call() back to back for SECONDS: each call's wall time."""
    times = []
    end = time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def summary(times):
    times = sorted(times)
    return {"median": statistics.median(times), "p99": times[int(len(times) * 0.99)],
            "max": times[-1], "n": len(times)}


def echo_round_trip():
    """A one-byte round trip to a process that does nothing but echo it: the least any
    request to another process can take on this machine at that moment."""
    here, there = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            here.close()
            while True:
                b = there.recv(1)
                if not b:
                    break
                there.sendall(b)
        finally:
            os._exit(0)  # never back into the parent's code
    there.close()
    ECHO_PIDS.append((pid, here))

    def call():
        here.sendall(b"x")
        if here.recv(1) != b"x":
            raise SystemExit("the echo process went away")
    return call


ECHO_PIDS = []


def spawn_true():
    """What any exec must at least do, here without paddockd or namespaces: make a process,
    run /bin/true in it and learn its exit."""
    pid = os.posix_spawn("/bin/true", ["true"], {})
    if os.waitpid(pid, 0)[1] != 0:
        raise SystemExit("/bin/true failed")


def end_echoes():
    while ECHO_PIDS:
        pid, sock = ECHO_PIDS.pop()
        sock.close()  # its recv returns b"": it exits
        os.waitpid(pid, 0)


def p99_median(r):
    return "%.2f / %.2f ms" % (r["p99"] * 1e3, r["median"] * 1e3)


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
        if PHASES:  # the first always: the others are compared with it
            rows = [rows[0]] + [row for i, row in enumerate(rows) if i and str(i) in PHASES]
        results = [(label, phase(label, d, admin, probe, b, c, r)) for label, b, c, r in rows]
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
        if FLOOR:
            print("\nThe floor in the same phases (A's p99 / median, %.0f s each after its execs, "
                  "the same load running): GET /v1/envs/probe; a one-byte round trip to a "
                  "process that only echoes; /bin/true spawned and waited for by A itself (no "
                  "paddockd, no namespaces). Last column: the exec's target, 2× its idle "
                  "median\n" % SECONDS)
            print("| phase | exec | inspect | echo | spawn `true` | target |")
            print("|---|---|---|---|---|---|")
            for label, r in results:
                f = r["floor"]
                print("| %s | %s | %s | %s | %s | %.2f ms |" % (
                    label, p99_median(r), p99_median(f["inspect"]), p99_median(f["echo"]),
                    p99_median(f["spawn"]), 2 * idle["median"] * 1e3))
        if SLOW_NAMES:
            print_slow_callbacks(d.logpath, build)
    except BaseException:
        # The daemon's log goes with its directory: keep a copy of a failed run's.
        subprocess.run(["cp", d.logpath, "/tmp/mixed_load-paddockd.log"])
        print("the daemon's log: /tmp/mixed_load-paddockd.log", file=sys.stderr)
        raise
    finally:
        end_echoes()
        d.teardown()
        subprocess.run(["rm", "-rf", img])


if __name__ == "__main__":
    main()
