#!/usr/bin/python3
"""Helpers for bench/run.sh: raw-HTTP measurements against paddockd, a subprocess timer,
and the report. Measures and prints; never asserts.

Subcommands (all write JSON results to --out, or to WORK/<row>.json for suite):
  suite        all time rows, interleaved in blocks (the default mode of run.sh), with
               (e) the cycle with networking and (f) the files API against its peers
  http-cycle   (a) create -> first exec `true` -> destroy, per cycle; create part alone;
               --network open: (e)
  http-exec    (c) exec `true` into a running sandbox, buffered mode
  memory       (d) memory per idle sandbox with --count idle sandboxes; daemon RSS growth
  cmd-time     time a command with a subprocess.run loop (used when hyperfine is missing)
  from-hyperfine  convert hyperfine --export-json output into this format
  report       print the Markdown table and write it to --md
  destroy-all  delete every environment whose name starts with a prefix (cleanup)
"""
import argparse
import datetime
import http.client
import json
import math
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse


# ---------------------------------------------------------------- HTTP on a unix socket


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over AF_UNIX. Keeps the connection open between requests (HTTP/1.1
    keep-alive) unless the server closes it; counts how often it had to (re)connect."""

    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path
        self.connects = 0

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s
        self.connects += 1


class Client:
    def __init__(self, sock, keepalive=True):
        self.sock = sock
        self.keepalive = keepalive
        self.conn = UnixHTTPConnection(sock)
        self.connects = 0

    def _send(self, method, path, data, headers):
        if not self.keepalive:
            headers["Connection"] = "close"
        try:
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException):
            # One retry on a fresh connection (server closed an idle keep-alive connection).
            self.conn.close()
            self.connects += self.conn.connects
            self.conn = UnixHTTPConnection(self.sock)
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
            raw = resp.read()
        if not self.keepalive:
            self.conn.close()
        return resp.status, raw

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        status, raw = self._send(method, path, data, headers)
        return status, parse_json(raw)

    def raw(self, method, path, data=None):
        """A request whose body (if any) is raw bytes, as the files API takes them; returns
        (status, the response body as bytes)."""
        headers = {"Content-Type": "application/octet-stream"} if data is not None else {}
        return self._send(method, path, data, headers)

    def total_connects(self):
        return self.connects + self.conn.connects

    def close(self):
        self.conn.close()


class RawResponse:
    def __init__(self, status, headers, buf, segments):
        self.status = status
        self.headers = headers
        self._buf = buf
        self._segments = segments  # (offset, length) of the body's pieces in buf

    @property
    def body(self):
        """The body as bytes (assembled on first use, after the caller stopped its clock)."""
        if self._buf is not None:
            mv = memoryview(self._buf)
            self._body = b"".join(mv[o:o + n] for o, n in self._segments)
            mv.release()
            self._buf = self._segments = None
        return self._body


class RawConn:
    """A lean HTTP/1.1 keep-alive client on the unix socket, for the (f) rows' large bodies:
    the request body goes out with one sendall, the answer comes in with recv_into into one
    preallocated buffer while the chunked framing is walked as it arrives, and the body is
    assembled only after the caller has stopped its clock. (http.client spends tens of
    microseconds per chunk; paddockd streams reads in chunks of up to 64 KiB, so on this
    machine a 100 MB GET took 0.8 s through http.client and 0.15 s through curl.)"""

    def __init__(self, path, timeout=300):
        self.path = path
        self.timeout = timeout
        self.s = None
        self.connects = 0

    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.s = s
        self.connects += 1

    def close(self):
        if self.s is not None:
            self.s.close()
            self.s = None

    def request(self, method, path, data=None, expect=0):
        """expect: roughly how many body bytes will come back (sizes the buffer)."""
        head = "%s %s HTTP/1.1\r\nHost: localhost\r\n" % (method, path)
        if data is not None:
            head += ("Content-Type: application/octet-stream\r\nContent-Length: %d\r\n"
                     % len(data))
        head = (head + "\r\n").encode()
        for attempt in (0, 1):
            try:
                if self.s is None:
                    self._connect()
                self.s.sendall(head)
                if data:
                    self.s.sendall(data)
                return self._response(expect)
            except (OSError, ValueError):
                # One retry on a fresh connection (server closed an idle keep-alive connection).
                self.close()
                if attempt:
                    raise

    def _response(self, expect):
        buf = bytearray(expect + (1 << 20))
        n = 0

        def more():
            nonlocal buf, n
            if n == len(buf):
                buf.extend(bytes(max(len(buf), 1 << 20)))
            k = self.s.recv_into(memoryview(buf)[n:])
            if k == 0:
                raise ConnectionError("connection closed in the middle of an answer")
            n += k

        while True:
            end = buf.find(b"\r\n\r\n", 0, n)
            if end >= 0:
                break
            more()
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        pos = end + 4
        segments = []
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                eol = buf.find(b"\r\n", pos, n)
                while eol < 0:
                    more()
                    eol = buf.find(b"\r\n", pos, n)
                size = int(bytes(buf[pos:eol]).split(b";")[0], 16)
                if size == 0:
                    # No trailers are sent: the empty line that ends the answer.
                    while n < eol + 4:
                        more()
                    break
                segments.append((eol + 2, size))
                pos = eol + 2 + size + 2
                while n < pos:
                    more()
        elif "content-length" in headers:
            cl = int(headers["content-length"])
            while n < pos + cl:
                more()
            segments.append((pos, cl))
        else:
            raise ValueError("answer without a length")
        if headers.get("connection", "").lower() == "close":
            self.close()
        return RawResponse(status, headers, buf, segments)


def parse_json(raw):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return {"raw": raw[:200].decode("latin-1")}


def err_text(status, obj):
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        return "%s %s: %s" % (status, obj["error"].get("code"), obj["error"].get("message"))
    return "%s %s" % (status, json.dumps(obj)[:200])


# ---------------------------------------------------------------- statistics


def pct(sorted_vals, q):
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_vals:
        return None
    k = max(1, math.ceil(q / 100.0 * len(sorted_vals)))
    return sorted_vals[k - 1]


def summarize(samples_s):
    v = sorted(samples_s)
    if not v:
        return {"n": 0}
    return {"n": len(v), "median": statistics.median(v), "p90": pct(v, 90), "min": v[0],
            "max": v[-1], "mean": statistics.fmean(v)}


def write_result(path, kind, samples=None, **extra):
    out = {"kind": kind}
    if samples is not None:
        out["samples"] = samples
        out.update(summarize(samples))
    out.update(extra)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


# ---------------------------------------------------------------- (a) create -> exec -> destroy


def cmd_http_cycle(a):
    cl = Client(a.socket, keepalive=not a.new_connection)
    total, create, execp, destroy, errors = [], [], [], [], []
    ips = no_ips = 0
    for i in range(a.warmup + a.runs):
        name = "%s%d" % (a.prefix, i)
        t0 = time.perf_counter()
        body = {"name": name, "kind": "sandbox"}
        if a.network:
            body["network"] = {"mode": a.network}
        st, obj = cl.request("POST", "/v1/envs", body)
        t1 = t2 = time.perf_counter()
        ok = st == 201
        if not ok:
            errors.append("create: " + err_text(st, obj))
        else:
            if a.network:
                if ((obj or {}).get("network") or {}).get("ip"):
                    ips += 1
                else:
                    no_ips += 1
            if isinstance(obj, dict) and obj.get("state") != "running":
                errors.append("create returned state %r" % obj.get("state"))
            st, obj = cl.request("POST", "/v1/envs/%s/exec" % name, {"cmd": ["true"]})
            if st != 200 or not isinstance(obj, dict) or obj.get("exit_code") != 0:
                ok = False
                errors.append("exec: " + err_text(st, obj))
            t2 = time.perf_counter()
        st, obj = cl.request("DELETE", "/v1/envs/%s?force=1" % name)
        t3 = time.perf_counter()
        if st != 200 and st != 404:
            ok = False
            errors.append("delete: " + err_text(st, obj))
        if ok and i >= a.warmup:
            total.append(t3 - t0)
            create.append(t1 - t0)
            execp.append(t2 - t1)
            destroy.append(t3 - t2)
    cl.close()
    write_result(a.out, "http-cycle", total, create=summarize(create), create_samples=create,
                 exec=summarize(execp), destroy=summarize(destroy), exec_samples=execp,
                 destroy_samples=destroy,
                 create_body_extra={"network": {"mode": a.network}} if a.network else {},
                 with_ip=ips, without_ip=no_ips,
                 errors=errors[:20], error_count=len(errors), connects=cl.total_connects(),
                 requests=3 * (a.warmup + a.runs), keepalive=not a.new_connection)


# ---------------------------------------------------------------- (c) exec over raw HTTP


def cmd_http_exec(a):
    cl = Client(a.socket, keepalive=not a.new_connection)
    samples, errors, server_ms = [], [], []
    for i in range(a.warmup + a.runs):
        t0 = time.perf_counter()
        st, obj = cl.request("POST", "/v1/envs/%s/exec" % a.env, {"cmd": ["true"]})
        t1 = time.perf_counter()
        if st != 200 or not isinstance(obj, dict) or obj.get("exit_code") != 0:
            errors.append(err_text(st, obj))
            continue
        if a.gap:
            time.sleep(a.gap)
        if i >= a.warmup:
            samples.append(t1 - t0)
            if isinstance(obj.get("duration_ms"), (int, float)):
                server_ms.append(obj["duration_ms"])
    cl.close()
    write_result(a.out, "http-exec", samples, errors=errors[:20], error_count=len(errors),
                 connects=cl.total_connects(), requests=a.warmup + a.runs,
                 keepalive=not a.new_connection, gap_s=a.gap,
                 server_duration_ms_median=statistics.median(server_ms) if server_ms else None)


# ---------------------------------------------------------------- (d) memory per idle env


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def memcg_usage(pid):
    """Memory usage of the memory cgroup of pid, read from the cgroup files directly."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return None, None
    v1 = v2 = None
    for line in lines:
        hid, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            v1 = path
        elif hid == "0":
            v2 = path
    candidates = []
    if v1 is not None:
        candidates.append(("/sys/fs/cgroup/memory" + v1 + "/memory.usage_in_bytes", "v1"))
    if v2 is not None:
        for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            candidates.append((base + v2 + "/memory.current", "v2"))
    for p, mode in candidates:
        try:
            with open(p) as f:
                return int(f.read().strip()), p
        except (OSError, ValueError):
            continue
    return None, None


def cmd_memory(a):
    cl = Client(a.socket, keepalive=False)
    errors = []
    rss0 = rss_kib(a.daemon_pid)
    names = []
    t0 = time.perf_counter()
    for i in range(a.count):
        name = "%s%d" % (a.prefix, i)
        st, obj = cl.request("POST", "/v1/envs", {"name": name, "kind": "sandbox"})
        if st == 201:
            names.append(name)
        else:
            errors.append("create %s: %s" % (name, err_text(st, obj)))
    create_s = time.perf_counter() - t0
    time.sleep(a.settle)
    rss1 = rss_kib(a.daemon_pid)
    api_sum, api_n, cg_sum, cg_n, cg_files = 0, 0, 0, 0, []
    for name in names:
        st, obj = cl.request("GET", "/v1/envs/%s" % name)
        if st != 200 or not isinstance(obj, dict):
            errors.append("inspect %s: %s" % (name, err_text(st, obj)))
            continue
        mem = (obj.get("usage") or {}).get("memory")
        if isinstance(mem, int):
            api_sum += mem
            api_n += 1
        pid = obj.get("pid")
        if isinstance(pid, int) and pid > 0:
            val, path = memcg_usage(pid)
            if val is not None:
                cg_sum += val
                cg_n += 1
                if len(cg_files) < 2:
                    cg_files.append(path)
    t1 = time.perf_counter()
    for name in names:
        st, obj = cl.request("DELETE", "/v1/envs/%s?force=1" % name)
        if st != 200:
            errors.append("delete %s: %s" % (name, err_text(st, obj)))
    destroy_s = time.perf_counter() - t1
    rss2 = rss_kib(a.daemon_pid)
    cl.close()
    # Per environment: divided by the number asked for (100), as the brief defines it, when
    # all of them exist; otherwise by the number that was measured.
    out = {
        "kind": "memory", "count": a.count, "created": len(names),
        "api_sum_bytes": api_sum, "api_n": api_n,
        "api_per_env_bytes": api_sum / api_n if api_n else None,
        "memcg_sum_bytes": cg_sum, "memcg_n": cg_n,
        "memcg_per_env_bytes": cg_sum / cg_n if cg_n else None, "memcg_files": cg_files,
        "daemon_rss_kib_before": rss0, "daemon_rss_kib_with_envs": rss1,
        "daemon_rss_kib_after_destroy": rss2,
        "daemon_rss_growth_per_env_bytes": ((rss1 - rss0) * 1024 / len(names))
        if (rss0 and rss1 and names) else None,
        "create_all_s": create_s, "destroy_all_s": destroy_s,
        "errors": errors[:20], "error_count": len(errors),
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


# ---------------------------------------------------------------- cleanup


def cmd_destroy_all(a):
    cl = Client(a.socket, keepalive=False)
    try:
        st, obj = cl.request("GET", "/v1/envs")
    except OSError as e:
        print("destroy-all: daemon not reachable: %s" % e, file=sys.stderr)
        return
    envs = obj.get("envs", []) if isinstance(obj, dict) else []
    n = 0
    for e in envs:
        name = e.get("name", "")
        if any(name.startswith(p) for p in a.prefix):
            try:
                st, _ = cl.request("DELETE", "/v1/envs/%s?force=1" % name)
                n += st == 200
            except OSError:
                pass
    if n:
        print("destroyed %d leftover environment(s)" % n, file=sys.stderr)


# ---------------------------------------------------------------- interleaved suite


class Cycle:
    """(a): create -> first exec -> destroy on one client; keeps per-part samples.
    (e): the same with more fields in the create body (`"network":{"mode":"open"}`); counts
    the creates whose answer has no `network.ip` (networking did not happen)."""

    def __init__(self, sock, keepalive, prefix, extra=None):
        self.cl = Client(sock, keepalive=keepalive)
        self.prefix = prefix
        self.extra = extra or {}
        self.i = 0
        self.create, self.execp, self.destroy = [], [], []
        self.no_ip = 0
        self.ips = 0

    def __call__(self, keep):
        name = "%s%d" % (self.prefix, self.i)
        self.i += 1
        body = {"name": name, "kind": "sandbox"}
        body.update(self.extra)
        t0 = time.perf_counter()
        st, obj = self.cl.request("POST", "/v1/envs", body)
        t1 = t2 = time.perf_counter()
        err = None
        if st != 201:
            err = "create: " + err_text(st, obj)
        else:
            if "network" in self.extra:
                ip = ((obj or {}).get("network") or {}).get("ip")
                if ip:
                    self.ips += 1
                else:
                    self.no_ip += 1
            st, obj = self.cl.request("POST", "/v1/envs/%s/exec" % name, {"cmd": ["true"]})
            t2 = time.perf_counter()
            if st != 200 or not isinstance(obj, dict) or obj.get("exit_code") != 0:
                err = "exec: " + err_text(st, obj)
        st, obj = self.cl.request("DELETE", "/v1/envs/%s?force=1" % name)
        t3 = time.perf_counter()
        if st not in (200, 404) and not err:
            err = "delete: " + err_text(st, obj)
        if err:
            raise RuntimeError(err)
        if keep:
            self.create.append(t1 - t0)
            self.execp.append(t2 - t1)
            self.destroy.append(t3 - t2)
        return t3 - t0


class HttpExec:
    """(c): POST exec `true` into a running sandbox; optional idle time before each run."""

    def __init__(self, sock, env, keepalive, gap=0.0):
        self.cl = Client(sock, keepalive=keepalive)
        self.env = env
        self.gap = gap
        self.server_ms = []

    def __call__(self, keep):
        if self.gap:
            time.sleep(self.gap)
        t0 = time.perf_counter()
        st, obj = self.cl.request("POST", "/v1/envs/%s/exec" % self.env, {"cmd": ["true"]})
        t1 = time.perf_counter()
        if st != 200 or not isinstance(obj, dict) or obj.get("exit_code") != 0:
            raise RuntimeError(err_text(st, obj))
        if keep and isinstance(obj.get("duration_ms"), (int, float)):
            self.server_ms.append(obj["duration_ms"])
        return t1 - t0


class Command:
    """A command run with subprocess.run, timed with perf_counter (CLI and peer rows)."""

    def __init__(self, argv):
        self.argv = argv

    def __call__(self, keep):
        t0 = time.perf_counter()
        p = subprocess.run(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        t1 = time.perf_counter()
        if p.returncode != 0:
            q = subprocess.run(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
            raise RuntimeError("exit %d: %s" % (p.returncode,
                                                q.stderr.decode(errors="replace").strip()[:200]))
        return t1 - t0


class FilesPut:
    """(f): PUT /v1/envs/{env}/files?path=P with the bytes as the body, keep-alive (RawConn);
    timed from the request until the answer (200 {"path":..,"size":..}) has been read."""

    def __init__(self, sock, env, path, data):
        self.cl = RawConn(sock)
        self.url = "/v1/envs/%s/files?path=%s" % (env, urllib.parse.quote(path, safe="/"))
        self.data = data
        self.nbytes = len(data)

    def __call__(self, keep):
        t0 = time.perf_counter()
        resp = self.cl.request("PUT", self.url, self.data)
        t1 = time.perf_counter()
        st, obj = resp.status, parse_json(resp.body)
        if st != 200:
            raise RuntimeError(err_text(st, obj))
        if not isinstance(obj, dict) or obj.get("size") != self.nbytes:
            raise RuntimeError("PUT answered %s, expected size %d" % (json.dumps(obj)[:200],
                                                                     self.nbytes))
        return t1 - t0


class FilesGet:
    """(f): GET /v1/envs/{env}/files?path=P, keep-alive; timed until the last byte of the
    body; the bytes are compared with what was written (after the clock stops). RawConn by
    default; httpclient=True reads through http.client like the other raw-HTTP rows (an extra
    row that shows what the client costs)."""

    def __init__(self, sock, env, path, data, httpclient=False):
        self.httpclient = httpclient
        self.cl = Client(sock, keepalive=True) if httpclient else RawConn(sock)
        self.url = "/v1/envs/%s/files?path=%s" % (env, urllib.parse.quote(path, safe="/"))
        self.data = data
        self.nbytes = len(data)

    def __call__(self, keep):
        t0 = time.perf_counter()
        if self.httpclient:
            st, raw = self.cl.raw("GET", self.url)
            t1 = time.perf_counter()
        else:
            resp = self.cl.request("GET", self.url, expect=self.nbytes)
            t1 = time.perf_counter()
            st, raw = resp.status, resp.body
        if st != 200:
            raise RuntimeError(err_text(st, parse_json(raw)))
        if raw != self.data:
            raise RuntimeError("GET returned %d bytes that differ from the %d written"
                               % (len(raw), self.nbytes))
        return t1 - t0


class Pipe:
    """(f) peers: a command that reads the bytes from its stdin (write) or prints them to its
    stdout (read), run with subprocess.run and timed with perf_counter like Command; a read's
    output is compared with the bytes (after the clock stops)."""

    def __init__(self, argv, data, read):
        self.argv = argv
        self.data = data
        self.read = read
        self.nbytes = len(data)

    def __call__(self, keep):
        t0 = time.perf_counter()
        if self.read:
            p = subprocess.run(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
        else:
            p = subprocess.run(self.argv, input=self.data, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        t1 = time.perf_counter()
        if p.returncode != 0:
            # Once more to get the message (a write's file is left empty by this).
            q = subprocess.run(self.argv, input=b"", stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
            raise RuntimeError("exit %d: %s" % (p.returncode,
                                                q.stderr.decode(errors="replace").strip()[:200]))
        if self.read and p.stdout != self.data:
            raise RuntimeError("read %d bytes that differ from the %d written"
                               % (len(p.stdout), self.nbytes))
        return t1 - t0


# (f) sizes: decimal megabytes (1 MB = 10^6 bytes), and the runs of each (None: --runs).
FILE_SIZES = (("1m", 1000 * 1000), ("100m", 100 * 1000 * 1000))


def files_setup(a, S, notes):
    """The sandbox the (f) rows write into and read from, its read sources, and the crun
    container's read sources. Returns (rows, env_pid) -- rows as {key: (callable, runs)}."""
    cl = Client(S, keepalive=False)
    env = a.files_env
    body = {"name": env, "kind": "sandbox", "disk": a.files_disk, "memory": a.files_memory}
    st, obj = cl.request("POST", "/v1/envs", body)
    if st != 201:
        notes.append("files: creating %s failed: %s" % (env, err_text(st, obj)))
        cl.close()
        return {}, 0
    st, obj = cl.request("GET", "/v1/envs/%s" % env)
    pid = obj.get("pid") if st == 200 and isinstance(obj, dict) else None
    notes.append("files: sandbox %s created with %s; pid %s" % (env, json.dumps(body), pid))
    # Is the route there at all? (An unknown route is 404 "no such route".)
    st, raw = cl.raw("GET", "/v1/envs/%s/files?path=/workspace/does-not-exist" % env)
    probe = parse_json(raw)
    if st == 404 and "no such route" in json.dumps(probe):
        notes.append("files: the files API is missing (%s)" % err_text(st, probe))
    rows = {}
    for tag, n in FILE_SIZES:
        data = os.urandom(n)
        runs = a.runs if tag == "1m" else a.runs_big
        src = "/workspace/r-%s" % tag
        st, raw = cl.raw("PUT", "/v1/envs/%s/files?path=%s" % (env, src), data)
        if st != 200:
            notes.append("files: writing the read source %s failed: %s"
                         % (src, err_text(st, parse_json(raw))))
        rows["f_put_%s" % tag] = (FilesPut(S, env, "/workspace/pw-%s" % tag, data), runs)
        rows["f_get_%s" % tag] = (FilesGet(S, env, src, data), runs)
        if tag == "100m":
            rows["f_get_%s_httpclient" % tag] = (FilesGet(S, env, src, data, True), runs)
            if shutil.which("curl"):
                # A client that is not Python: curl's own transfer, plus its process start.
                rows["f_get_%s_curl" % tag] = (Command(
                    ["curl", "-sf", "--unix-socket", S, "-o", "/dev/null",
                     "http://localhost/v1/envs/%s/files?path=%s" % (env, src)]), runs)
        if pid:
            ns = ["nsenter", "-t", str(pid), "-a"]
            rows["f_nsenter_put_%s" % tag] = (
                Pipe(ns + ["sh", "-c", "cat > /workspace/nw-%s" % tag], data, False), runs)
            rows["f_nsenter_get_%s" % tag] = (Pipe(ns + ["cat", src], data, True), runs)
        if a.crun_state and a.crun_exec_id:
            ce = ["crun", "--root", a.crun_state, "exec", a.crun_exec_id]
            p = subprocess.run(ce + ["sh", "-c", "cat > %s" % src], input=data,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if p.returncode != 0:
                notes.append("files: crun: writing the read source failed: %s"
                             % p.stderr.decode(errors="replace").strip()[:200])
            rows["f_crun_put_%s" % tag] = (
                Pipe(ce + ["sh", "-c", "cat > /workspace/cw-%s" % tag], data, False), runs)
            rows["f_crun_get_%s" % tag] = (Pipe(ce + ["cat", src], data, True), runs)
    cl.close()
    return rows, pid or 0


def files_teardown(a, S, notes):
    cl = Client(S, keepalive=False)
    st, obj = cl.request("GET", "/v1/envs/%s" % a.files_env)
    if st == 200 and isinstance(obj, dict):
        u = obj.get("usage") or {}
        notes.append("files: %s at the end: usage.memory %s bytes, oom_kills %s"
                     % (a.files_env, u.get("memory"), u.get("oom_kills")))
    st, obj = cl.request("DELETE", "/v1/envs/%s?force=1" % a.files_env)
    if st != 200:
        notes.append("files: deleting %s: %s" % (a.files_env, err_text(st, obj)))
    cl.close()


def cmd_suite(a):
    """Every time measurement, interleaved: rounds of blocks, one block per measurement in a
    shuffled order each round; a block is one warm-up run and then `block` timed runs back to
    back. Load that comes and goes on the host then hits all rows alike, and the ratios
    compare like with like. Rows with fewer runs (the 100 MB file rows) take a smaller block
    each round, spread over the same rounds. --rows keeps only the rows whose names start
    with one of the given prefixes (the sequential mode runs the file rows this way)."""
    S, W = a.socket, a.work
    m = {}  # name -> callable
    runs = {}  # name -> runs, when not a.runs
    notes = []
    m["a_keepalive"] = Cycle(S, True, "bench-a-")
    m["a_newconn"] = Cycle(S, False, "bench-an-")
    m["e_net_keepalive"] = Cycle(S, True, "bench-e-", extra={"network": {"mode": "open"}})
    m["b_cli_exec"] = Command([a.cli, "--socket", S, "exec", a.env, "--", "true"])
    m["b_cli_start"] = Command([a.cli, "--version"])
    m["c_keepalive"] = HttpExec(S, a.env, True)
    m["c_newconn"] = HttpExec(S, a.env, False)
    m["c_gap"] = HttpExec(S, a.env, True, gap=a.gap)
    m["baseline_true"] = Command(["/bin/true"])
    if a.envpid:
        m["peer_nsenter"] = Command(["nsenter", "-t", str(a.envpid), "-a", "/bin/true"])
    if a.rootfs:
        m["peer_bwrap"] = Command(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind",
                                   a.rootfs, "/", "--proc", "/proc", "--dev", "/dev",
                                   "/bin/true"])
    if a.crun_state:
        m["peer_crun_run"] = Command(["crun", "--root", a.crun_state, "run", "--bundle",
                                      a.crun_run_bundle, "pb-run-%d" % os.getpid()])
        if a.crun_exec_id:
            m["peer_crun_exec"] = Command(["crun", "--root", a.crun_state, "exec",
                                           a.crun_exec_id, "/bin/true"])
    if a.rows:
        keep_prefixes = a.rows.split(",")
        m = {k: v for k, v in m.items() if any(k.startswith(p) for p in keep_prefixes)}
    else:
        keep_prefixes = None
    want_files = a.files_env and (keep_prefixes is None or
                                  any("f_".startswith(p) or p.startswith("f_")
                                      for p in keep_prefixes))
    if want_files:
        frows, fpid = files_setup(a, S, notes)
        for k, (fn, n) in frows.items():
            m[k] = fn
            runs[k] = n
    system = None
    try:
        cl = Client(S, keepalive=False)
        st, system = cl.request("GET", "/v1/system")
        cl.close()
    except OSError:
        pass
    samples = {k: [] for k in m}
    errors = {k: [] for k in m}
    nruns = {k: runs.get(k, a.runs) for k in m}
    rounds = max(1, math.ceil(a.runs / a.block))
    quota = {k: max(1, math.ceil(nruns[k] / rounds)) for k in m}
    rng = random.Random(1)
    order = list(m)
    t_start = time.time()
    for r in range(rounds):
        rng.shuffle(order)
        for k in order:
            want = min(quota[k], nruns[k] - len(samples[k]))
            if want <= 0 or len(errors[k]) >= 5:
                continue
            for j in range(a.warmup_per_block + want):
                keep = j >= a.warmup_per_block
                try:
                    t = m[k](keep)
                except Exception as e:  # record and go on: never assert
                    errors[k].append("%s" % e)
                    break
                if keep:
                    samples[k].append(t)
        print("round %d/%d done (%.0f s)" % (r + 1, rounds, time.time() - t_start),
              file=sys.stderr, flush=True)
    if want_files:
        files_teardown(a, S, notes)
    method = ("Python subprocess.run + time.perf_counter, interleaved with all other rows "
              "(blocks of %d after %d warm-up)" % (a.block, a.warmup_per_block))
    for k, fn in m.items():
        extra = {"errors": errors[k][:20], "error_count": len(errors[k]),
                 "method": method if isinstance(fn, (Command, Pipe)) else "in-process perf_counter",
                 "runs_asked": nruns[k], "block": quota[k]}
        if isinstance(fn, Cycle):
            extra.update(create=summarize(fn.create), exec=summarize(fn.execp),
                         destroy=summarize(fn.destroy), keepalive=fn.cl.keepalive,
                         connects=fn.cl.total_connects(), create_body_extra=fn.extra,
                         create_samples=fn.create, exec_samples=fn.execp,
                         destroy_samples=fn.destroy)
            if "network" in fn.extra:
                extra.update(with_ip=fn.ips, without_ip=fn.no_ip,
                             system_network=(system or {}).get("network")
                             if isinstance(system, dict) else None)
        if isinstance(fn, HttpExec):
            extra.update(keepalive=fn.cl.keepalive, connects=fn.cl.total_connects(),
                         gap_s=fn.gap, server_duration_ms_median=
                         statistics.median(fn.server_ms) if fn.server_ms else None)
        if isinstance(fn, (Command, Pipe)):
            extra["command"] = fn.argv
        if isinstance(fn, (FilesPut, FilesGet, Pipe)):
            extra["bytes"] = fn.nbytes
        if k == "f_get_100m_curl":
            extra["bytes"] = FILE_SIZES[1][1]
        if isinstance(fn, (FilesPut, FilesGet)):
            extra.update(url=fn.url, connects=fn.cl.connects if isinstance(fn.cl, RawConn)
                         else fn.cl.total_connects(),
                         client="http.client" if isinstance(fn.cl, Client) else "RawConn")
        write_result(os.path.join(W, k + ".json"), k, samples[k], **extra)
        if isinstance(fn, (Cycle, HttpExec, FilesPut, FilesGet)):
            fn.cl.close()
    if notes or want_files:
        with open(os.path.join(W, "f_notes.json"), "w") as f:
            json.dump({"notes": notes}, f, indent=1)
    for n in notes:
        print("bench.py: " + n, file=sys.stderr)


# ---------------------------------------------------------------- timing commands


def cmd_cmd_time(a):
    argv = a.argv[1:] if a.argv and a.argv[0] == "--" else a.argv
    samples, errors = [], []
    for i in range(a.warmup + a.runs):
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        t1 = time.perf_counter()
        if p.returncode != 0:
            errors.append("exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace")[:200]))
        elif i >= a.warmup:
            samples.append(t1 - t0)
    write_result(a.out, "cmd", samples, command=argv, method="python subprocess.run loop",
                 errors=errors[:20], error_count=len(errors))


def cmd_from_hyperfine(a):
    try:
        with open(a.json) as f:
            hf = json.load(f)
        r = hf["results"][0]
        times = r["times"]
        codes = r.get("exit_codes") or [0] * len(times)
        ok = [t for t, c in zip(times, codes) if c == 0]
        nbad = sum(1 for c in codes if c != 0)
        write_result(a.out, "cmd", ok, command=r.get("command"), method="hyperfine",
                     errors=["%d run(s) exited non-zero" % nbad] if nbad else [],
                     error_count=nbad)
    except (OSError, ValueError, KeyError, IndexError) as e:
        write_result(a.out, "cmd", [], method="hyperfine", errors=["no result: %s" % e],
                     error_count=1)


# ---------------------------------------------------------------- report


def load(work, name):
    try:
        with open(os.path.join(work, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ms(x):
    if x is None:
        return "n/a"
    v = x * 1000
    return "%.2f ms" % v if v < 10 else "%.1f ms" % v


def mib(x):
    return "n/a" if x is None else "%.2f MiB" % (x / 1048576)


def med(r):
    return r.get("median") if r and r.get("n") else None


def ratio(a_, b_, label):
    if a_ is None or b_ is None or b_ == 0:
        return "%s: n/a" % label
    return "%.1f× %s" % (a_ / b_, label)


def diff_ci(x, y, iters=2000, seed=1):
    """95% percentile-bootstrap interval of median(x) - median(y)."""
    if not x or not y:
        return None
    rng = random.Random(seed)
    d = sorted(statistics.median(rng.choices(x, k=len(x))) -
               statistics.median(rng.choices(y, k=len(y))) for _ in range(iters))
    return d[int(0.025 * iters)], d[int(0.975 * iters) - 1]


def signed_ms(x):
    if x is None:
        return "n/a"
    v = x * 1000
    return ("%+.2f ms" if abs(v) < 10 else "%+.1f ms") % v


def mbps(nbytes, seconds):
    return "n/a" if not seconds or not nbytes else "%.0f" % (nbytes / seconds / 1e6)


def cmd_report(a):
    W = a.work
    A, Anew = load(W, "a_keepalive"), load(W, "a_newconn")
    B = load(W, "b_cli_exec")
    C, Cnew = load(W, "c_keepalive"), load(W, "c_newconn")
    D = load(W, "d_memory")
    bw, cr, ce, ns = (load(W, n) for n in ("peer_bwrap", "peer_crun_run", "peer_crun_exec",
                                           "peer_nsenter"))
    missing = a.missing.split(",") if a.missing else []

    def note(r, why_missing=None):
        if r is None:
            return why_missing or "not run"
        if not r.get("n"):
            errs = r.get("errors") or []
            return "failed: " + (errs[0] if errs else "no samples")
        if r.get("error_count"):
            return "%d error(s), e.g. %s" % (r["error_count"], (r.get("errors") or ["?"])[0])
        return ""

    rows = []

    def row(label, r, target, ratios, value=None, value90=None):
        if value is None and r is not None and r.get("n"):
            value, value90 = ms(r.get("median")), ms(r.get("p90"))
        if value is None:
            value, value90 = "n/a", "n/a"
            ratios = (ratios + "; " if ratios else "") + note(r)
        rows.append("| %s | %s | %s | %s | %s |" % (label, value, value90 or "—", target, ratios))

    bw_m, cr_m, ce_m, ns_m = med(bw), med(cr), med(ce), med(ns)
    a_m, c_m, b_m = med(A), med(C), med(B)
    row("(a) sandbox create → first exec `true` → destroy, raw HTTP, keep-alive", A, "≤ 25 ms",
        ratio(a_m, bw_m, "bwrap cold") + ", " + ratio(a_m, cr_m, "crun cold"))
    row("(a) … create part alone (POST /v1/envs → 201)", A and A.get("create"), "—", "")
    row("(b) exec `true` via CLI (`paddock exec NAME -- true`)", B, "≤ 5 ms",
        ratio(b_m, ce_m, "crun exec"))
    Bs = load(W, "b_cli_start")
    row("(b) … CLI start alone (`paddock --version`)", Bs, "≤ 2 ms",
        ratio(med(Bs), med(load(W, "baseline_true")), "spawning `/bin/true`"))
    row("(c) exec `true` via raw HTTP (buffered, keep-alive)", C, "≤ 2 ms",
        ratio(c_m, ce_m, "crun exec") + ", " + ratio(c_m, ns_m, "nsenter"))
    if D:
        per = D.get("api_per_env_bytes")
        rows.append("| (d) memory per idle sandbox, Σ memcg usage (inspect `usage.memory`) / %d "
                    "| %s | — | ≤ 1 MiB | Σ memcg files directly: %s/env; %d of %d created |"
                    % (D.get("created") or 0, mib(per), mib(D.get("memcg_per_env_bytes")),
                       D.get("created") or 0, D.get("count") or 0))
        g = D.get("daemon_rss_growth_per_env_bytes")
        rows.append("| (d) paddockd RSS growth per idle sandbox | %s | — | — | RSS %s → %s KiB "
                    "with %d sandboxes, %s KiB after destroying them |"
                    % ("n/a" if g is None else "%.1f KiB" % (g / 1024),
                       D.get("daemon_rss_kib_before"), D.get("daemon_rss_kib_with_envs"),
                       D.get("created") or 0, D.get("daemon_rss_kib_after_destroy")))
    else:
        rows.append("| (d) memory per idle sandbox | n/a | — | ≤ 1 MiB | not run |")
    E = load(W, "e_net_keepalive")
    e_m = med(E)
    e_net = (E or {}).get("system_network") or a.daemon_network or "?"
    e_why = "" if e_net == "routed" else "GET /v1/system says network %r; " % e_net
    row("(e) sandbox create with networking (`\"network\":{\"mode\":\"open\"}`) → first "
        "exec `true` → destroy, raw HTTP, keep-alive", E, "—",
        e_why + ratio(e_m, a_m, "(a)") + ", " + ratio(e_m, cr_m, "crun cold"))
    row("(e) … the same cycle without networking (= row (a))", A, "—", "")
    if E and A and e_m is not None and a_m is not None:
        ci = diff_ci(E.get("samples") or [], A.get("samples") or [])
        rows.append("| (e) networking adds: median (e) − median (a) | %s | — | ≤ 10 ms | "
                    "%s%s |" % (signed_ms(e_m - a_m), e_why,
                                "95%% bootstrap interval %s … %s" % (signed_ms(ci[0]),
                                                                     signed_ms(ci[1]))
                                if ci else ""))
    else:
        rows.append("| (e) networking adds: median (e) − median (a) | n/a | — | ≤ 10 ms | %s |"
                    % (e_why + (note(E) if not (E and E.get("n")) else note(A))))
    peer_missing = lambda p: ("peer not installed (%s)" % p) if p in missing else None
    row("peer: bwrap cold start of `/bin/true` (teardown included)", bw, "—",
        peer_missing("bwrap") or "")
    row("peer: crun cold start (`crun run`, /bin/true, teardown included)", cr, "—",
        peer_missing("crun") or "")
    row("peer: crun exec `/bin/true` into a running container", ce, "—",
        peer_missing("crun") or "")
    row("peer: `nsenter -t PID -a /bin/true` into a paddock sandbox (lower bound)", ns, "—", "")
    extra = []

    def xrow(label, r, ratios=""):
        if r is None:
            return
        if r.get("n"):
            extra.append("| %s | %s | %s | %s |" % (label, ms(r["median"]), ms(r["p90"]), ratios))
        else:
            extra.append("| %s | n/a | n/a | %s |" % (label, note(r)))

    xrow("(a) same cycle, new connection per request", Anew,
         Anew and ratio(med(Anew), bw_m, "bwrap cold") + ", " + ratio(med(Anew), cr_m, "crun cold"))
    xrow("(a) … exec part (first exec into the new sandbox), keep-alive", A and A.get("exec"))
    xrow("(a) … destroy part (DELETE ?force=1), keep-alive", A and A.get("destroy"))
    xrow("(a) … create part alone, new connection", Anew and Anew.get("create"))
    xrow("(c) same exec, new connection per request", Cnew,
         Cnew and ratio(med(Cnew), ce_m, "crun exec") + ", " + ratio(med(Cnew), ns_m, "nsenter"))
    Cgap = load(W, "c_gap")
    xrow("(c) same exec, keep-alive, %g ms idle between runs (as an agent would)"
         % (1000 * ((Cgap or {}).get("gap_s") or 0)), Cgap,
         Cgap and ratio(med(Cgap), ce_m, "crun exec") + ", " + ratio(med(Cgap), ns_m, "nsenter"))
    Fhc = load(W, "f_get_100m_httpclient")
    if Fhc:
        xrow("(f) read 100 MB, GET …/files, through Python http.client instead (%s MB/s at "
             "median)" % mbps(Fhc.get("bytes"), med(Fhc)), Fhc,
             ratio(med(Fhc), med(load(W, "f_get_100m")), "the same GET through the lean client"))
    Fcu = load(W, "f_get_100m_curl")
    if Fcu:
        xrow("(f) read 100 MB, GET …/files with `curl --unix-socket … -o /dev/null` (process "
             "start included; %s MB/s at median)" % mbps(Fcu.get("bytes"), med(Fcu)), Fcu,
             ratio(med(Fcu), med(load(W, "f_get_100m")), "the same GET through the lean client"))
    for part in ("create", "exec", "destroy"):
        ep, ap = E and E.get(part), A and A.get(part)
        if ep and ep.get("n"):
            d = (ep["median"] - ap["median"]) if ap and ap.get("n") else None
            xrow("(e) … %s part, with networking" % part, ep,
                 "%s vs the same part of (a)" % signed_ms(d))
    xrow("baseline: spawn `/bin/true` on the host, no isolation (timer floor)",
         load(W, "baseline_true"))
    if C and C.get("server_duration_ms_median") is not None:
        extra.append("| (c) daemon-reported `duration_ms` of the exec (median) | %s ms | — | "
                     "what paddockd thinks the exec took |" % C["server_duration_ms_median"])

    ftab = []
    fnotes = (load(W, "f_notes") or {}).get("notes") or []

    def frow(label, r, ratios=""):
        if r is None:
            return
        if r.get("n"):
            nb = r.get("bytes")
            ftab.append("| %s | %d | %s | %s | %s / %s | %s |"
                        % (label, r["n"], ms(r["median"]), ms(r["p90"]),
                           mbps(nb, r["median"]), mbps(nb, r["p90"]), ratios))
        else:
            ftab.append("| %s | 0 | n/a | n/a | n/a | %s |" % (label, note(r)))

    for tag, n in FILE_SIZES:
        size = "%d MB" % (n // 1000000)
        P = {op: load(W, "f_%s_%s" % (op, tag)) for op in ("put", "get")}
        N = {op: load(W, "f_nsenter_%s_%s" % (op, tag)) for op in ("put", "get")}
        K = {op: load(W, "f_crun_%s_%s" % (op, tag)) for op in ("put", "get")}
        for op, verb, http_, pipe in (
                ("put", "write", "PUT", "sh -c 'cat > /workspace/f'"),
                ("get", "read", "GET", "cat /workspace/f")):
            pm = med(P[op])
            frow("(f) %s %s: `%s /v1/envs/NAME/files?path=/workspace/f`, raw HTTP, keep-alive"
                 % (verb, size, http_), P[op],
                 ratio(pm, med(N[op]), "nsenter") + ", " + ratio(pm, med(K[op]), "crun exec")
                 if P[op] and P[op].get("n") else "")
            frow("peer: %s %s: `nsenter -t PID -a %s`, same sandbox" % (verb, size, pipe), N[op])
            frow("peer: %s %s: `crun exec ID %s`, tmpfs /workspace" % (verb, size, pipe), K[op])

    def connote(r, label):
        if r and r.get("keepalive") and r.get("connects", 0) > 1:
            return ["- %s: the keep-alive connection had to be reopened %d times for %d requests."
                    % (label, r["connects"] - 1, r.get("requests", 0))]
        return []

    method = (B or {}).get("method") or "n/a"
    hdr = ["| measurement | median | p90 | target | ratio vs peer |", "|---|---|---|---|---|"]
    kernel = platform.release()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = ["# Paddock benchmark results", "",
          "- date: %s" % now,
          "- kernel: %s" % kernel,
          "- cgroup mode: %s" % a.cgroup_mode,
          "- machine: %d CPUs; at start: load average %s; paddock %s (%s)"
          % (os.cpu_count() or 0, a.loadavg, a.version, a.commit),
          "- method: %s. Idle-memory rows: %s sandboxes." % (a.timing or method,
                                                              (D or {}).get("count", "n/a")),
          "- paddockd networking (`GET /v1/system` → `network`): %s" % (
              a.daemon_network or "?"),
          "- peers: %s" % a.peer_versions,
          "- rootfs: busybox from `scripts/busybox-rootfs.sh`, the same directory for paddock's "
          "image, bwrap and crun.", ""]
    md += hdr + rows + [""]
    if ftab:
        md += ["Files API (f): random bytes written to / read back from the /workspace tmpfs of "
               "one sandbox created with `\"disk\":\"%s\",\"memory\":\"%s\"`; "
               "1 MB = 10^6 bytes. Timed like the other rows and interleaved with them; the "
               "100 MB rows have fewer runs (n). The peers pipe the same bytes through a "
               "process in the same sandbox (`nsenter`) or in a crun container (`crun exec`) "
               "from a Python subprocess.run; every read is compared with the bytes written, "
               "after the clock stops." % (a.files_disk or "?", a.files_memory or "?"), "",
               "| measurement | n | median | p90 | MB/s (at median / p90) | ratio vs peer |",
               "|---|---|---|---|---|---|"] + ftab + [""]
    if extra:
        md += ["Extra rows (not targets; help explain the ones above):", "",
               "| measurement | median | p90 | note |", "|---|---|---|---|"] + extra + [""]
    notes = connote(A, "(a)") + connote(C, "(c)")
    for label, r in (("(a)", A), ("(a) new conn", Anew), ("(b)", B), ("(c)", C),
                     ("(c) new conn", Cnew), ("bwrap", bw), ("crun run", cr),
                     ("crun exec", ce), ("nsenter", ns)):
        if r and r.get("error_count"):
            notes.append("- %s: %d error(s), first: %s" % (label, r["error_count"],
                                                          (r.get("errors") or ["?"])[0]))
    for label, r in [("(e)", E)] + [(k, load(W, k)) for k in sorted(
            f[:-5] for f in os.listdir(W) if f.startswith("f_") and f.endswith(".json")
            and f != "f_notes.json")]:
        if r and r.get("error_count"):
            notes.append("- %s: %d error(s), first: %s" % (label, r["error_count"],
                                                          (r.get("errors") or ["?"])[0]))
    if E:
        notes.append("- (e): `GET /v1/system` said `\"network\": \"%s\"`; %d of the "
                     "timed and warm-up creates answered with a `network.ip`, %d without."
                     % (e_net, E.get("with_ip") or 0, E.get("without_ip") or 0))
    for n in fnotes:
        notes.append("- (f) " + n)
    if D and D.get("error_count"):
        notes.append("- (d): %d error(s), first: %s" % (D["error_count"], D["errors"][0]))
    if D:
        notes.append("- (d): creating %d sandboxes took %.1f s, destroying them %.1f s."
                     % (D.get("created") or 0, D.get("create_all_s") or 0,
                        D.get("destroy_all_s") or 0))
    if missing:
        notes.append("- missing peers (bench/deps.sh installs them): %s" % ", ".join(missing))
    if notes:
        md += ["Notes:", ""] + notes + [""]
    text = "\n".join(md)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("--socket", required=True)
        sp.add_argument("--out")
        sp.add_argument("--runs", type=int, default=40)
        sp.add_argument("--warmup", type=int, default=2)

    sp = sub.add_parser("http-cycle"); common(sp)
    sp.add_argument("--prefix", default="bench-a-")
    sp.add_argument("--new-connection", action="store_true")
    sp.add_argument("--network", default="", help='create with {"network":{"mode":NETWORK}}')
    sp = sub.add_parser("http-exec"); common(sp)
    sp.add_argument("--env", required=True)
    sp.add_argument("--new-connection", action="store_true")
    sp.add_argument("--gap", type=float, default=0.0, help="idle seconds between runs")
    sp = sub.add_parser("memory"); common(sp)
    sp.add_argument("--count", type=int, default=100)
    sp.add_argument("--prefix", default="bench-d-")
    sp.add_argument("--daemon-pid", type=int, required=True)
    sp.add_argument("--settle", type=float, default=3.0)
    sp = sub.add_parser("destroy-all")
    sp.add_argument("--socket", required=True)
    sp.add_argument("--prefix", action="append", required=True)
    sp = sub.add_parser("suite")
    sp.add_argument("--socket", required=True)
    sp.add_argument("--work", required=True)
    sp.add_argument("--runs", type=int, default=40)
    sp.add_argument("--block", type=int, default=5)
    sp.add_argument("--warmup-per-block", type=int, default=1)
    sp.add_argument("--cli", required=True)
    sp.add_argument("--env", required=True)
    sp.add_argument("--envpid", type=int, default=0)
    sp.add_argument("--gap", type=float, default=0.1)
    sp.add_argument("--rootfs", default="")
    sp.add_argument("--crun-state", default="")
    sp.add_argument("--crun-run-bundle", default="")
    sp.add_argument("--crun-exec-id", default="")
    sp.add_argument("--rows", default="", help="only rows whose names start with one of "
                    "these comma-separated prefixes")
    sp.add_argument("--files-env", default="", help="(f): create this sandbox and time the "
                    "files API and its peers in it")
    sp.add_argument("--files-disk", default="512M")
    sp.add_argument("--files-memory", default="1G")
    sp.add_argument("--runs-big", type=int, default=10, help="runs of the 100 MB rows")
    sp = sub.add_parser("cmd-time")
    sp.add_argument("--out", required=True)
    sp.add_argument("--runs", type=int, default=40)
    sp.add_argument("--warmup", type=int, default=2)
    sp.add_argument("argv", nargs=argparse.REMAINDER)
    sp = sub.add_parser("from-hyperfine")
    sp.add_argument("--json", required=True)
    sp.add_argument("--out", required=True)
    sp = sub.add_parser("report")
    for o in ("--work", "--md", "--cgroup-mode", "--version", "--commit", "--peer-versions",
              "--missing", "--loadavg", "--timing", "--runs", "--warmup", "--daemon-network",
              "--files-disk", "--files-memory"):
        sp.add_argument(o, default="")
    a = p.parse_args()
    {"http-cycle": cmd_http_cycle, "http-exec": cmd_http_exec, "memory": cmd_memory,
     "destroy-all": cmd_destroy_all, "cmd-time": cmd_cmd_time, "suite": cmd_suite,
     "from-hyperfine": cmd_from_hyperfine, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
