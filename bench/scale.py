#!/usr/bin/python3
"""Paddock at scale: list, inspect and create latency as the population grows.

Starts a private paddockd the way the integration tests do (tests/conftest.py's
Daemon: its own --root under /var/tmp, socket, uid registry and network namespace), imports the
busybox image, then for each N grows the population to N networked computers ("open") and N
sandboxes (no network) and measures over the raw unix socket:

  - GET /v1/envs (what `paddock ls` asks): median of BENCH_LIST_RUNS calls
  - GET /v1/envs/NAME (`paddock inspect`) of a networked computer: median of BENCH_INSPECT_RUNS
  - GET /metrics (a Prometheus scrape of every environment): median of BENCH_LIST_RUNS
  - POST /v1/envs of one more networked computer, and of one more sandbox (then deleted again:
    the population stays N + N), and the DELETE of that computer: medians of BENCH_CREATE_RUNS
  - restart: SIGTERM to the daemon, start it again, until GET /v1/system answers (it re-adopts
    every running environment and re-applies their firewall first); BENCH_RESTART=0 skips it

It prints a Markdown table and removes everything it made (the Daemon's teardown: every
environment, the daemon by its pid, cgroups, mounts, the netns, the directories).

    make && sudo bench/scale.py                  # N = 50 100 200 500
    BENCH_SCALE_N="50 100 200 500 1000" sudo bench/scale.py
    PADDOCK_BUILD=/tmp/b sudo bench/scale.py     # binaries from another build

Run as root. Measures and reports; never asserts a timing.
"""
import os
import platform
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

NS = [int(x) for x in os.environ.get("BENCH_SCALE_N", "50 100 200 500").split()]
LIST_RUNS = int(os.environ.get("BENCH_LIST_RUNS", "5"))
INSPECT_RUNS = int(os.environ.get("BENCH_INSPECT_RUNS", "21"))
CREATE_RUNS = int(os.environ.get("BENCH_CREATE_RUNS", "5"))
RESTART = os.environ.get("BENCH_RESTART", "1") != "0"


def timed(d, method, path, body=None, expect=(200,)):
    t0 = time.perf_counter()
    r = d.api(method, path, body, timeout=3600)
    dt = time.perf_counter() - t0
    if r.status not in expect:
        raise RuntimeError("%s %s: %r" % (method, path, r))
    return dt, r


def create(d, name, kind):
    body = {"name": name, "kind": kind}
    if kind == "computer":
        body["network"] = {"mode": "open"}
    return timed(d, "POST", "/v1/envs", body, expect=(201,))[0]


def fmt(s):
    return "%.1f ms" % (s * 1e3) if s < 1 else "%.2f s" % s


def cgroup_mode():
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "v2"
    return "v1 hybrid" if os.path.isdir("/sys/fs/cgroup/unified") else "v1"


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
        have = 0
        for n in NS:
            t0 = time.perf_counter()
            for i in range(have, n):
                create(d, "c%d" % i, "computer")
                create(d, "s%d" % i, "sandbox")
            grow = time.perf_counter() - t0
            have = max(have, n)
            envs = timed(d, "GET", "/v1/envs")[1].json["envs"]
            assert len(envs) == 2 * have, len(envs)
            ls = [timed(d, "GET", "/v1/envs")[0] for _ in range(LIST_RUNS)]
            ins = [timed(d, "GET", "/v1/envs/c%d" % (have // 2))[0] for _ in range(INSPECT_RUNS)]
            scrape = [timed(d, "GET", "/metrics")[0] for _ in range(LIST_RUNS)]
            mk_c, mk_s, rm_c = [], [], []
            for _ in range(CREATE_RUNS):
                mk_c.append(create(d, "extra-c", "computer"))
                mk_s.append(create(d, "extra-s", "sandbox"))
                rm_c.append(timed(d, "DELETE", "/v1/envs/extra-c?force=1")[0])
                timed(d, "DELETE", "/v1/envs/extra-s?force=1")
            mk_c, mk_s, rm_c = (statistics.median(x) for x in (mk_c, mk_s, rm_c))
            restart = None
            if RESTART:
                d.stop(timeout=600)
                t1 = time.perf_counter()
                d.start(timeout=600)
                restart = time.perf_counter() - t1
                assert len(timed(d, "GET", "/v1/envs")[1].json["envs"]) == 2 * have
            row = (have, statistics.median(ls), statistics.median(ins), mk_c, mk_s, rm_c, grow,
                   restart, statistics.median(scrape))
            rows.append(row)
            print("N=%d: ls %s, inspect %s, metrics %s, create computer %s, create sandbox %s, "
                  "destroy computer %s, restart %s (growing took %.0f s)" % (
                      row[0], fmt(row[1]), fmt(row[2]), fmt(row[8]), fmt(row[3]), fmt(row[4]),
                      fmt(row[5]), fmt(restart) if restart is not None else "-", grow),
                  file=sys.stderr, flush=True)
    finally:
        if d is not None:
            t0 = time.perf_counter()
            problems = d.teardown()
            print("teardown: %.0f s%s" % (time.perf_counter() - t0,
                                          "; problems: %s" % problems if problems else ""),
                  file=sys.stderr)
        shutil.rmtree(img, ignore_errors=True)

    print("%s, kernel %s, %d cores, cgroup %s; each N is N open computers + N sandboxes; "
          "ls = median of %d, inspect = median of %d, create/destroy = median of %d" % (
              time.strftime("%Y-%m-%d"), platform.release(), os.cpu_count(), cgroup_mode(),
              LIST_RUNS, INSPECT_RUNS, CREATE_RUNS))
    print()
    print("| N + N | `GET /v1/envs` | `GET /v1/envs/NAME` | `GET /metrics` | create computer "
          "| create sandbox | destroy computer | restart |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %s | %s | %s | %s | %s | %s | %s |" % (
            r[0], fmt(r[1]), fmt(r[2]), fmt(r[8]), fmt(r[3]), fmt(r[4]), fmt(r[5]),
            fmt(r[7]) if r[7] is not None else "-"))


if __name__ == "__main__":
    main()
