"""paddockd raises its own RLIMIT_NOFILE soft limit to the hard one at start (a daemon started by
hand under the usual 1,024 cannot hold thousands of environments, each with a pidfd), says so
in GET /v1/system ("open_files") and its log, and names a hard limit too low for MAX_ENVS as a
fallback."""
import resource
import subprocess

MAX_ENVS = 4096  # src/daemon/engine.h
WANTED = MAX_ENVS + 1024  # NOFILE_WANTED, src/daemon/engine_json.c


def proc_nofile(pid):
    """(soft, hard) of pid's "Max open files" in /proc/PID/limits."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no Max open files in /proc/%d/limits" % pid)


def test_soft_limit_raised_to_hard(make_daemon):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(1024, hard)
    # The daemon inherits the test's limits: start it under a low soft limit, as from a shell.
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        d = make_daemon()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert proc_nofile(d.pid) == (hard, hard)
    s = d.api("GET", "/v1/system").json
    assert s["open_files"] == {"limit": hard, "hard": hard, "at_start": low}, s
    if low < hard:
        assert "soft limit raised from %d to the hard limit %d" % (low, hard) in d.log()
    assert any(x.startswith("open files limited") for x in s["fallbacks"]) == (hard < WANTED), s
    # the environments' processes start with the limit the daemon was started with, not its own
    d.create("nf")
    assert d.sh("nf", "ulimit -n") == "%d\n" % low
    assert d.sh("nf", "ulimit -n") == "%d\n" % low  # through the warm slot too
    pid1 = d.sh("nf", "grep 'Max open files' /proc/1/limits").split()
    assert pid1[3:5] == [str(low), str(hard)], pid1


def test_low_hard_limit_is_a_fallback(daemon):
    # Lower the running daemon's limits from outside (prlimit(2) on its pid): what a host with
    # a hard limit of 2,000 would give it.
    subprocess.run(["prlimit", "--pid", str(daemon.pid), "--nofile=2000:2000"], check=True)
    s = daemon.api("GET", "/v1/system").json
    assert s["open_files"]["limit"] == 2000 and s["open_files"]["hard"] == 2000, s
    fb = [x for x in s["fallbacks"] if x.startswith("open files limited")]
    assert fb == ["open files limited to 2000 (hard limit): fewer than %d environments may run "
                  "at once; raise LimitNOFILE or the hard ulimit -n" % MAX_ENVS], s
