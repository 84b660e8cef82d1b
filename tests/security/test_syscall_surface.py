"""Syscall and ABI surface: the syscalls kernel exploits and escapes start with are refused
inside both kinds, as the environment's root, by the seccomp filter the environment really got
(tests/unit/test_confine.c checks the whole table of the filter itself, per kind).

syscall_probe.c is built static on the host, copied in with `paddock cp` and run inside; it
refuses to run anywhere else."""
import os
import subprocess

import pytest

KINDS = ["computer", "sandbox"]
HERE = os.path.dirname(os.path.abspath(__file__))

# name -> the answer both kinds must give. EPERM is seccomp's refusal; ENOSYS for syscalls a
# kernel may lack is fine too where listed.
REFUSED = {
    "io_uring_setup": {"EPERM"},            # io_uring: a long line of kernel exploits
    "keyctl": {"EPERM"}, "add_key": {"EPERM"},  # keyrings are not namespaced
    "bpf": {"EPERM"},                       # verifier bugs
    "perf_event_open": {"EPERM"},           # perf exploits, host activity
    "userfaultfd": {"EPERM"},               # the race-widening tool of many exploits
    "unshare_user": {"EPERM"},              # user namespaces inside: a root of their own
    "unshare_mount": {"EPERM"},
    "mount_tmpfs": {"EPERM"},
    "open_by_handle_at": {"EPERM"},         # shocker: open host files by handle
    "kexec_load": {"EPERM"}, "init_module": {"EPERM"}, "reboot": {"EPERM"},
    "personality_rie": {"EPERM"},           # READ_IMPLIES_EXEC
    "socket_vsock": {"EPERM"},              # a way to the hypervisor
    "control_socket_inet": {"ok"},          # allowed: shows the probe reports what it gets
}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("probe") / "syscall_probe")
    subprocess.run(["cc", "-static", "-O2", "-Wall", "-o", out,
                    os.path.join(HERE, "syscall_probe.c")], check=True)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_exploit_syscalls_are_refused(daemon, probe, kind):
    name = "sys-" + kind
    daemon.create(name, "--" + kind)
    daemon.cli("cp", probe, name + ":/tmp/syscall_probe")
    res = daemon.exec(name, ["/tmp/syscall_probe"])
    assert res["exit_code"] == 0, res
    got = dict(line.split(" ", 1) for line in res["stdout"].splitlines())
    assert set(got) == set(REFUSED), got
    for call, allowed in REFUSED.items():
        assert got[call] in allowed, (call, got[call])
