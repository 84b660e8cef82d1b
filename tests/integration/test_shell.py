"""Interactive terminal sessions: paddock shell / exec -it driven through tmux (send-keys,
capture-pane), the WebSocket endpoint GET /v1/envs/{name}/exec/ws through a raw client, and
terminal injection (TIOCSTI / TIOCLINUX) from inside sessions."""
import itertools
import os
import re
import shlex
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import PADDOCK, wait_for
from wsclient import WS, HandshakeRefused, handshake_request

_tmux_counter = itertools.count()


class Tmux:
    """One private tmux server (its own -L socket name); only it is ever killed."""

    def __init__(self, daemon, cols=100, rows=30):
        self.name = "pdk-shell-%d-%d" % (os.getpid(), next(_tmux_counter))
        self.env = dict(os.environ, PADDOCK_SOCKET=daemon.sock, PADDOCK=PADDOCK, SHELL="/bin/sh",
                        TERM="xterm-256color", PS1="host$ ", ENV="")
        self.cols, self.rows = cols, rows
        self.started = False

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.name, "-f", "/dev/null"] + list(args),
                              env=self.env, check=check, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=30)

    def start(self, command):
        self.tmux("new-session", "-d", "-s", "main", "-x", str(self.cols), "-y", str(self.rows),
                  command)
        self.started = True

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "main", *keys)

    def line(self, text):
        self.keys("-l", text)
        self.keys("Enter")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "main").stdout.decode(
            errors="replace")

    def wait_for(self, pattern, timeout=20):
        rx = re.compile(pattern)
        return wait_for(lambda: rx.search(self.screen()), timeout=timeout,
                        what="%r on the screen; it shows:\n%s" % (pattern, self.screen()))

    def kill(self):
        if self.started:
            self.tmux("kill-server", check=False)
            self.started = False


@pytest.fixture
def box(daemon):
    daemon.create("box", "--computer")
    return daemon


@pytest.fixture
def term(box):
    t = Tmux(box)
    yield t
    t.kill()


def pane_cmd(cmdline):
    """A pane that runs cmdline, then shows its exit code and stays."""
    return "sh -c %s" % shlex.quote('%s; echo "EXIT=$?"; exec sleep 3600' % cmdline)


# --------------------------------------------------------------------------- through tmux


def test_shell_keys_resize_ctrl_c_and_exit_code(term):
    term.start(pane_cmd('"$PADDOCK" shell box'))
    term.wait_for(r"# $|# \s*$")
    term.line("echo hi $((40+2))")
    term.wait_for(r"\nhi 42")
    # the terminal inside has the pane's size and the caller's TERM (tmux sets its own)
    term.line("echo size=$(stty size) term=$TERM tty=$(tty)")
    term.wait_for(r"size=30 100 term=tmux-256color tty=/dev/pts/\d+")
    term.tmux("resize-window", "-t", "main", "-x", "90", "-y", "25")
    term.line("echo size2=$(stty size)")
    term.wait_for(r"size2=25 90")
    # Ctrl-C interrupts the foreground command inside, the shell (and the session) go on.
    # The sleep is short enough to end by itself well within the wait below: had Ctrl-C not
    # reached it, "sleep-ended=0" would be on the screen (with sleep 100 it never could be)
    term.line("sleep 4; echo sleep-ended=$?")
    time.sleep(0.3)
    term.keys("C-c")
    term.line("echo still-here")
    term.wait_for(r"\nstill-here")
    assert "sleep-ended=0" not in term.screen()
    term.line("exit 7")
    term.wait_for(r"EXIT=7")


def test_ctrl_d_ends_the_shell_with_its_exit_code(term):
    term.start(pane_cmd('"$PADDOCK" shell box'))
    term.wait_for(r"# $|# \s*$")
    term.line("false")
    term.keys("C-d")
    term.wait_for(r"EXIT=1\b")


def test_exec_it_runs_a_command_in_a_terminal(term):
    # After the CLI exits, the pane's own shell prints its terminal's line discipline flags.
    mode = 'echo "MODE=$(stty -a | tr " ;" "\\n\\n" | grep -E "^-?(icanon|echo)$" | tr "\\n" " ")"'
    term.start("sh -c %s" % shlex.quote(
        '"$PADDOCK" exec -it box -- sh -c \'printf "name? "; read x; echo "got:$x tty:$(tty)"; '
        'exit 3\'; echo "EXIT=$?"; %s; exec sleep 3600' % mode))
    term.wait_for(r"name\? ")
    term.line("paddock")
    term.wait_for(r"got:paddock tty:/dev/pts/\d+")
    term.wait_for(r"EXIT=3\b")
    # the local terminal is back in cooked mode afterwards (raw mode would show -icanon -echo)
    term.wait_for(r"MODE=icanon echo\b")


def test_exec_t_alone_and_refusals_without_a_terminal(box):
    # -t alone: a terminal inside, no input taken; works without a local terminal
    p = box.cli("exec", "-t", "box", "--", "sh", "-c", "tty; echo $((1+1)); exit 4", check=False)
    assert p.returncode == 4, (p.out, p.err)
    assert re.match(r"/dev/pts/\d+\r\n2\r\n$", p.out), p.out
    # -it and shell need a terminal for their input: clear error, nothing started
    for args in (["exec", "-it", "box", "--", "sh"], ["shell", "box"]):
        p = box.cli(*args, check=False)
        assert p.returncode == 2, (args, p.out, p.err)
        assert "not a terminal" in p.err
    p = box.cli("shell", "nosuchenv", check=False)
    assert p.returncode == 2  # still refused for stdin first
    p = box.cli("exec", "-t", "nosuchenv", "--", "true", check=False)
    assert p.returncode == 1 and "no such environment" in p.err
    p = box.cli("exec", "-t", "-d", "box", "--", "true", check=False)
    assert p.returncode == 2


def test_sandbox_shell(daemon):
    daemon.create("sb")
    # no fd of the daemon reaches the command: 0-2 are the terminal, 3 is ls's own directory
    ws = WS(daemon.sock, "sb", {"cmd": ["ls", "-l", "/proc/self/fd"]})
    out, ctl, _ = ws.collect()
    assert re.findall(rb"\d\d:\d\d (\d+)\b", out) == [b"0", b"1", b"2", b"3"], out
    assert len(re.findall(rb" -> /dev/pts/\d+\r\n", out)) == 3, out
    ws = WS(daemon.sock, "sb")
    ws.send_bytes(b"echo cwd=$(pwd) id=$(id -u)\n")
    out, ctl, _ = ws.collect(until=lambda o: b"cwd=/workspace id=0" in o)
    ws.send_bytes(b"exit 9\n")
    out, ctl, code = ws.collect()
    assert ctl and ctl[-1]["exit_code"] == 9 and code == 1000


# --------------------------------------------------------------------------- the endpoint


def test_protocol_size_resize_signal_and_errors(box):
    ws = WS(box.sock, "box", {"cmd": ["sh"], "cols": 120, "rows": 40, "env": {"TERM": "vt100"}})
    ws.send_bytes(b"echo A=$(stty size) T=$TERM\n")
    out, _, _ = ws.collect(until=lambda o: b"A=40 120 T=vt100" in o)
    ws.send_json({"resize": {"cols": 77, "rows": 11}})
    ws.send_bytes(b"echo B=$(stty size)\n")
    ws.collect(until=lambda o: b"B=11 77" in o)
    # a signal goes to the terminal's foreground process group, like Ctrl-C (a sleep that
    # ends by itself before the read below gives up, so a lost signal shows as "slept=0")
    ws.send_bytes(b"sleep 3; echo slept=$?\n")
    time.sleep(0.3)
    ws.send_json({"signal": "INT"})
    # wait for what the shell prints, not for the terminal's echo of what was typed ahead
    # ("alive\r\n" was in that echo at once, so "slept=0" could never have come before it)
    ws.send_bytes(b"echo alive-$((6*7))\n")
    out, _, _ = ws.collect(until=lambda o: b"alive-42\r\n" in o)
    assert b"slept=0" not in out, out
    # bad control messages are answered with an error; the session goes on
    for bad in ({"resize": {"cols": 0, "rows": 5}}, {"signal": "NOPE"}, {"x": 1}):
        ws.send_json(bad)
    ws.send_frame(1, b"not json")
    ws.send_bytes(b"exit 5\n")
    out, ctl, code = ws.collect()
    errors = [c for c in ctl if "error" in c]
    assert len(errors) == 4 and all(e["error"]["code"] == "invalid_argument" for e in errors)
    assert ctl[-1]["exit_code"] == 5 and code == 1000


def test_early_failures_come_through_the_session(box):
    ws = WS(box.sock, "box", {"cmd": ["id"], "user": "nosuchuser"})
    out, ctl, _ = ws.collect()
    assert b"unknown user" in out and ctl[-1]["exit_code"] == 126
    ws = WS(box.sock, "box", {"cmd": ["/no/such/program"]})
    out, ctl, _ = ws.collect()
    assert b"command not found" in out and ctl[-1]["exit_code"] == 127
    ws = WS(box.sock, "box", {"cmd": ["sh", "-c", "ls -l $(tty)"], "user": "1000"})
    out, ctl, _ = ws.collect()
    assert ctl[-1]["exit_code"] == 0 and re.search(rb"crw--w---- +1 user +tty", out), out


def raw_status(daemon, path, headers=None, method="GET"):
    """Status and body of one request on a fresh connection (read by Content-Length: a refused
    handshake leaves the connection open for the next request)."""
    import socket
    req, _ = handshake_request(path)
    if headers is not None:
        req = ("%s %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n" % (
            method, path, "".join(h + "\r\n" for h in headers))).encode()
    elif method != "GET":
        req = req.replace(b"GET ", method.encode() + b" ", 1)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    try:
        s.connect(daemon.sock)
        s.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            b = s.recv(65536)
            assert b, "connection closed before a response: %r" % buf
            buf += b
        head, _, body = buf.partition(b"\r\n\r\n")
        m = re.search(rb"(?i)content-length: *(\d+)", head)
        n = int(m.group(1)) if m else 0
        while len(body) < n:
            b = s.recv(65536)
            if not b:
                break
            body += b
    finally:
        s.close()
    return int(head.split(b" ", 2)[1]), body


def test_refused_handshakes(box):
    path = "/v1/envs/box/exec/ws"
    key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="
    # not a WebSocket request at all, a wrong version, a bad key
    assert raw_status(box, path, [])[0] == 400
    assert raw_status(box, path, ["Upgrade: websocket", "Connection: Upgrade", key,
                                  "Sec-WebSocket-Version: 8"])[0] == 400
    assert raw_status(box, path, ["Upgrade: websocket", "Connection: Upgrade",
                                  "Sec-WebSocket-Key: short", "Sec-WebSocket-Version: 13"])[0] == 400
    assert raw_status(box, path, ["Upgrade: h2c", "Connection: Upgrade", key,
                                  "Sec-WebSocket-Version: 13"])[0] == 400
    assert raw_status(box, path, method="POST")[0] == 405
    # bad request specs
    for spec in ("[1]", "{", '{"cmd":[]}', '{"cols":80}', '{"cols":0,"rows":1}', '{"bogus":1}',
                 '{"cwd":"relative"}', '{"cmd":"sh"}'):
        st, body = raw_status(box, path + "?spec=" + urllib_quote(spec))
        assert st == 400, (spec, st, body)
    # unknown, stopped and paused environments
    assert raw_status(box, "/v1/envs/nope/exec/ws")[0] == 404
    box.create("stopped", "--computer")
    box.cli("stop", "stopped")
    assert raw_status(box, "/v1/envs/stopped/exec/ws")[0] == 409
    box.cli("pause", "box")
    try:
        with pytest.raises(HandshakeRefused) as ei:
            WS(box.sock, "box")
        assert ei.value.status == 409
    finally:
        box.cli("resume", "box")
    # the daemon still serves sessions afterwards
    ws = WS(box.sock, "box", {"cmd": ["true"]})
    assert ws.collect()[1][-1]["exit_code"] == 0


def urllib_quote(s):
    import urllib.parse
    return urllib.parse.quote(s)


def host_pids_with_cmdline(args):
    want = "\0".join(args) + "\0"
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d) as f:
                    if f.read() == want:
                        found.append(int(d))
            except OSError:
                pass
    return found


def exec_cgroups(daemon, env):
    """The per-exec groups of env, except one holding only a warm exec slot (the daemon's
    waiting helper for the next exec, docs/architecture.md)."""
    out = set()
    for d in daemon.cgroup_dirs(env):
        for k in os.listdir(d):
            if k.startswith("exec-") and not holds_only_a_slot(daemon, os.path.join(d, k)):
                out.add(k)
    return out


def holds_only_a_slot(daemon, group):
    try:
        with open(os.path.join(group, "cgroup.procs")) as f:
            pids = f.read().split()
        if not pids:
            return False
        for pid in pids:
            with open("/proc/%s/stat" % pid) as f:
                comm, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
                if comm != "paddockd" or int(rest.split()[1]) != daemon.pid:
                    return False
    except (OSError, ValueError, IndexError):
        return False
    return True


@pytest.mark.parametrize("how", ["drop", "half-handshake"])
def test_client_going_away_ends_the_session(box, how):
    token = str(4000 + os.getpid() % 1000)
    before = exec_cgroups(box, "box")
    marker = "/tmp/session-started-" + token  # made once both sleeps are forked
    script = ('trap "" HUP; sleep %s & sleep %s & touch %s; echo started; wait'
              % (token, token, marker))
    if how == "drop":
        ws = WS(box.sock, "box", {"cmd": ["sh", "-c", script]})
        ws.collect(until=lambda o: b"started" in o)
        wait_for(lambda: len(host_pids_with_cmdline(["sleep", token])) == 2,
                 what="both sleeps to run")
        ws.close()
    else:
        # the request goes out, the client vanishes before reading the 101
        import socket
        import json as _json
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(box.sock)
        req, _ = handshake_request("/v1/envs/box/exec/ws?spec=" +
                                   urllib_quote(_json.dumps({"cmd": ["sh", "-c", script]})))
        s.sendall(req)
        s.close()
        # The command may start before the daemon notices the client is gone: until it has,
        # "no sleeps running" would hold merely because none had started yet. (If the
        # session never starts at all, after these seconds nothing of it is left to start.)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and \
                box.exec("box", ["test", "-e", marker])["exit_code"] != 0:
            time.sleep(0.05)
    # SIGHUP is ignored here: the session's cgroup is killed after the grace period
    wait_for(lambda: not host_pids_with_cmdline(["sleep", token]), timeout=15,
             what="the session's processes to be gone")
    wait_for(lambda: exec_cgroups(box, "box") <= before, timeout=10,
             what="the session's cgroup to be removed")
    # and the daemon is fine
    assert box.sh("box", "echo ok") == "ok\n"


# --------------------------------------------------------------------------- injection

INJECTOR = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Try to type argv[1] into the terminal on stdin and on /dev/tty, with TIOCSTI (also with junk
 * in the request's high bits) and with TIOCLINUX's paste. */
int main(int argc, char **argv)
{
        const char *text = argv[1];
        int fds[2] = {0, open("/dev/tty", O_RDWR | O_NOCTTY)};
        const char *names[2] = {"stdin", "devtty"};
        for (int i = 0; i < 2; i++) {
                if (fds[i] < 0) {
                        printf("%s open: %s\n", names[i], strerror(errno));
                        continue;
                }
                int ok = 0, err = 0;
                for (const char *p = text; *p; p++) {
                        if (ioctl(fds[i], TIOCSTI, p) == 0)
                                ok++;
                        else
                                err = errno;
                        if (syscall(SYS_ioctl, fds[i], 0x100000000UL | TIOCSTI, p) == 0)
                                ok++;
                }
                printf("%s TIOCSTI injected=%d err=%s\n", names[i], ok, ok ? "-" : strerror(err));
                char sub[2] = {3, 0}; /* TIOCL_PASTESEL */
                int r = ioctl(fds[i], TIOCLINUX, sub);
                printf("%s TIOCLINUX %s\n", names[i], r == 0 ? "ok" : strerror(errno));
        }
        printf("injector done\n");
        return 0;
}
"""


@pytest.fixture
def injector(box):
    d = tempfile.mkdtemp(prefix="paddock-it-inject-", dir="/var/tmp")
    try:
        src = os.path.join(d, "inject.c")
        with open(src, "w") as f:
            f.write(INJECTOR)
        binary = os.path.join(d, "inject")
        subprocess.run(["cc", "-static", "-O1", "-o", binary, src], check=True)
        box.cli("cp", binary, "box:/inject")
        box.sh("box", "chmod 755 /inject")
    finally:
        subprocess.run(["rm", "-rf", d])
    return "/inject"


def test_no_terminal_injection_into_the_callers_terminal(box, term, injector):
    marker = "/var/tmp/paddock-it-injected-%d" % os.getpid()
    payload_cmd = "touch %s" % marker
    assert not os.path.exists(marker)
    # A host shell in the pane; from it, a shell in the environment.
    term.start("sh")
    term.wait_for(r"host\$ ")
    try:
        # 1. from a terminal session: stdin and /dev/tty are the environment's own pty
        term.line('"$PADDOCK" shell box')
        term.wait_for(r"# $|# \s*$")
        # the payload is assembled inside, so the screen shows it only if it was typed
        term.line("%s \"$(printf 'touch %%s\\n' %s)\"" % (injector, marker))
        term.wait_for(r"injector done")
        screen = term.screen()
        assert "stdin TIOCSTI injected=0 err=Operation not permitted" in screen, screen
        assert "devtty TIOCSTI injected=0 err=Operation not permitted" in screen, screen
        assert "stdin TIOCLINUX Operation not permitted" in screen, screen
        term.line("exit")
        term.wait_for(r"# exit\s*\nhost\$")
        # 2. from a plain exec (no terminal inside): nothing to type into
        term.line('"$PADDOCK" exec box -- %s "$(printf \'touch %%s\\n\' %s)"; echo plain-done'
                  % (injector, marker))
        term.wait_for(r"\nplain-done")
        screen = term.screen()
        plain = screen.rsplit("# exit", 1)[-1]
        # no controlling terminal at all: /dev/tty cannot even be opened
        assert "devtty open: " in plain and "devtty TIOCSTI" not in plain, screen
        assert "stdin TIOCSTI injected=0" in plain, screen
        # the host shell is still ours and ran nothing it was not given
        term.line("echo host-alive")
        term.wait_for(r"\nhost-alive")
        time.sleep(0.5)
        screen = term.screen()
        assert payload_cmd not in screen, screen  # what was typed shows "touch %s"
        assert not os.path.exists(marker), "an injected command ran on the host"
        # and nothing was typed into the environment's own shell either
        assert box.exec("box", ["sh", "-c", "test -e %s" % marker])["exit_code"] != 0
    finally:
        if os.path.exists(marker):
            os.unlink(marker)


@pytest.mark.parametrize("action", ["stop", "rm"])
def test_environment_going_away_ends_the_session(box, action):
    ws = WS(box.sock, "box", {"cmd": ["sh", "-c", "echo up; exec sleep 1000"]})
    ws.collect(until=lambda o: b"up" in o)
    if action == "stop":
        box.cli("stop", "box", "--timeout", "2s")
    else:
        box.cli("rm", "-f", "box")
    out, ctl, code = ws.collect()
    # the client hears how it ended (killed with the environment), then a normal close
    assert ctl and ctl[-1]["exit_code"] >= 128, ctl
    assert code == 1000


def test_cli_killed_restores_the_terminal_and_hangs_up(box, term):
    token = str(5000 + os.getpid() % 1000)
    term.start("sh")
    term.wait_for(r"host\$ ")
    term.line('"$PADDOCK" exec -it box -- sh -c "echo in; exec sleep %s"; echo "EXIT=$?"' % token)
    term.wait_for(r"\nin")
    cli = wait_for(lambda: [p for p in host_pids_with_cmdline(
        [PADDOCK, "exec", "-it", "box", "--", "sh", "-c", "echo in; exec sleep %s" % token])],
        what="the CLI process")
    os.kill(cli[0], 15)
    term.wait_for(r"EXIT=143")
    # cooked mode again: the host shell sees a line and echoes what is typed
    term.line("echo back-$((1+1))")
    term.wait_for(r"\nback-2")
    wait_for(lambda: not host_pids_with_cmdline(["sleep", token]), timeout=15,
             what="the session to be hung up")


def test_default_shell_prefers_bash_when_the_image_has_it(box):
    ws = WS(box.sock, "box")  # busybox image: no bash, so sh -l
    ws.send_bytes(b"echo zero=$0\n")
    out, _, _ = ws.collect(until=lambda o: re.search(rb"\nzero=[^$\s]+\r\n", o))
    assert re.search(rb"\nzero=-?sh\r\n", out), out
    ws.close()
    box.sh("box", "printf '#!/bin/sh\\necho fake-bash \"$@\"; exit 3\\n' > /bin/bash; "
                  "chmod 755 /bin/bash")
    out, ctl, _ = WS(box.sock, "box").collect()
    assert b"fake-bash -l" in out and ctl[-1]["exit_code"] == 3, (out, ctl)


def daemon_rss_kib(d):
    with open("/proc/%d/status" % d.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_client_that_never_reads_cannot_grow_the_daemon(box):
    """Every PING queues a PONG: a client that sends PINGs and never reads must be stopped by
    backpressure (the daemon stops reading), not buffered without bound."""
    ws = WS(box.sock, "box", {"cmd": ["sleep", "100"]}, timeout=3)
    ws.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    before = daemon_rss_kib(box)
    frame_payload = b"p" * 120
    sent = 0
    try:
        for _ in range(200000):  # 24 MB of PONGs if all were queued
            ws.send_frame(0x9, frame_payload)
            sent += 1
    except (socket.timeout, BlockingIOError):
        pass  # the daemon stopped reading: what we want
    grown = daemon_rss_kib(box) - before
    assert sent < 200000, "the daemon kept reading PINGs it could not answer"
    assert grown < 8 * 1024, "daemon RSS grew by %d KiB" % grown
    ws.s.close()
    assert box.api("GET", "/v1/system").status == 200
    wait_for(lambda: "sleep" not in box.sh("box", "ps -o comm 2>/dev/null || ps"),
             timeout=15, what="session hung up")
