"""GET /metrics (Prometheus text format 0.0.4) and `paddock stats`: the scrape is valid text a
strict parser accepts, and its numbers move when environments burn CPU, hold memory, send
packets, get OOM-killed, and when the API is called."""
import json
import math
import re
import time

import pytest

from conftest import wait_for

GATEWAY = "10.77.0.1"  # default --subnet 10.77.0.0/16
HOLD_100M = 'x=$(head -c 100000000 /dev/zero | tr "\\0" a); sleep 300; echo ${#x}'  # not exec: keeps x
HOG = 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo done ${#x}'

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


# --------------------------------------------------------------------------- a strict parser


def parse_labels(text, where):
    """{name: value} of the inside of {...}; values must use only the \\\\, \\" and \\n escapes."""
    labels, i = {}, 0
    while i < len(text):
        m = re.match(r"([^=]+)=\"", text[i:])
        assert m, "%s: bad label syntax at %r" % (where, text[i:])
        name = m.group(1)
        assert LABEL.match(name) and not name.startswith("__"), "%s: label name %r" % (where, name)
        i += m.end()
        value = ""
        while True:
            assert i < len(text), "%s: unterminated label value" % where
            c = text[i]
            if c == "\\":
                esc = text[i + 1:i + 2]
                assert esc in ("\\", '"', "n"), "%s: bad escape \\%s" % (where, esc)
                value += "\n" if esc == "n" else esc
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                assert c != "\n", where
                value += c
                i += 1
        assert name not in labels, "%s: label %s twice" % (where, name)
        labels[name] = value
        if i < len(text):
            assert text[i] == ",", "%s: expected , at %r" % (where, text[i:])
            i += 1
    return labels


def parse_value(s, where):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    assert re.match(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$", s), "%s: value %r" % (where, s)
    return float(s)


def family_of(name, types):
    """The family a sample belongs to: itself, or a histogram/summary's for _bucket/_sum/_count."""
    if name in types:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and types.get(name[:-len(suffix)]) in ("histogram", "summary"):
            return name[:-len(suffix)]
    return None


def parse(text):
    """Parse Prometheus text format 0.0.4 strictly. Returns (types, helps, samples) with samples
    a list of (name, labels dict, value). Asserts on anything the format does not allow."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    types, helps, samples, seen, done_families = {}, {}, [], set(), set()
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = "line %d %r" % (n, line)
        assert line.strip(), "%s: empty line" % where
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                assert NAME.match(name), where
                if parts[1] == "TYPE":
                    assert len(parts) == 4 and parts[3] in TYPES, where
                    assert name not in types, "%s: second TYPE" % where
                    assert not any(family_of(s[0], {name: parts[3]}) == name for s in samples), \
                        "%s: TYPE after samples" % where
                    types[name] = parts[3]
                else:
                    assert len(parts) == 4 and parts[3].strip(), "%s: empty HELP" % where
                    assert name not in helps, "%s: second HELP" % where
                    helps[name] = parts[3]
            continue
        m = re.match(r"([^{ ]+)(?:\{(.*)\})? (\S+)$", line)
        assert m, "%s: not a sample" % where
        name, labels_text, value = m.groups()
        assert NAME.match(name), "%s: metric name" % where
        fam = family_of(name, types)
        assert fam, "%s: sample without a TYPE" % where
        assert fam not in done_families, "%s: family %s is not contiguous" % (where, fam)
        if current and current != fam:
            done_families.add(current)
        current = fam
        labels = parse_labels(labels_text or "", where)
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, "%s: duplicate series" % where
        seen.add(key)
        samples.append((name, labels, parse_value(value, where)))
    for name in types:
        assert name in helps, "%s has no HELP" % name
    check_histograms(types, samples)
    return types, helps, samples


def check_histograms(types, samples):
    for fam, t in types.items():
        if t != "histogram":
            continue
        groups = {}
        for name, labels, value in samples:
            if family_of(name, types) != fam:
                continue
            key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            g = groups.setdefault(key, {"buckets": [], "sum": None, "count": None})
            if name == fam + "_bucket":
                assert "le" in labels, (name, labels)
                g["buckets"].append((parse_value(labels["le"], name), value))
            elif name == fam + "_sum":
                g["sum"] = value
            elif name == fam + "_count":
                g["count"] = value
            else:
                raise AssertionError("%s: bare sample in histogram %s" % (name, fam))
        for key, g in groups.items():
            b = g["buckets"]
            assert b and b[-1][0] == math.inf, "%s%s: no +Inf bucket last" % (fam, key)
            les = [le for le, _ in b]
            assert les == sorted(les) and len(set(les)) == len(les), (fam, key, les)
            counts = [c for _, c in b]
            assert counts == sorted(counts), "%s%s: buckets not cumulative: %s" % (fam, key, counts)
            assert g["sum"] is not None and g["count"] is not None, (fam, key)
            assert g["count"] == counts[-1], (fam, key, g)


# --------------------------------------------------------------------------- helpers


def scrape(d):
    r = d.api("GET", "/metrics")
    assert r.status == 200, r
    ctype = r.headers.get("Content-Type", "")
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, r.headers
    return parse(r.body.decode())


def value(samples, name, **labels):
    """The value of the one sample of name whose labels include these; None when absent."""
    found = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def env_value(d, name, env):
    return value(scrape(d)[2], name, env=env)


def detach(d, env, script):
    r = d.api("POST", "/v1/envs/%s/exec" % env, {"cmd": ["sh", "-c", script], "detach": True})
    assert r.status == 201, r
    return r.json


ENV_FAMILIES = [
    "paddock_env_info", "paddock_env_cpu_seconds_total", "paddock_env_memory_bytes",
    "paddock_env_memory_peak_bytes", "paddock_env_memory_limit_bytes", "paddock_env_pids",
    "paddock_env_oom_kills_total", "paddock_env_disk_used_bytes",
    "paddock_env_network_receive_bytes_total", "paddock_env_network_transmit_bytes_total",
    "paddock_env_network_receive_packets_total", "paddock_env_network_transmit_packets_total",
    "paddock_env_network_denied_packets_total",
]
DAEMON_FAMILIES = [
    "paddock_envs", "paddock_helpers_running", "paddock_uptime_seconds", "paddock_build_info",
    "paddock_api_requests_total", "paddock_api_request_duration_seconds",
]


# --------------------------------------------------------------------------- tests


def test_scrape_is_valid_and_complete(daemon):
    daemon.create("sb", "--sandbox", "--memory", "256M")
    daemon.create("pc", "--computer")
    daemon.cli("stop", "pc")
    assert daemon.sh("sb", "echo hi") == "hi\n"
    assert daemon.api("GET", "/v1/nothing-here").status == 404
    types, helps, samples = scrape(daemon)
    for fam in ENV_FAMILIES + DAEMON_FAMILIES:
        assert fam in types, "family %s missing" % fam
    assert types["paddock_env_cpu_seconds_total"] == "counter"
    assert types["paddock_env_memory_bytes"] == "gauge"
    assert types["paddock_api_request_duration_seconds"] == "histogram"
    # every environment has its info; the running sandbox its usage, with a network of none
    assert value(samples, "paddock_env_info", env="sb", kind="sandbox", state="running") == 1
    assert value(samples, "paddock_env_info", env="pc", kind="computer", state="stopped") == 1
    assert value(samples, "paddock_env_memory_limit_bytes", env="sb") == 256 << 20
    assert value(samples, "paddock_env_pids", env="sb") >= 1
    assert value(samples, "paddock_env_memory_bytes", env="sb") > 0
    for fam in ("receive_bytes", "transmit_bytes", "receive_packets", "transmit_packets",
                "denied_packets"):
        assert value(samples, "paddock_env_network_%s_total" % fam, env="sb") == 0, fam
    assert value(samples, "paddock_env_oom_kills_total", env="sb") == 0
    # a stopped environment has no usage, but its disk (a computer, where the driver knows)
    assert value(samples, "paddock_env_cpu_seconds_total", env="pc") is None
    assert value(samples, "paddock_env_memory_bytes", env="pc") is None
    # daemon-wide
    assert value(samples, "paddock_envs", state="running", kind="sandbox") == 1
    assert value(samples, "paddock_envs", state="stopped", kind="computer") == 1
    assert value(samples, "paddock_envs", state="running", kind="computer") == 0
    version = daemon.api("GET", "/v1/system").json["version"]
    assert value(samples, "paddock_build_info", version=version) == 1
    assert value(samples, "paddock_uptime_seconds") > 0
    assert value(samples, "paddock_helpers_running") >= 0
    assert value(samples, "paddock_api_requests_total", method="GET", route="none",
                 code="404") >= 1


def test_request_counters_and_latency_grow(daemon):
    daemon.create("box")
    route = "/v1/envs/{name}/exec"
    s0 = scrape(daemon)[2]
    n0 = value(s0, "paddock_api_requests_total", method="POST", route=route, code="200") or 0
    c0 = value(s0, "paddock_api_request_duration_seconds_count", route=route) or 0
    for _ in range(3):
        daemon.sh("box", "true")
    assert daemon.api("POST", "/v1/envs/box/exec", {"cmd": 5}).status == 400
    s1 = scrape(daemon)[2]
    assert value(s1, "paddock_api_requests_total", method="POST", route=route, code="200") == n0 + 3
    assert value(s1, "paddock_api_requests_total", method="POST", route=route, code="400") == 1
    assert value(s1, "paddock_api_request_duration_seconds_count", route=route) == c0 + 4
    assert value(s1, "paddock_api_request_duration_seconds_sum", route=route) > 0
    # the earlier scrape itself was counted once it was over
    assert value(s1, "paddock_api_requests_total", method="GET", route="/metrics", code="200") >= 1
    # a method no route of the path has counts as "none"; a route that answers other methods
    # itself (processes) counts them on its pattern
    assert daemon.api("DELETE", "/v1/envs").status == 405
    assert daemon.api("PATCH", "/v1/envs/box/processes").status == 405
    s2 = scrape(daemon)[2]
    assert value(s2, "paddock_api_requests_total", method="DELETE", route="none",
                 code="405") == 1
    assert value(s2, "paddock_api_requests_total", method="PATCH",
                 route="/v1/envs/{name}/processes", code="405") == 1


def test_cpu_counter_grows_while_burning(daemon):
    daemon.create("burn", "--cpus", "1")
    before = env_value(daemon, "paddock_env_cpu_seconds_total", "burn")
    detach(daemon, "burn", "while :; do :; done")
    time.sleep(1.5)
    after = env_value(daemon, "paddock_env_cpu_seconds_total", "burn")
    assert after - before >= 0.5, (before, after)
    assert value(scrape(daemon)[2], "paddock_helpers_running") >= 1  # the detached process


def test_memory_shows_100_megabytes(daemon):
    daemon.create("mem", "--memory", "1G")
    p = detach(daemon, "mem", HOLD_100M)
    wait_for(lambda: (env_value(daemon, "paddock_env_memory_bytes", "mem") or 0) >= 100e6, 30,
             0.2, "memory of the environment to reach 100 MB")
    samples = scrape(daemon)[2]
    assert value(samples, "paddock_env_memory_peak_bytes", env="mem") in (0, None) or \
        value(samples, "paddock_env_memory_peak_bytes", env="mem") >= 100e6
    # paddock stats shows the same
    out = daemon.cli("stats", "--no-stream").out
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["NAME", "CPU%"], out
    row = [l for l in lines if l.startswith("mem ")]
    assert len(row) == 1, out
    usage = row[0].split()[2]  # MEM USAGE, e.g. "96.3M" or "101M"
    assert usage.endswith("M") and float(usage[:-1]) >= 90, out
    assert "1G" in row[0], out  # the limit
    j = json.loads(daemon.cli("stats", "mem", "--no-stream", "--json").out)
    assert [r["name"] for r in j] == ["mem"], j
    assert j[0]["memory"] >= 100e6 and j[0]["memory_limit"] == 1 << 30, j
    assert 5 < j[0]["memory_percent"] < 50, j
    assert j[0]["cpu_percent"] is not None and j[0]["pids"] >= 2, j
    daemon.api("POST", "/v1/envs/mem/processes/%s/signal" % p["id"], {"signal": "KILL"})


def test_oom_kill_is_counted(daemon):
    daemon.create("hog", "--memory", "64M")
    assert env_value(daemon, "paddock_env_oom_kills_total", "hog") == 0
    res = daemon.exec("hog", ["sh", "-c", HOG], timeout=60)
    assert res["exit_code"] == 137, res
    assert env_value(daemon, "paddock_env_oom_kills_total", "hog") >= 1


def test_network_counters_grow(daemon):
    daemon.create("net", "--computer")  # computers default to network "open"
    s0 = scrape(daemon)[2]
    tx0 = value(s0, "paddock_env_network_transmit_bytes_total", env="net")
    txp0 = value(s0, "paddock_env_network_transmit_packets_total", env="net")
    rx0 = value(s0, "paddock_env_network_receive_bytes_total", env="net")
    denied0 = value(s0, "paddock_env_network_denied_packets_total", env="net")
    assert None not in (tx0, txp0, rx0, denied0), s0
    # DNS through the daemon's resolver (answered), and the host itself (dropped by the policy)
    daemon.exec("net", ["sh", "-c", "nslookup example.test %s; timeout 2 wget -q -O - "
                                    "http://%s:8080/; true" % (GATEWAY, GATEWAY)], timeout=30)

    def grown():
        s = scrape(daemon)[2]
        return s if value(s, "paddock_env_network_denied_packets_total", env="net") > denied0 \
            and value(s, "paddock_env_network_transmit_bytes_total", env="net") > tx0 \
            and value(s, "paddock_env_network_receive_bytes_total", env="net") > rx0 else None
    s1 = wait_for(grown, 5, 0.3, "network counters to grow")  # cached for up to a second
    assert value(s1, "paddock_env_network_transmit_packets_total", env="net") > txp0
    # and paddock stats' NET I/O reads the same counters
    j = json.loads(daemon.cli("stats", "net", "--no-stream", "--json").out)
    assert j[0]["net_tx_bytes"] > tx0 and j[0]["net_rx_bytes"] > rx0, j


def test_stats_lists_running_environments_and_names(daemon):
    daemon.create("one")
    daemon.create("two")
    daemon.create("off", "--computer")
    daemon.cli("stop", "off")
    t0 = time.monotonic()
    out = daemon.cli("stats", "--no-stream").out
    assert time.monotonic() - t0 >= 0.9  # one sampling interval
    names = [l.split()[0] for l in out.splitlines()[1:]]
    assert names == ["one", "two"], out  # running ones, in creation order
    header = out.splitlines()[0]
    for col in ("NAME", "CPU%", "MEM USAGE / LIMIT", "MEM%", "PIDS", "NET I/O", "DISK"):
        assert col in header, header
    # named: in the order given, a stopped one with dashes
    out = daemon.cli("stats", "two", "off", "--no-stream").out
    assert [l.split()[0] for l in out.splitlines()[1:]] == ["two", "off"], out
    j = json.loads(daemon.cli("stats", "off", "--no-stream", "--json").out)
    assert j == [{"name": "off", "state": "stopped", "cpu_percent": None, "memory": None,
                  "memory_limit": j[0]["memory_limit"], "memory_percent": None, "pids": None,
                  "net_rx_bytes": None, "net_tx_bytes": None,
                  "disk_used": j[0]["disk_used"]}], j
    p = daemon.cli("stats", "nosuch", "--no-stream", check=False)
    assert p.returncode == 1 and "no such environment: nosuch" in p.err, (p.returncode, p.err)


def test_stats_streams_successive_tables(daemon):
    """Not on a terminal: one plain table per second, one after another."""
    import subprocess
    from conftest import PADDOCK
    daemon.create("s1")
    p = subprocess.Popen([PADDOCK, "--socket", daemon.sock, "stats"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        time.sleep(3.5)
    finally:
        p.kill()
        out, _ = p.communicate(10)
    out = out.decode()
    assert "\033[" not in out, repr(out)
    tables = out.count("NAME ")
    assert 2 <= tables <= 4, out
    assert out.count("\ns1 ") + out.startswith("s1 ") == tables, out


def test_stats_on_a_terminal_redraws_in_place(daemon):
    import os
    import pty
    import subprocess
    from conftest import PADDOCK
    daemon.create("t1")
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([PADDOCK, "--socket", daemon.sock, "stats", "--no-stream"],
                             stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:  # EIO: the other side is closed
                break
            if not b:
                break
            out += b
        assert p.wait(10) == 0
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    text = out.decode()
    assert text.startswith("\033[H\033[2J"), repr(text)  # home + clear: the table is redrawn
    assert "NAME" in text and "\nt1 " in text.replace("\r\n", "\n"), repr(text)
