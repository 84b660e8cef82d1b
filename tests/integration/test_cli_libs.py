"""What the CLI loads, and when: every start maps libjansson and libc only, and libwslay and
libnettle come with the first WebSocket (`exec -t`, src/cli/lazylib.c), as GnuTLS comes with the
first TLS connection (test_remote_cli.py). Read from the binary (readelf -d) and from the dynamic
loader's own account of a run (LD_DEBUG=files); no timings here, bench/cli.py measures them.
And the daemon: libcurl is not linked (src/lib/curl_lazy.c), so a daemon that creates and execs
does not map it; a pull loads it in its helper (test_images.py pulls)."""
import os
import re
import subprocess

from conftest import PADDOCK, PADDOCKD

LAZY = ("libwslay", "libnettle", "libgnutls")
# What the local commands never need at all (the library's, through libpaddock.a).
NEVER = ("libcurl", "libsqlite3", "libarchive", "libnftables", "libseccomp", "libcap", "libmnl")
LOADED = re.compile(r"\bfile=(\S+) \[\d+\];  (?:needed by|dynamically loaded by)")


def loaded_by(argv, **kw):
    """Run argv with the loader's file log on stderr: (process, set of the files it loaded)."""
    env = dict(os.environ, LD_DEBUG="files")
    env.pop("PADDOCK_SOCKET", None)
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=60, **kw)
    return p, set(LOADED.findall(p.stderr.decode(errors="replace")))


def names(files, prefixes):
    return sorted(f for f in files if os.path.basename(f).startswith(prefixes))


def test_the_cli_names_only_what_every_command_needs():
    out = subprocess.run(["readelf", "-d", PADDOCK], stdout=subprocess.PIPE, check=True,
                         text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", out)
    assert any(n.startswith("libc.so") for n in needed), needed
    assert not names(needed, LAZY + NEVER), needed


def test_start_loads_no_lazy_library():
    p, files = loaded_by([PADDOCK, "--version"])
    assert p.returncode == 0, p.stderr
    assert any("libjansson" in f for f in files), files  # the log is being read right
    assert not names(files, LAZY + NEVER), files


def test_plain_exec_loads_none_and_a_websocket_loads_wslay_and_nettle(daemon):
    daemon.create("box", "--sandbox")
    p, files = loaded_by([PADDOCK, "--socket", daemon.sock, "exec", "box", "--", "echo", "hi"])
    assert p.returncode == 0 and p.stdout == b"hi\n", p.stderr
    assert not names(files, LAZY + NEVER), files
    # exec -t goes over the WebSocket endpoint: the handshake's SHA-1 and the framing
    p, files = loaded_by([PADDOCK, "--socket", daemon.sock, "exec", "-t", "box", "--", "sh", "-c",
                          "echo hi; exit 3"])
    assert p.returncode == 3 and p.stdout == b"hi\r\n", p.stderr
    assert [os.path.basename(f).split(".so")[0] for f in names(files, LAZY + NEVER)] == \
        ["libnettle", "libwslay"], files


def test_the_daemon_does_not_map_libcurl(daemon):
    out = subprocess.run(["readelf", "-d", PADDOCKD], stdout=subprocess.PIPE, check=True,
                         text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]", out)
    assert any(n.startswith("libsqlite3") for n in needed), needed  # read right
    assert not names(needed, ("libcurl",)), needed
    daemon.create("box", "--sandbox")
    assert daemon.sh("box", "echo hi") == "hi\n"
    with open("/proc/%d/maps" % daemon.proc.pid) as f:
        maps = f.read()
    assert "libsqlite3" in maps and "libcurl" not in maps
