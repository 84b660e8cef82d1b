"""scripts/install.sh and the systemd unit (docs/operations.md), as far as a machine without
systemd as PID 1 can check them: the unit passes `systemd-analyze verify`, the install lays out
what it says into a staging directory (--destdir), the installed paddockd starts, finds its
helpers and serves, an install over a running daemon is an upgrade that keeps environments,
and --uninstall removes exactly what the install added (the state stays unless --purge).
The live-systemd half (enable --now, restart with environments, reboot) is tests/vm/."""
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile

import pytest

import conftest
from conftest import REPO

INSTALL = os.path.join(REPO, "scripts", "install.sh")
PROGRAMS = {"usr/local/bin/paddock", "usr/local/sbin/paddockd",
            "usr/local/lib/paddock/paddock-init", "usr/local/lib/paddock/paddock-gateway"}
INSTALLED = PROGRAMS | {"etc/systemd/system/paddockd.service",
                        "usr/local/lib/paddock/installed"}


def run_install(*args, check=True):
    p = subprocess.run([INSTALL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=dict(os.environ, PADDOCK_BUILD=conftest.BUILD), timeout=60)
    p.out, p.err = p.stdout.decode(), p.stderr.decode()
    if check:
        assert p.returncode == 0, (p.out, p.err)
    return p


def files_below(d):
    found = set()
    for top, dirs, files in os.walk(d):
        for f in files:
            found.add(os.path.relpath(os.path.join(top, f), d))
    return found


@pytest.fixture
def destdir():
    d = tempfile.mkdtemp(prefix="paddock-it-install-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def unit_settings(path):
    kv = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            kv.setdefault(k, []).append(v)
    return kv


def test_install_lays_out_the_service(destdir):
    p = run_install("--destdir", destdir)
    assert files_below(destdir) == INSTALLED
    for f in PROGRAMS:
        assert os.stat(os.path.join(destdir, f)).st_mode & 0o777 == 0o755, f
    st = os.stat(os.path.join(destdir, "var/lib/paddock"))
    assert stat.S_ISDIR(st.st_mode) and st.st_mode & 0o777 == 0o700
    unit = os.path.join(destdir, "etc/systemd/system/paddockd.service")
    kv = unit_settings(unit)
    assert kv["ExecStart"] == ["/usr/local/sbin/paddockd"]
    assert kv["Delegate"] == ["yes"] and kv["KillMode"] == ["process"]
    assert kv["Type"] == ["notify"] and kv["Restart"] == ["on-failure"]
    assert "nftables.service" in kv["After"][0]
    assert kv["WantedBy"] == ["multi-user.target"]
    assert "systemctl" not in p.out  # a staged install touches no live system

    if shutil.which("systemd-analyze"):
        # an offline root: the host's own units (targets) plus ours and its program
        vroot = os.path.join(destdir, "verify")
        shutil.copytree("/lib/systemd/system", os.path.join(vroot, "usr/lib/systemd/system"),
                        symlinks=True)
        os.makedirs(os.path.join(vroot, "etc/systemd/system"))
        os.makedirs(os.path.join(vroot, "usr/local/sbin"))
        shutil.copy(unit, os.path.join(vroot, "etc/systemd/system"))
        shutil.copy(os.path.join(destdir, "usr/local/sbin/paddockd"),
                    os.path.join(vroot, "usr/local/sbin"))
        v = subprocess.run(["systemd-analyze", "verify", "--man=no", "--root=" + vroot,
                            "paddockd.service"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        assert v.returncode == 0 and v.stdout.decode().strip() == "", v.stdout.decode()
        shutil.rmtree(vroot)

    # uninstall: exactly the installed files go, the state directory stays
    p = run_install("--uninstall", "--destdir", destdir)
    assert files_below(destdir) == set()
    assert os.path.isdir(os.path.join(destdir, "var/lib/paddock"))
    assert not os.path.exists(os.path.join(destdir, "usr/local/lib/paddock"))
    assert "kept the state directory" in p.out
    # twice: nothing is installed any more
    p = run_install("--uninstall", "--destdir", destdir, check=False)
    assert p.returncode == 1 and "not installed" in p.err


def test_installed_daemon_serves_upgrades_and_purges(destdir, make_daemon, monkeypatch):
    run_install("--destdir", destdir)
    installed = os.path.join(destdir, "usr/local/sbin/paddockd")
    monkeypatch.setattr(conftest, "PADDOCKD", installed)
    d = make_daemon()
    assert os.readlink("/proc/%d/exe" % d.pid) == installed
    # paddock-init and the gateway come from PREFIX/lib/paddock, not from build/
    d.cli("create", "c1", "--computer")
    assert d.cli("exec", "c1", "--", "echo", "installed").out == "installed\n"

    # an upgrade over the running daemon: the old binary keeps running, the new one takes
    # over at the restart and re-adopts the running computer
    run_install("--destdir", destdir)
    assert os.readlink("/proc/%d/exe" % d.pid).endswith(" (deleted)")
    d.restart()
    assert os.readlink("/proc/%d/exe" % d.pid) == installed
    assert d.cli("exec", "c1", "--", "echo", "still").out == "still\n"

    # --purge is refused while the daemon lists environments
    p = run_install("--uninstall", "--purge", "--destdir", destdir, "--socket", d.sock,
                    check=False)
    assert p.returncode == 1 and "c1" in p.err and "rm -f" in p.err
    assert files_below(destdir) == INSTALLED
    d.cli("rm", "-f", "c1")
    # ... and when the daemon does not answer, unless forced
    p = run_install("--uninstall", "--purge", "--destdir", destdir,
                    "--socket", os.path.join(destdir, "nothing.sock"), check=False)
    assert p.returncode == 1 and "--force" in p.err
    p = run_install("--uninstall", "--purge", "--destdir", destdir, "--socket", d.sock)
    assert "removed the state directory" in p.out
    assert os.listdir(destdir) == [] or files_below(destdir) == set()
    assert not os.path.exists(os.path.join(destdir, "var/lib/paddock"))


def test_readiness_and_journal_lines(make_daemon, tmp_path):
    """Type=notify: READY=1 once the socket answers, STOPPING=1 at shutdown; with stderr being
    the journal's stream (JOURNAL_STREAM), lines carry a syslog level and no timestamp."""
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    ns.bind(path)
    ns.settimeout(10)
    d = make_daemon(import_image=False)
    log_st = os.stat(d.logpath)
    d.extra_env = {"NOTIFY_SOCKET": path,
                   "JOURNAL_STREAM": "%d:%d" % (log_st.st_dev, log_st.st_ino)}
    d.stop()
    mark = len(d.log())
    d.start()
    assert ns.recv(4096).split(b"\n")[0] == b"READY=1"
    d.stop()
    assert ns.recv(4096) == b"STOPPING=1"
    ns.close()
    lines = d.log()[mark:].splitlines()  # lxcfs, a child, writes its own lines there too
    assert not [l for l in lines if " paddockd[" in l], lines
    assert any(l.startswith("<6>paddockd ") and " ready" in l for l in lines), lines
    # the daemon's children do not inherit the notification socket
    d.extra_env = {}
    d.start()


def test_system_names_fallbacks(daemon):
    """`paddock system` says which fallbacks this host's kernel forces (issue 14 item 6)."""
    s = json.loads(daemon.cli("system", "--json").out)
    fb = s["fallbacks"]
    assert isinstance(fb, list) and all(isinstance(x, str) and x for x in fb), fb
    assert any("qgroups" in x for x in fb) == (s["storage"]["quota"] == "qgroups"), (fb, s)
    assert any(x.startswith("Landlock ABI") for x in fb) == (0 < s["landlock_abi"] < 5), fb
    assert any("no Landlock" in x for x in fb) == (s["landlock_abi"] <= 0), fb
    assert any("chowned" in x for x in fb) == \
        (s["storage"]["ownership"] == "shifted at create (chown)"), fb
