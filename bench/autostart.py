#!/usr/bin/python3
"""A daemon start after a reboot: N stopped computers marked autostart, for one or more builds.

    sudo flock /tmp/paddock-it.lock bench/autostart.py [BUILD ...]

For each BUILD (a directory with paddockd, paddock, paddock-init; default <repo>/build) it
starts a private paddockd the way the integration tests do (tests/conftest.py's Daemon), makes
BENCH_AUTOSTART_N computers with "autostart": true (networked, "network":{"mode":"open"};
BENCH_AUTOSTART_NET=0: none), stops them all, then BENCH_AUTOSTART_ROUNDS times stops the
daemon and starts it again, timing from the start of paddockd to

  - its first answer (GET /v1/system), and
  - every computer running (GET /v1/envs polled every 20 ms),

and prints the medians per build. Everything it starts is removed (the Daemon's teardown).
Measures and reports; never asserts a timing.
"""
import json
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

N = int(os.environ.get("BENCH_AUTOSTART_N", "200"))
NET = os.environ.get("BENCH_AUTOSTART_NET", "1") != "0"
ROUNDS = int(os.environ.get("BENCH_AUTOSTART_ROUNDS", "3"))


def api(d, method, path, body=None, timeout=120):
    r = d.api(method, path, body, timeout=timeout)
    if r.status >= 300:
        raise SystemExit("%s %s: %d %s" % (method, path, r.status, r.body[:200]))
    return r


def all_running(d):
    envs = json.loads(d.api("GET", "/v1/envs", timeout=30).body)["envs"]
    return all(e["state"] == "running" for e in envs)


def one_round(d):
    for i in range(N):  # a reboot: none of them runs when the daemon starts
        api(d, "POST", "/v1/envs/auto%d/stop?timeout=0" % i)
    d.stop()
    t0 = time.perf_counter()
    d.start(timeout=600)  # returns at the first answer of GET /v1/system
    first = time.perf_counter() - t0
    while not all_running(d):
        if time.perf_counter() - t0 > 600:
            raise SystemExit("not all running after 600 s")
        time.sleep(0.02)
    return first, time.perf_counter() - t0


def bench(build, rootfs):
    conftest.BUILD = build
    conftest.PADDOCKD = os.path.join(build, "paddockd")
    conftest.PADDOCK = os.path.join(build, "paddock")
    d = conftest.Daemon(rootfs)
    try:
        for i in range(N):
            spec = {"name": "auto%d" % i, "kind": "computer", "autostart": True}
            if NET:
                spec["network"] = {"mode": "open"}
            api(d, "POST", "/v1/envs", spec)
        rounds = [one_round(d) for _ in range(ROUNDS)]
        return (statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds))
    finally:
        d.teardown()


def main():
    if os.geteuid() != 0:
        sys.exit("bench/autostart.py runs as root")
    builds = sys.argv[1:] or [os.path.join(REPO, "build")]
    img = tempfile.mkdtemp(prefix="paddock-autostart-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    try:
        subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                       stdout=subprocess.DEVNULL)
        print("Daemon start with %d stopped autostart computers (%s), median of %d; %s, load %.1f"
              % (N, "networked" if NET else "no network", ROUNDS,
                 time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()[0]))
        print()
        print("| build | first answer | all running |")
        print("|---|---|---|")
        for b in builds:
            first, done = bench(b, rootfs)
            print("| %s | %.2f s | %.2f s |" % (b, first, done))
    finally:
        subprocess.run(["rm", "-rf", img])


if __name__ == "__main__":
    main()
