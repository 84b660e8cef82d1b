"""Host-side interface names (lib/ifname.h, docs/network.md "Interface names").

An environment's veth on the host is named from its name under a random key in the state
directory, so a client cannot choose a name whose link is another environment's; and the daemon
refuses a create or fork whose link name is already taken. A state directory from before the
key keeps the old unkeyed names while that daemon's links are up (a running computer must find
its link again after the upgrade), which is how these tests get a collision they can compute.
"""
import itertools
import os
import re
import sqlite3
import stat
import subprocess

from conftest import wait_for


def sh(*cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p.stdout.decode()


def key_path(d):
    return os.path.join(d.root, "network.key")


def unkeyed_name(d, name):
    """The name an earlier daemon gave: FNV-1a of the name seeded with FNV-1a of the root."""
    h = 2166136261
    for b in os.path.realpath(d.root).encode() + name.encode():
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return "pdk%08x" % h


def unkeyed_collision(d):
    """Two environment names with one unkeyed interface name (a birthday search: about 80,000
    names, well under a second)."""
    h0 = 2166136261
    for b in os.path.realpath(d.root).encode():
        h0 = ((h0 ^ b) * 16777619) & 0xFFFFFFFF
    seen = {}
    for i in itertools.count():
        name = "c%x" % i
        h = h0
        for b in name.encode():
            h = ((h ^ b) * 16777619) & 0xFFFFFFFF
        if h in seen:
            return seen[h], name
        seen[h] = name


def veth_of(d, name):
    """The host-side veth of a running networked environment: the one its /32 route uses."""
    ip = d.inspect(name)["network"]["ip"]
    m = re.search(r"\bdev (\S+)", sh("ip", "-n", d.netns, "-o", "route", "show", ip))
    assert m, ip
    return m.group(1)


def ifindex(d, link):
    return int(sh("ip", "-n", d.netns, "-o", "link", "show", "dev", link).split(":")[0])


def pdk_links(d):
    out = sh("ip", "-n", d.netns, "-o", "link", "show")
    names = [l.split(":")[1].strip().split("@")[0] for l in out.splitlines()]
    return [n for n in names if n.startswith("pdk")]


def assert_paired(d, name):
    """The environment's eth0 is the other end of its host-side veth."""
    veth = veth_of(d, name)
    peer = d.exec(name, ["cat", "/sys/class/net/eth0/iflink"])
    assert peer["exit_code"] == 0 and int(peer["stdout"]) == ifindex(d, veth), (peer, veth)
    return veth


def test_names_are_keyed_and_kept_across_restarts(make_daemon):
    d = make_daemon()
    st = os.lstat(key_path(d))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, st
    assert st.st_size == 32 and st.st_uid == 0, st
    assert d.api("POST", "/v1/envs", {"name": "web", "kind": "computer"}).status == 201
    veth = assert_paired(d, "web")
    assert re.fullmatch(r"pdk[0-9a-f]{11}", veth), veth
    assert veth != unkeyed_name(d, "web")
    index = ifindex(d, veth)
    with open(key_path(d), "rb") as f:
        key = f.read()
    d.restart()
    with open(key_path(d), "rb") as f:
        assert f.read() == key  # never replaced
    # the same name: the running computer's link is found and kept, not made again
    assert veth_of(d, "web") == veth and ifindex(d, veth) == index
    assert_paired(d, "web")


def test_a_name_whose_link_name_is_taken_is_refused(make_daemon):
    d = make_daemon()
    d.stop()
    os.unlink(key_path(d))
    # an earlier daemon's veth, as its running computer would have left it up
    sh("ip", "-n", d.netns, "link", "add", "pdk0000beef", "type", "veth", "peer", "name",
       "pdkt-peer")
    d.start()
    assert not os.path.exists(key_path(d))
    assert "interface names stay unkeyed" in d.log()
    a, b = unkeyed_collision(d)
    assert unkeyed_name(d, a) == unkeyed_name(d, b)
    assert d.api("POST", "/v1/envs", {"name": a, "kind": "computer"}).status == 201
    veth = assert_paired(d, a)
    assert veth == unkeyed_name(d, a)

    # b would take a's link: refused, whatever its kind or network, created or forked
    for body in ({"name": b, "kind": "computer"},
                 {"name": b, "kind": "sandbox", "network": {"mode": "none"}}):
        r = d.api("POST", "/v1/envs", body)
        assert r.status == 409, r
        code, msg = r.error()
        assert code == "conflict" and "cannot be used on this host" in msg, msg
        assert a not in msg  # the other environment may be another token's
    r = d.api("POST", "/v1/envs/%s/fork" % a, {"name": b})
    assert r.status == 409 and "cannot be used on this host" in r.error()[1], r
    assert b not in [e["name"] for e in d.api("GET", "/v1/envs").json["envs"]]
    assert veth_of(d, a) == veth
    assert_paired(d, a)

    # a restart while a's link is up keeps the unkeyed names
    d.restart()
    assert not os.path.exists(key_path(d))
    assert assert_paired(d, a) == veth
    assert d.api("POST", "/v1/envs", {"name": b, "kind": "computer"}).status == 409

    # a pair an older daemon let be made (here: another computer renamed in the state while
    # the daemon is down): the second may not start networked while the first runs
    assert d.api("POST", "/v1/envs", {"name": "other", "kind": "computer"}).status == 201
    d.cli("stop", "other")
    d.stop()
    db = sqlite3.connect(os.path.join(d.root, "paddock.db"))
    with db:
        db.execute("UPDATE envs SET name = ? WHERE name = 'other'", (b,))
    db.close()
    os.rename(d.env_dir("other"), d.env_dir(b))
    d.start()
    # (in the order the state lists them)
    assert ("%s and %s have one interface name" % (a, b) in d.log()
            or "%s and %s have one interface name" % (b, a) in d.log()), d.log()
    r = d.api("POST", "/v1/envs/%s/start" % b)
    assert r.status == 409 and "cannot start with its network" in r.error()[1], r
    assert d.inspect(b)["state"] == "stopped"
    assert assert_paired(d, a) == veth
    r = d.api("DELETE", "/v1/envs/" + b)
    assert r.status in (200, 204), r

    # once none is up, a start makes the key, and a's next run gets a keyed name
    d.cli("stop", a)
    wait_for(lambda: pdk_links(d) == [], 10, what="a's link to go with its namespace")
    d.restart()
    assert os.path.exists(key_path(d))
    d.cli("start", a)
    keyed = assert_paired(d, a)
    assert re.fullmatch(r"pdk[0-9a-f]{11}", keyed), keyed
    assert d.api("POST", "/v1/envs", {"name": b, "kind": "computer"}).status == 201
    assert veth_of(d, b) != keyed
    assert_paired(d, b)
