#!/usr/bin/python3
"""Idle stop at scale (docs/operations.md, "Idle environments"): N sandboxes whose idle clocks
run; what a request costs then, how long N environments coming due at the same moment take to
be paused, how responsive the daemon stays meanwhile, and what a wake-up adds to an exec.
As root, on a private daemon (tests/conftest.py's), in its own netns:
    BENCH_IDLE_N=1000 /usr/bin/python3 bench/idle_scale.py
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import conftest  # noqa: E402

N = int(os.environ.get("BENCH_IDLE_N", "1000"))


def ms(samples):
    samples = sorted(samples)
    return "p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
        1000 * statistics.median(samples), 1000 * samples[int(len(samples) * 0.99) - 1]
        if len(samples) >= 100 else 1000 * samples[-1], 1000 * samples[-1])


def timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def main():
    img = tempfile.mkdtemp(prefix="paddock-bench-img-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    subprocess.run([os.path.join(conftest.REPO, "scripts", "busybox-rootfs.sh"), rootfs],
                   check=True, stdout=subprocess.DEVNULL)
    d = conftest.Daemon(rootfs)
    try:
        names = ["i%d" % i for i in range(N)]
        t0 = time.monotonic()
        for n in names:
            r = d.api("POST", "/v1/envs", {"name": n, "idle_timeout": 3600})
            assert r.status == 201, r
        print("created %d sandboxes with an idle timeout in %.1f s" % (N, time.monotonic() - t0))
        assert d.api("GET", "/v1/system").json["idle"]["watched"] == N

        exec_body = {"cmd": ["true"]}
        lat = [timed(lambda: d.api("POST", "/v1/envs/i0/exec", exec_body)) for _ in range(100)]
        print("exec with %d watched: %s" % (N, ms(lat)))
        lat = [timed(lambda: d.api("GET", "/v1/envs/i1")) for _ in range(100)]
        print("inspect with %d watched: %s" % (N, ms(lat)))

        # every clock restarts now with 2 s: all come due within the time the PATCHes take
        t0 = time.monotonic()
        for n in names:
            assert d.api("PATCH", "/v1/envs/" + n, {"idle_timeout": 2}).status == 200
        patched = time.monotonic()
        print("%d PATCHes in %.1f s" % (N, patched - t0))
        lat = []
        while True:
            t = time.monotonic()
            s = d.api("GET", "/v1/system").json
            lat.append(time.monotonic() - t)
            if s["idle"]["paused"] >= N:
                break
            if time.monotonic() - patched > 300:
                raise AssertionError("only %d paused after 300 s" % s["idle"]["paused"])
            time.sleep(0.02)
        print("all %d paused %.1f s after the last PATCH; GET /v1/system meanwhile: %s"
              % (N, time.monotonic() - patched, ms(lat)))

        wake = [timed(lambda n=n: d.api("POST", "/v1/envs/%s/exec" % n, exec_body))
                for n in names[:50]]
        again = [timed(lambda n=n: d.api("POST", "/v1/envs/%s/exec" % n, exec_body))
                 for n in names[:50]]
        print("exec that wakes a paused sandbox: %s; the next exec: %s" % (ms(wake), ms(again)))

        # a computer the idle timer stopped: the exec that wakes it boots it first
        wake = []
        assert d.api("POST", "/v1/envs", {"name": "comp", "kind": "computer",
                                          "idle_timeout": 1}).status == 201
        for _ in range(5):
            while d.api("GET", "/v1/envs/comp").json["state"] != "stopped":
                time.sleep(0.05)
            wake.append(timed(lambda: d.api("POST", "/v1/envs/comp/exec", exec_body)))
        print("exec that starts a stopped computer: %s" % ms(wake))
    finally:
        problems = d.teardown()
        shutil.rmtree(img, ignore_errors=True)
        if problems:
            print("cleanup:", problems)


if __name__ == "__main__":
    main()
