"""The state directory is private: a local unprivileged user can neither list it nor read the
database (which holds every environment's variables), and an installation made private by
nothing (root 0711, database 0644, as older versions left it) is fixed at the next start."""
import os
import stat
import subprocess

import pytest

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
SECRET = "PADDOCK_TEST_SECRET=hunter2-%d" % os.getpid()
DB_FILES = ("paddock.db", "paddock.db-wal", "paddock.db-shm")


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def as_nobody(*cmd):
    return subprocess.run(NOBODY + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=30)


def check_private(daemon):
    root = daemon.root
    assert mode(root) == 0o700, oct(mode(root))
    for f in DB_FILES:
        # the daemon holds the database open (WAL): -wal and -shm exist while it runs
        assert os.path.exists(os.path.join(root, f)), f
        assert mode(os.path.join(root, f)) == 0o600, (f, oct(mode(os.path.join(root, f))))
    for name in os.listdir(root):
        p = os.path.join(root, name)
        if os.path.islink(p):
            continue
        m = mode(p)
        assert not m & 0o077, "%s is mode %o" % (p, m)
    # A local unprivileged user: the fixture's parent directory is 0711, so only the root's own
    # mode stands between it and the database.
    assert os.stat(daemon.tmp).st_mode & 0o001
    for cmd in (["ls", root], ["cat", os.path.join(root, "paddock.db")],
                ["cat", os.path.join(root, "paddock.db-wal")]):
        p = as_nobody(*cmd)
        assert p.returncode != 0 and b"Permission denied" in p.stderr, (cmd, p)


@pytest.mark.parametrize("driver", ["btrfs", "dir"])
def test_state_is_private(make_daemon, driver):
    daemon = make_daemon(extra_args=["--storage", driver])
    daemon.create("sv", "--computer", "--env", SECRET)
    daemon.create("sb", "--sandbox")
    check_private(daemon)
    # Environments still reach their files (they do through mounts, never through the root).
    assert daemon.sh("sv", "echo ok > /root/f && cat /root/f && echo $PADDOCK_TEST_SECRET") \
        == "ok\n" + SECRET.split("=", 1)[1] + "\n"
    assert daemon.sh("sb", "echo ok > /tmp/f && cat /tmp/f && ls /") != ""


def test_old_modes_are_fixed_at_start(daemon):
    daemon.create("sv", "--computer", "--env", SECRET)
    root = daemon.root
    daemon.stop()
    # What an older paddockd left behind.
    os.chmod(root, 0o711)
    for f in DB_FILES + ("paddockd.lock",):
        p = os.path.join(root, f)
        if not os.path.exists(p):
            with open(p, "ab"):
                pass
        os.chmod(p, 0o644)
    os.chmod(os.path.join(root, "tmp"), 0o755)
    # Before the fix, nobody could read every environment's variables.
    p = as_nobody("cat", *(os.path.join(root, f) for f in DB_FILES))
    assert p.returncode == 0 and SECRET.split("=", 1)[1].encode() in p.stdout, p
    # A symlink among the known entries is never followed (btrfs driver: envs -> pool/envs).
    envs = os.path.join(root, "envs")
    target = os.path.realpath(envs) if os.path.islink(envs) else None
    if target:
        os.chmod(target, 0o755)
    daemon.start()
    check_private(daemon)
    if target:
        assert mode(target) == 0o755
    assert daemon.sh("sv", "echo $PADDOCK_TEST_SECRET") == SECRET.split("=", 1)[1] + "\n"
