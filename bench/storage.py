#!/usr/bin/python3
"""Storage benchmark: create from a ~300 MB image, snapshot, fork (medians), and the host disk
one fork costs. Run as root:  bench/storage.py  (BENCH_RUNS=N, default 20; PADDOCK_BUILD).

It starts a private paddockd (its own root under /var/tmp, --no-network, default btrfs driver
with a pool file), synthesizes an image of random files (busybox plus ~300 MB), imports it,
measures through the HTTP API (the time of each request, environment start included), prints a
Markdown table and removes everything it made (environments, daemon, pool mount, directories).
It measures and reports; it never asserts."""
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.environ.get("PADDOCK_BUILD", os.path.join(REPO, "build"))
RUNS = int(os.environ.get("BENCH_RUNS", "20"))
IMAGE_MB = int(os.environ.get("BENCH_IMAGE_MB", "300"))


class Conn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def api(sock, method, path, body=None):
    c = Conn(sock)
    try:
        data = json.dumps(body).encode() if body is not None else None
        t0 = time.perf_counter()
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.read()
        dt = time.perf_counter() - t0
        if r.status >= 300:
            raise RuntimeError("%s %s: %s %s" % (method, path, r.status, out[:300]))
        return dt, json.loads(out) if out else None
    finally:
        c.close()


def pool_used(pool):
    subprocess.run(["sync", "-f", pool])
    st = os.statvfs(pool)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def make_image(dst):
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), dst], check=True,
                   stdout=subprocess.DEVNULL)
    data = os.path.join(dst, "opt", "data")
    os.makedirs(data)
    # ~300 MB: 250 files of 1 MiB and 12800 small files of 4 KiB (a package-like mix)
    big = IMAGE_MB * 5 // 6
    for i in range(big):
        with open(os.path.join(data, "blob%04d" % i), "wb") as f:
            f.write(os.urandom(1 << 20))
    small_dir = os.path.join(data, "small")
    os.makedirs(small_dir)
    for i in range((IMAGE_MB - big) * 256):
        with open(os.path.join(small_dir, "f%05d" % i), "wb") as f:
            f.write(os.urandom(4096))


def median_ms(xs):
    return statistics.median(xs) * 1000


def main():
    if os.geteuid() != 0:
        sys.exit("bench/storage.py: run as root")
    tmp = tempfile.mkdtemp(prefix="paddock-bench-storage-", dir="/var/tmp")
    root, sock = os.path.join(tmp, "root"), os.path.join(tmp, "s")
    log = open(os.path.join(tmp, "log"), "wb")
    proc = None
    names = []
    try:
        print("== synthesizing a %d MB image" % IMAGE_MB, file=sys.stderr)
        img = os.path.join(tmp, "img")
        make_image(img)
        proc = subprocess.Popen([os.path.join(BUILD, "paddockd"), "--root", root, "--socket", sock,
                                 "--uid-registry", os.path.join(tmp, "uids"), "--no-network"],
                                stdout=log, stderr=log)
        for _ in range(200):
            try:
                api(sock, "GET", "/v1/system")
                break
            except OSError:
                time.sleep(0.05)
        cli = [os.path.join(BUILD, "paddock"), "--socket", sock]
        small = os.path.join(tmp, "small")
        subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), small], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(cli + ["image", "import", "small", small], check=True, stdout=subprocess.DEVNULL)
        print("== importing it", file=sys.stderr)
        subprocess.run(cli + ["image", "import", "big", img], check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(img)
        system = api(sock, "GET", "/v1/system")[1]
        pool = system["storage"]["pool"]
        rows = []

        # Every environment is removed right after its timed request (untimed), and the rows
        # take turns, so load from elsewhere on a shared machine skews them alike.
        combos = [(i, k) for i in ("small", "big") for k in ("computer", "sandbox")]
        times = {c: [] for c in combos}
        for run in range(RUNS):
            for image, kind in combos:
                n = "c-%s-%s-%d" % (image, kind, run)
                times[(image, kind)].append(
                    api(sock, "POST", "/v1/envs", {"name": n, "kind": kind, "image": image})[0])
                api(sock, "DELETE", "/v1/envs/%s?force=1" % n)
        for image, kind in combos:
            label = "~%d MB" % IMAGE_MB if image == "big" else "busybox"
            rows.append(("create %s from the %s image (started, API answer)" % (kind, label),
                         "%.1f ms" % median_ms(times[(image, kind)])))

        api(sock, "POST", "/v1/envs", {"name": "src", "kind": "computer", "image": "big"})
        names.append("src")
        snap_t = [api(sock, "POST", "/v1/envs/src/snapshots", {"name": "s%d" % i})[0] for i in range(RUNS)]
        rows.append(("snapshot of a running computer (~%d MB disk; frozen, snapshotted, thawed)" % IMAGE_MB,
                     "%.1f ms" % median_ms(snap_t)))
        before = pool_used(pool)
        for i in range(RUNS):  # kept: what they cost on disk is measured after
            n = "keep%d" % i
            api(sock, "POST", "/v1/envs/src/fork", {"name": n})
            names.append(n)
        after = pool_used(pool)
        fork_t = []
        for i in range(RUNS):
            n = "fork%d" % i
            fork_t.append(api(sock, "POST", "/v1/envs/src/fork", {"name": n})[0])
            api(sock, "DELETE", "/v1/envs/%s?force=1" % n)
        rows.append(("fork of a running computer (new computer started)", "%.1f ms" % median_ms(fork_t)))
        api(sock, "POST", "/v1/envs/src/stop")
        fork_s = []
        for i in range(RUNS):
            n = "sfork%d" % i
            fork_s.append(api(sock, "POST", "/v1/envs/src/fork", {"name": n, "snapshot": "s0"})[0])
            api(sock, "DELETE", "/v1/envs/%s?force=1" % n)
        rows.append(("fork from a snapshot (new computer started)", "%.1f ms" % median_ms(fork_s)))
        per_fork = (after - before) / RUNS
        rows.append(("host disk per fork (pool usage after sync / forks)", "%.0f KiB" % (per_fork / 1024)))
        rows.append(("image size on disk", "%.0f MB" % (before / 1e6)))

        print("| storage (btrfs driver, %s, medians of %d) | |" % (system["storage"]["quota"], RUNS))
        print("|---|---|")
        for r in rows:
            print("| %s | %s |" % r)
    finally:
        for n in names:
            try:
                api(sock, "DELETE", "/v1/envs/%s?force=1" % n)
            except Exception:
                pass
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        pool = os.path.join(root, "pool")
        if os.path.ismount(pool):
            subprocess.run(["umount", pool])
        subprocess.run(["rm", "-rf", "--one-file-system", tmp])


if __name__ == "__main__":
    main()
