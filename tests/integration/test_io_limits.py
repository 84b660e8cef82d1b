"""Disk I/O limits (--disk-read-bps, --disk-write-bps, --disk-read-iops, --disk-write-iops; the
API's "io" object): measured with direct I/O inside computers, so the page cache and writeback
play no part and every read and write reaches the block device below the environment (the
btrfs pool's loop device for the test daemons)."""
import os
import re
import threading
import time

import pytest

MIB = 1 << 20
TOLERANCE = 0.15


def dd_rate(res):
    """Bytes per second of one dd: its records times the block size, over the exec's duration
    (the image's busybox dd prints no timing; an exec costs a few milliseconds)."""
    assert res["exit_code"] == 0, res
    m = re.search(r"(\d+)\+0 records out", res["stderr"])
    assert m, res
    return int(m.group(1)) * res["bs"] / (res["duration_ms"] / 1000.0)


def write(daemon, env, path, count, bs=MIB):
    res = daemon.exec(env, "dd if=/dev/zero of=%s bs=%d count=%d oflag=direct" % (path, bs, count))
    res["bs"] = bs
    return res


def read(daemon, env, path, bs=MIB):
    res = daemon.exec(env, "dd if=%s of=/dev/null bs=%d iflag=direct" % (path, bs))
    res["bs"] = bs
    return res


def assert_near(rate, want, what):
    print("%s: %.2f MiB/s" % (what, rate / MIB))
    assert abs(rate - want) <= TOLERANCE * want, "%s: %.2f MiB/s, want %.2f MiB/s +-15%%" % (
        what, rate / MIB, want / MIB)


def pool_device(daemon):
    # the loop device whose backing file is our pool file
    for name in os.listdir("/sys/block"):
        if not name.startswith("loop"):
            continue
        try:
            with open("/sys/block/%s/loop/backing_file" % name) as f:
                backing = f.read().strip()
        except OSError:
            continue
        if backing == os.path.join(os.path.realpath(daemon.root), "pool.img"):
            with open("/sys/block/%s/dev" % name) as f:
                return f.read().strip()
    raise AssertionError("no loop device for the pool")


def test_write_bps_limit(daemon):
    v = daemon.create("w", "--computer", "--image", "base", "--disk-write-bps", "10M")
    assert v["io"]["write_bps"] == 10 * MIB
    assert v["io"]["read_bps"] is None and v["io"]["write_iops"] is None
    # applied to the device that carries the computer's disk: the pool's loop device
    assert v["io"]["device"] == pool_device(daemon)
    f = daemon.cgroup_file("w", "blkio.throttle.write_bps_device") or daemon.cgroup_file("w", "io.max")
    assert f and v["io"]["device"] in open(f).read()
    assert_near(dd_rate(write(daemon, "w", "/f", 30)), 10 * MIB, "write 30M at 10M/s")


def test_read_bps_limit(daemon):
    daemon.create("r", "--computer", "--image", "base", "--disk-read-bps", "10M")
    # writes are not limited: 30M go at full speed
    assert dd_rate(write(daemon, "r", "/f", 30)) > 20 * MIB
    assert_near(dd_rate(read(daemon, "r", "/f")), 10 * MIB, "read 30M at 10M/s")


def test_write_iops_limit(daemon):
    daemon.create("i", "--computer", "--image", "base", "--disk-write-iops", "200")
    ops = dd_rate(write(daemon, "i", "/f", 600, bs=4096)) / 4096
    print("4k direct writes at 200/s: %.0f/s" % ops)
    assert abs(ops - 200) <= TOLERANCE * 200, "%.0f writes/s, want 200 +-15%%" % ops


def test_patch_running(daemon):
    daemon.create("p", "--computer", "--image", "base")
    assert daemon.inspect("p")["io"]["write_bps"] is None
    assert dd_rate(write(daemon, "p", "/f", 30)) > 20 * MIB
    r = daemon.api("PATCH", "/v1/envs/p", {"io": {"write_bps": "10M"}})
    assert r.status == 200, r
    assert r.json["io"]["write_bps"] == 10 * MIB
    assert_near(dd_rate(write(daemon, "p", "/f", 30)), 10 * MIB, "after PATCH")
    # the CLI's update: another limit; the first one stays
    daemon.cli("update", "p", "--disk-read-bps", "20M")
    v = daemon.inspect("p")
    assert (v["io"]["write_bps"], v["io"]["read_bps"]) == (10 * MIB, 20 * MIB)
    # 0 or null removes
    r = daemon.api("PATCH", "/v1/envs/p", {"io": {"write_bps": 0, "read_bps": None}})
    assert r.status == 200, r
    assert r.json["io"]["write_bps"] is None and r.json["io"]["read_bps"] is None
    assert dd_rate(write(daemon, "p", "/f", 30)) > 20 * MIB


def test_limits_survive_restarts(daemon):
    daemon.create("s", "--computer", "--image", "base", "--disk-write-bps", "10M")
    daemon.restart()
    daemon.cli("stop", "s")
    daemon.cli("start", "s")
    v = daemon.inspect("s")
    assert v["io"]["write_bps"] == 10 * MIB
    assert_near(dd_rate(write(daemon, "s", "/f", 30)), 10 * MIB, "after a daemon restart")


def test_neighbour_does_not_slow_limited_reads(daemon):
    daemon.create("a", "--computer", "--image", "base")
    daemon.create("b", "--computer", "--image", "base")
    daemon.sh("a", "dd if=/dev/zero of=/f bs=1M count=40 oflag=direct 2>/dev/null")
    r = daemon.api("PATCH", "/v1/envs/a", {"io": {"read_bps": "10M"}})
    assert r.status == 200, r
    noisy = {}

    def flat_out():
        # rewrite 100M with direct I/O for 6 s, longer than the 4 s the limited read takes
        noisy["res"] = daemon.exec("b", "n=0; end=$(($(date +%s) + 6)); "
                                        "while [ $(date +%s) -lt $end ]; do "
                                        "dd if=/dev/zero of=/big bs=1M count=100 oflag=direct "
                                        "conv=notrunc 2>/dev/null || exit 1; n=$((n + 1)); done; "
                                        "echo $n")

    t = threading.Thread(target=flat_out)
    t.start()
    try:
        time.sleep(0.5)
        rate = dd_rate(read(daemon, "a", "/f"))
    finally:
        t.join()
    res = noisy["res"]
    assert res["exit_code"] == 0, res
    writer = int(res["stdout"]) * 100 * MIB / (res["duration_ms"] / 1000.0)
    print("limited reads next to a writer: %.2f MiB/s; the writer: %.2f MiB/s" % (
        rate / MIB, writer / MIB))
    assert rate >= (1 - TOLERANCE) * 10 * MIB, "limited reads fell to %.2f MiB/s" % (rate / MIB)
    assert rate <= (1 + TOLERANCE) * 10 * MIB
    # the neighbour really wrote flat out meanwhile (much faster than 10M/s)
    assert writer > 20 * MIB, res


@pytest.mark.parametrize("io", [
    {"read_bps": "fast"}, {"write_bps": -1}, {"write_bps": "1"}, {"read_iops": "x"},
    {"write_iops": -5}, {"speed": 1}, 5, "10M", [1],
])
def test_bad_values(daemon, io):
    r = daemon.api("POST", "/v1/envs", {"name": "bad", "image": "base", "io": io})
    assert r.status == 400, r
    assert r.json["error"]["code"] == "invalid_argument"
    daemon.create("ok", "--image", "base")
    r = daemon.api("PATCH", "/v1/envs/ok", {"io": io})
    assert r.status == 400, r
    p = daemon.cli("update", "ok", "--disk-write-iops", "many", check=False)
    assert p.returncode != 0


@pytest.mark.parametrize("disk", [None, "64M"])
def test_dir_driver_device(make_daemon, disk):
    """The dir driver: a computer with --disk has its own ext4 image on a loop device, which is
    what gets limited; without one its files live on the disk holding the state directory."""
    d = make_daemon(extra_args=["--storage", "dir"])
    opts = ["--disk", disk] if disk else []
    v = d.create("d", "--computer", "--image", "base", "--disk-write-bps", "10M", *opts)
    if disk:
        img = os.path.join(os.path.realpath(d.root), "envs", "d", "disk.img")
        want = None
        for name in os.listdir("/sys/block"):
            try:
                with open("/sys/block/%s/loop/backing_file" % name) as f:
                    if f.read().strip() == img:
                        with open("/sys/block/%s/dev" % name) as g:
                            want = g.read().strip()
            except OSError:
                continue
        assert want and v["io"]["device"] == want, (v["io"], want)
    else:
        st = os.stat(d.root)
        dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
        part = "/sys/dev/block/%s/partition" % dev
        if os.path.exists(part):
            with open("/sys/dev/block/%s/../dev" % dev) as f:
                dev = f.read().strip()
        assert v["io"]["device"] == dev
    assert_near(dd_rate(write(d, "d", "/f", 30)), 10 * MIB, "dir driver, disk %s" % disk)
