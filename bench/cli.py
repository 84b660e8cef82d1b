#!/usr/bin/python3
"""The CLI's own cost: start-up and a round trip, as a person or a script calling `paddock` sees
it, for one CLI binary or several side by side (an older build against the new one).

Starts a private paddockd the way the integration tests do (tests/conftest.py's Daemon: its own
--root under /var/tmp, socket, uid registry and network namespace), imports the busybox image,
creates one sandbox and then times, as whole processes:

  - version:  `paddock --version`             (start-up alone: loading, no socket)
  - ls:       `paddock --socket S ls`         (one small request, a table printed)
  - exec:     `paddock --socket S exec sb -- true`
  - floors:   /bin/true spawned the same way (what starting any process costs here), the
              same exec over a raw unix-socket connection from this process
              (POST /v1/envs/sb/exec, a new connection each time: the daemon's share), and
              the same exec by bench/cli_floor.c, a minimal C client (libc only, the CLI's
              request, no JSON), spawned the same way: the least a process can do for it, so
              the CLI's own cost is its exec row minus this one (skipped if cc fails)

All rows take turns, one run each per round in a new shuffled order every round (one warm-up
run each first), so load that comes and goes on a shared machine hits them alike, and no row
always follows the same one: an exec soon after another is faster than one after a pause. Wall time is taken
around posix_spawn + wait4, CPU time (user + sys) from wait4's rusage.

    make && sudo bench/cli.py                           # this build's CLI
    sudo bench/cli.py --vs /tmp/old/build/paddock       # and an older build, in turn
    BENCH_RUNS=100 sudo bench/cli.py

PADDOCK_BUILD selects the build (paddockd, paddock, paddock-init), as for the tests. Prints a
Markdown table with medians and p90 (nearest rank), each binary against the first as the median
of the ratios within each round (robust to load that drifts), and the shared libraries each binary names (DT_NEEDED). Measures and reports; never
asserts a timing. Removes everything it made (the Daemon's teardown).
"""
import argparse
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
import conftest  # noqa: E402  (the integration harness: Daemon, UnixHTTPConnection)

ENV = "sb"


def spawn_time(argv):
    """Run argv to its end (stdio to /dev/null): (wall s, cpu s, exit status)."""
    devnull = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    try:
        fa = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
              (os.POSIX_SPAWN_DUP2, devnull, 2)]
        t0 = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa)
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
    finally:
        os.close(devnull)
    return wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def raw_exec(sock):
    """POST /v1/envs/sb/exec {"cmd":["true"]} on a new connection: (wall s, 0, exit code)."""
    body = json.dumps({"cmd": ["true"]}).encode()
    t0 = time.perf_counter()
    c = conftest.UnixHTTPConnection(sock, timeout=60)
    c.request("POST", "/v1/envs/%s/exec" % ENV, body=body,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    wall = time.perf_counter() - t0
    code = 0 if r.status == 200 and b'"exit_code":0' in data.replace(b" ", b"") else 1
    return wall, 0.0, code


def needed(path):
    """The shared libraries a binary names (readelf -d), or '?'."""
    try:
        out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    except OSError:
        return "?"
    libs = [l.split("[", 1)[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l]
    return ", ".join(libs) if libs else "none"


def pctl(xs, p):
    s = sorted(xs)
    return s[max(0, math.ceil(p * len(s)) - 1)]


def ms(x):
    return "%.2f ms" % (x * 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "40")))
    ap.add_argument("--vs", action="append", default=[], metavar="PADDOCK",
                    help="another CLI binary to time in turn with this build's")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/cli.py runs as root (a private paddockd)")
    clis = [conftest.PADDOCK] + [os.path.abspath(p) for p in a.vs]
    for c in clis:
        if not os.access(c, os.X_OK):
            sys.exit("%s is not executable" % c)

    img = tempfile.mkdtemp(prefix="paddock-clibench-img-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    d = None
    rows = {}  # (label, binary index or None) -> list of (wall, cpu)
    failures = {}
    try:
        d = conftest.Daemon(rootfs)
        d.cli("create", ENV, "--sandbox")
        S = d.sock
        jobs = []  # (row, binary index, callable)
        for verb, args in (("version", ["--version"]), ("ls", ["--socket", S, "ls"]),
                           ("exec", ["--socket", S, "exec", ENV, "--", "true"])):
            for i, c in enumerate(clis):
                jobs.append(((verb, i), lambda argv=[c] + args: spawn_time(argv)))
        jobs.append((("floor: /bin/true spawned", None), lambda: spawn_time(["/bin/true"])))
        jobs.append((("floor: exec over raw HTTP, new connection", None), lambda: raw_exec(S)))
        floor = os.path.join(img, "cli_floor")
        if subprocess.run(["cc", "-O2", "-o", floor, os.path.join(HERE, "cli_floor.c")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            jobs.append((("floor: exec by a minimal C client (bench/cli_floor.c)", None),
                         lambda: spawn_time([floor, S, ENV])))
        for key, fn in jobs:  # one warm-up run each
            fn()
        rng = random.Random(1)
        for _ in range(a.runs):
            # A new order each round: an exec right after another costs less than one after a
            # pause (on cgroup v1 the first exec after idle waits for an RCU grace period), so
            # no binary may always take the same place.
            rng.shuffle(jobs)
            for key, fn in jobs:
                wall, cpu, code = fn()
                if code != 0:
                    failures[key] = failures.get(key, 0) + 1
                rows.setdefault(key, []).append((wall, cpu))
    finally:
        if d is not None:
            problems = d.teardown()
            if problems:
                print("teardown problems: %s" % problems, file=sys.stderr)
        shutil.rmtree(img, ignore_errors=True)

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print("%s UTC, %s, kernel %s, %d cores, load %s; %d runs per row, rows in turn "
          "(shuffled each round), 1 warm-up each; wall around posix_spawn + wait4, CPU = user + sys from rusage" % (
              time.strftime("%Y-%m-%d %H:%M", time.gmtime()), platform.machine(),
              platform.release(), os.cpu_count(), load, a.runs))
    print()
    for i, c in enumerate(clis):
        print("- CLI %s: `%s` (DT_NEEDED: %s)" % ("ABCDEFGH"[i], c, needed(c)))
    print()
    L = "ABCDEFGH"
    cols = ["command"]
    for i in range(len(clis)):
        cols += ["CLI %s wall, median (p90)" % L[i], "CLI %s CPU" % L[i]]
    cols += ["%s / A (wall, CPU; median of the rounds' ratios)" % L[i]
             for i in range(1, len(clis))]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for verb, show in (("version", "`paddock --version`"), ("ls", "`paddock ls` (1 sandbox)"),
                       ("exec", "`paddock exec sb -- true`")):
        cells = [show]
        med = []
        for i in range(len(clis)):
            xs = rows.get((verb, i), [])
            w = [x[0] for x in xs]
            u = [x[1] for x in xs]
            med.append((statistics.median(w), statistics.median(u)))
            cells += ["%s (%s)" % (ms(med[-1][0]), ms(pctl(w, 0.9))), ms(med[-1][1])]
        # The ratio within each round, then their median: robust to load that drifts.
        base = rows.get((verb, 0), [])
        for i in range(1, len(clis)):
            pairs = list(zip(rows.get((verb, i), []), base))
            rw = [x[0] / y[0] for x, y in pairs if y[0] > 0]
            rc = [x[1] / y[1] for x, y in pairs if y[1] > 0]
            cells.append("%s, %s" % ("%.2f" % statistics.median(rw) if rw else "n/a",
                                     "%.2f" % statistics.median(rc) if rc else "n/a"))
        print("| " + " | ".join(cells) + " |")
    for key in rows:
        if key[1] is None:
            w = [x[0] for x in rows[key]]
            cells = [key[0], "%s (%s)" % (ms(statistics.median(w)), ms(pctl(w, 0.9)))]
            cells += [""] * (len(cols) - len(cells))
            print("| " + " | ".join(cells) + " |")
    if failures:
        print()
        print("failed runs: %s" % ", ".join("%s %s: %d" % (k[0], L[k[1]] if k[1] is not None
                                                           else "", n)
                                            for k, n in failures.items()))


if __name__ == "__main__":
    main()
