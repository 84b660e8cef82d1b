#!/usr/bin/python3
"""Sandbox create / destroy latency over raw HTTP, for one or more builds in the same run.

    sudo flock /tmp/paddock-it.lock bench/create_latency.py [BUILD ...]

For each BUILD (a directory with paddockd, paddock, paddock-init; default <repo>/build) it
starts a private paddockd the way the integration tests do (tests/conftest.py's Daemon: own
--root under /var/tmp, socket, uid registry, network namespace), imports the busybox image and
then, with the builds' daemons taking turns in blocks of BLOCK runs (so load that comes and goes
on a shared machine skews every build alike):

  - cycle:    POST /v1/envs {"kind":"sandbox"} -> POST exec {"cmd":["true"]} ->
              DELETE ?force=1, one keep-alive connection; the median of RUNS cycles, and of
              each of the three parts;
  - parallel: PAR_N sandboxes created by CLIENTS clients at once (threads, a keep-alive
              connection each, a share of the names each), then destroyed the same way;
              creates/s and destroys/s, the median of PAR_ROUNDS rounds.

Environment: BENCH_RUNS (50), BENCH_BLOCK (10), BENCH_CLIENTS (4), BENCH_PAR_N (40),
BENCH_PAR_ROUNDS (3), BENCH_GAP_MS (0: cycles back to back; e.g. 100 for an agent that thinks
between sandboxes, when the kernel's per-operation state has gone idle again). Prints medians; never asserts a timing. Everything it starts is removed
(the Daemon's teardown).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
import conftest  # noqa: E402
from scale import Conn  # noqa: E402  (a keep-alive connection that checks the status)

RUNS = int(os.environ.get("BENCH_RUNS", "50"))
BLOCK = int(os.environ.get("BENCH_BLOCK", "10"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "4"))
PAR_N = int(os.environ.get("BENCH_PAR_N", "40"))
PAR_ROUNDS = int(os.environ.get("BENCH_PAR_ROUNDS", "3"))
GAP = int(os.environ.get("BENCH_GAP_MS", "0")) / 1e3


def use_build(build):
    """conftest's Daemon reads the binaries' paths from module globals."""
    conftest.PADDOCKD = os.path.join(build, "paddockd")
    conftest.PADDOCK = os.path.join(build, "paddock")


def cycle(c, name, out):
    t0 = time.perf_counter()
    c.request("POST", "/v1/envs", {"name": name, "kind": "sandbox"}, (201,))
    t1 = time.perf_counter()
    _, body = c.request("POST", "/v1/envs/%s/exec" % name, {"cmd": ["true"]})
    if b'"exit_code":0' not in body.replace(b" ", b""):
        raise RuntimeError("exec: %s" % body[:200])
    t2 = time.perf_counter()
    c.request("DELETE", "/v1/envs/%s?force=1" % name)
    t3 = time.perf_counter()
    out["total"].append(t3 - t0)
    out["create"].append(t1 - t0)
    out["exec"].append(t2 - t1)
    out["destroy"].append(t3 - t2)


def parallel(sock, method, items, expect):
    parts = [items[i::CLIENTS] for i in range(CLIENTS)]
    errors = []
    go = threading.Barrier(CLIENTS + 1)

    def client(part):
        conn = Conn(sock)
        try:
            go.wait()
            for path, body in part:
                conn.request(method, path, body, expect)
        except Exception as e:  # noqa: BLE001 (raised below)
            errors.append(e)
        finally:
            conn.close()

    ts = [threading.Thread(target=client, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    took = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return took


def par_round(d, out, r):
    names = ["p%d-%d" % (r, i) for i in range(PAR_N)]
    took = parallel(d.sock, "POST", [("/v1/envs", {"name": n, "kind": "sandbox"})
                                     for n in names], (201,))
    out["par_create"].append(PAR_N / took)
    took = parallel(d.sock, "DELETE", [("/v1/envs/%s?force=1" % n, None) for n in names], (200,))
    out["par_destroy"].append(PAR_N / took)


def ms(xs):
    return "%.2f ms" % (statistics.median(xs) * 1e3)


def main():
    if os.geteuid() != 0:
        sys.exit("bench/create_latency.py runs as root")
    builds = [os.path.abspath(b) for b in sys.argv[1:]] or [os.path.join(REPO, "build")]
    img = tempfile.mkdtemp(prefix="paddock-cl-img-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    daemons = []
    res = [{k: [] for k in ("total", "create", "exec", "destroy", "par_create", "par_destroy")}
           for _ in builds]
    try:
        for b in builds:
            use_build(b)
            daemons.append(conftest.Daemon(rootfs))
        conns = [Conn(d.sock) for d in daemons]
        for i, c in enumerate(conns):  # warm-up
            cycle(c, "warm", {k: [] for k in res[i]})
        done = 0
        while done < RUNS:
            n = min(BLOCK, RUNS - done)
            for i, c in enumerate(conns):
                for j in range(n):
                    if GAP:
                        time.sleep(GAP)
                    cycle(c, "c%d" % (done + j), res[i])
            done += n
        for r in range(PAR_ROUNDS):
            for i, d in enumerate(daemons):
                par_round(d, res[i], r)
        for c in conns:
            c.close()
    finally:
        for b, d in zip(builds, daemons):
            use_build(b)
            for p in d.teardown():
                print("teardown: %s" % p, file=sys.stderr)
        subprocess.run(["rm", "-rf", "--one-file-system", img])
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("runs %d, parallel: %d clients x %d sandboxes, %d rounds; load %s"
          % (RUNS, CLIENTS, PAR_N, PAR_ROUNDS, load))
    print("| build | cycle | create | exec | destroy | creates/s (%d clients) | destroys/s |"
          % CLIENTS)
    print("|---|---|---|---|---|---|---|")
    for b, r in zip(builds, res):
        print("| %s | %s | %s | %s | %s | %.0f | %.0f |"
              % (b, ms(r["total"]), ms(r["create"]), ms(r["exec"]), ms(r["destroy"]),
                 statistics.median(r["par_create"]), statistics.median(r["par_destroy"])))


if __name__ == "__main__":
    main()
