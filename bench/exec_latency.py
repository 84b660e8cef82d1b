#!/usr/bin/python3
"""Exec latency of one or more builds of paddockd, side by side.

    sudo bench/exec_latency.py                          # this tree's build/
    sudo BENCH_BUILDS="now=build before=/tmp/old/build" bench/exec_latency.py

For each build it starts a private paddockd (tests/conftest.py's Daemon: own root, socket, uid
registry, network namespace) with one sandbox, one computer, and one computer with a background
process running (`exec -d sleep`: what an agent's dev server looks like), then times
POST /v1/envs/NAME/exec {"cmd":["true"]} over the raw unix socket, keep-alive: back to back,
and with 100 ms of idle before each run (an agent thinking between commands). The builds'
runs are interleaved in shuffled blocks so that load from other work on the machine skews
them alike. Prints medians and p90 in a Markdown table; BENCH_RUNS (default 200) per row. A
last two rows give the floor: the same busybox `true` spawned and reaped on the host without any
isolation, back to back and after the same idle. BENCH_ARG_KIB=N gives `true` N KiB of
arguments (in 64 KiB strings): past ~96 KiB a command no longer fits one exec slot message.
"""
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
sys.path.insert(0, os.path.join(REPO, "tests"))
import conftest  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "200"))
ARG_KIB = int(os.environ.get("BENCH_ARG_KIB", "0"))
CMD = ["true"] + ["a" * 65535] * (ARG_KIB // 64) + (["a" * (ARG_KIB % 64 * 1024)] if ARG_KIB % 64 else [])
BLOCK = 10
GAPS = (0.0, 0.1)
LABELS = {"s": "sandbox", "c": "computer", "b": "computer, a background process running"}


def builds():
    spec = os.environ.get("BENCH_BUILDS", "now=" + os.path.join(REPO, "build"))
    out = []
    for item in spec.split():
        name, _, path = item.partition("=")
        out.append((name, os.path.abspath(path)))
    return out


def exec_once(conn, env):
    body = json.dumps({"cmd": CMD}).encode()
    t0 = time.perf_counter()
    conn.request("POST", "/v1/envs/%s/exec" % env, body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    dt = time.perf_counter() - t0
    if r.status != 200 or json.loads(data)["exit_code"] != 0:
        raise SystemExit("exec failed: %d %s" % (r.status, data[:200]))
    return dt


def main():
    if os.geteuid() != 0:
        sys.exit("bench/exec_latency.py runs as root")
    img = tempfile.mkdtemp(prefix="paddock-execlat-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    daemons = {}
    try:
        for name, path in builds():
            # the harness starts PADDOCKD and runs PADDOCK (module globals)
            conftest.BUILD = path
            conftest.PADDOCKD = os.path.join(path, "paddockd")
            conftest.PADDOCK = os.path.join(path, "paddock")
            d = conftest.Daemon(rootfs)
            for env, kind in (("s", "sandbox"), ("c", "computer"), ("b", "computer")):
                r = d.api("POST", "/v1/envs", {"name": env, "kind": kind, "image": "base"})
                assert r.status == 201, r
            r = d.api("POST", "/v1/envs/b/exec", {"cmd": ["sleep", "3600"], "detach": True})
            assert r.status == 201, r
            daemons[name] = (d, conftest.UnixHTTPConnection(d.sock))
        rows = [(b, env, gap) for b in daemons for env in ("s", "c", "b") for gap in GAPS]
        times = {row: [] for row in rows}
        for row in rows:  # warm-up
            exec_once(daemons[row[0]][1], row[1])
        while min(len(v) for v in times.values()) < RUNS:
            random.shuffle(rows)
            for row in rows:
                b, env, gap = row
                for _ in range(BLOCK):
                    if gap:
                        time.sleep(gap)
                    times[row].append(exec_once(daemons[b][1], env))
        # The floor: the same busybox `true`, spawned and reaped on the host with no
        # isolation at all (what any exec pays for the process itself on this machine).
        busybox = os.path.join(rootfs, "bin", "busybox")
        floor = {gap: [] for gap in GAPS}
        for _ in range(RUNS):
            for gap in GAPS:
                if gap:
                    time.sleep(gap)
                t0 = time.perf_counter()
                pid = os.posix_spawn(busybox, ["true"], {})
                os.waitpid(pid, 0)
                floor[gap].append(time.perf_counter() - t0)
        load = os.getloadavg()[0]
        print("exec `true`%s, raw HTTP keep-alive, %d runs per row, %s, load %.1f" % (
            " with %d KiB of arguments" % ARG_KIB if ARG_KIB else "", RUNS,
            time.strftime("%Y-%m-%d"), load))
        print()
        print("| build | environment | idle before each | median | p90 |")
        print("|---|---|---|---|---|")
        for row in sorted(times):
            b, env, gap = row
            v = sorted(times[row])
            print("| %s | %s | %s | %.2f ms | %.2f ms |" % (
                b, LABELS[env], "%d ms" % (gap * 1000),
                statistics.median(v) * 1000, v[int(len(v) * 0.9)] * 1000))
        for gap in GAPS:
            v = sorted(floor[gap])
            print("| host, no isolation: `posix_spawn` + `waitpid` of the same busybox | - | "
                  "%d ms | %.2f ms | %.2f ms |" % (gap * 1000, statistics.median(v) * 1000,
                                                   v[int(len(v) * 0.9)] * 1000))
    finally:
        for d, _ in daemons.values():
            d.teardown()
        subprocess.run(["rm", "-rf", img])


if __name__ == "__main__":
    main()
