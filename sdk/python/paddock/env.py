"""An environment and what can be done with it. Every method is one API request; its
docstring names the route."""
import base64
import io
import json
import os
import tarfile
import tempfile
import urllib.parse

from . import errors
from ._transport import _UNSET
from .results import ExecResult, FileInfo, Record, Snapshot, WatchEvent, _decode

# stdin bytes up to this size travel inside the JSON request; larger ones (and files) are the
# raw request body with the request in ?spec=
_INLINE_STDIN = 1 << 20
# exec, wait and streams without a timeout of their own: no socket timeout (a command may run
# for hours); with one, this much slack after it
_SLACK = 60.0


def _q(name):
    return urllib.parse.quote(str(name), safe="")


def _cmd(cmd):
    if isinstance(cmd, str):
        return ["sh", "-c", cmd]
    cmd = [str(c) for c in cmd]
    if not cmd:
        raise ValueError("cmd: an empty command")
    return cmd


def _seconds(t):
    """A timeout given as seconds (int/float) or a duration string -> seconds or None."""
    if t is None:
        return None
    if isinstance(t, (int, float)):
        return float(t)
    s = str(t).strip()
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    for u in ("ms", "s", "m", "h", "d"):
        if s.endswith(u):
            try:
                return float(s[:-len(u)]) * units[u]
            except ValueError:
                return None
    try:
        return float(s)
    except ValueError:
        return None


def _sock_timeout(timeout):
    t = _seconds(timeout)
    return None if t is None else t + _SLACK


def _mode(mode):
    if mode is None:
        return None
    if isinstance(mode, int):
        return "%04o" % mode
    return str(mode)


def _exec_spec(cmd, env=None, cwd=None, user=None, timeout=None, max_output=None):
    spec = {"cmd": _cmd(cmd)}
    if env is not None:
        spec["env"] = {str(k): str(v) for k, v in env.items()}
    if cwd is not None:
        spec["cwd"] = cwd
    if user is not None:
        spec["user"] = str(user)
    if timeout is not None:
        spec["timeout"] = timeout
    if max_output is not None:
        spec["max_output"] = max_output
    return spec


class Env:
    """One environment (a computer or a sandbox). ``data`` is the daemon's environment object
    as last seen; ``name``, ``kind``, ``state``, ``image``, ``ip``, ``labels``, ``limits`` read
    from it. Methods that change the environment refresh ``data`` from their answer.

    Used as a context manager, the environment is destroyed when the block ends."""

    def __init__(self, client, data):
        self._client = client
        self._t = client._transport
        self.data = data
        self.procs = Procs(self)
        self.files = Files(self)

    # ---- the environment object

    @property
    def name(self):
        return self.data["name"]

    @property
    def kind(self):
        return self.data.get("kind")

    @property
    def state(self):
        return self.data.get("state")

    @property
    def image(self):
        return self.data.get("image")

    @property
    def labels(self):
        return self.data.get("labels") or {}

    @property
    def limits(self):
        return self.data.get("limits") or {}

    @property
    def ip(self):
        return (self.data.get("network") or {}).get("ip")

    @property
    def owner(self):
        """The token that created it; ``None``: the administrator."""
        return self.data.get("owner")

    @property
    def network_policy(self):
        return self.data.get("network") or {}

    def _path(self, suffix=""):
        return "/v1/envs/%s%s" % (_q(self.name), suffix)

    def _set(self, j):
        if isinstance(j, dict) and "name" in j:
            self.data = j
        return self

    def refresh(self):
        """Read the environment again. ``GET /v1/envs/{name}``"""
        return self._set(self._t.json("GET", self._path()))

    def __repr__(self):
        return "Env(name=%r, kind=%r, state=%r)" % (self.name, self.kind, self.state)

    def __eq__(self, other):
        return isinstance(other, Env) and other.name == self.name and other._t is self._t

    def __hash__(self):
        return hash(self.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.destroy()
        except errors.NotFound:
            pass

    # ---- lifecycle

    def start(self):
        """Start a stopped environment. ``POST /v1/envs/{name}/start``"""
        return self._set(self._t.json("POST", self._path("/start")))

    def stop(self, timeout=None):
        """Stop it: SIGTERM, SIGKILL after ``timeout`` (seconds or ``"10s"``; daemon default 10s).
        ``POST /v1/envs/{name}/stop?timeout=``"""
        to = _sock_timeout(timeout) or 3600 + _SLACK
        return self._set(self._t.json("POST", self._path("/stop"), query={"timeout": timeout},
                                      timeout=to))

    def restart(self, timeout=None):
        """Stop, then start. ``POST /v1/envs/{name}/restart?timeout=``"""
        to = _sock_timeout(timeout) or 3600 + _SLACK
        return self._set(self._t.json("POST", self._path("/restart"),
                                      query={"timeout": timeout}, timeout=to))

    def pause(self):
        """Freeze every process. ``POST /v1/envs/{name}/pause``"""
        return self._set(self._t.json("POST", self._path("/pause")))

    def resume(self):
        """Thaw a paused environment. ``POST /v1/envs/{name}/resume``"""
        return self._set(self._t.json("POST", self._path("/resume")))

    def destroy(self, force=True):
        """Destroy it and everything in it (``force``: also when running).
        ``DELETE /v1/envs/{name}?force=1``"""
        self._t.json("DELETE", self._path(), query={"force": "1" if force else None})
        self.data = dict(self.data, state="deleted")

    def update(self, cpus=_UNSET, memory=_UNSET, swap=_UNSET, pids=_UNSET, ttl=_UNSET,
               autostart=_UNSET, disk=_UNSET):
        """Change limits, TTL, autostart or disk limit; ``None`` removes a limit (or the TTL).
        Arguments left out keep their value. ``PATCH /v1/envs/{name}``"""
        body = {}
        for k, v in (("cpus", cpus), ("memory", memory), ("swap", swap), ("pids", pids),
                     ("ttl", ttl), ("autostart", autostart), ("disk", disk)):
            if v is not _UNSET:
                body[k] = v
        return self._set(self._t.json("PATCH", self._path(), json_body=body))

    def network(self, mode=None, allow=None, links=None, bandwidth=None):
        """Change the network policy while it runs: ``mode`` (``none``, ``open``, ``allow``),
        ``allow`` (rules such as ``"example.com:443"``; giving it alone sets mode ``allow``),
        ``links`` (environment names), ``bandwidth`` (a rate, or ``{"egress":..,"ingress":..}``).
        Fields left out keep their value. ``PATCH /v1/envs/{name}`` with ``{"network":{...}}``"""
        n = {}
        if mode is not None:
            n["mode"] = mode
        if allow is not None:
            n["allow"] = list(allow)
        if links is not None:
            n["links"] = list(links)
        if bandwidth is not None:
            n["bandwidth"] = bandwidth
        return self._set(self._t.json("PATCH", self._path(), json_body={"network": n}))

    # ---- storage

    def snapshot(self, name=None):
        """Snapshot a computer's disk. ``POST /v1/envs/{name}/snapshots`` -> :class:`Snapshot`"""
        body = {"name": name} if name else {}
        return Snapshot(self._t.json("POST", self._path("/snapshots"), json_body=body))

    def snapshots(self):
        """The computer's snapshots, by name. ``GET /v1/envs/{name}/snapshots``"""
        j = self._t.json("GET", self._path("/snapshots"))
        return [Snapshot(s) for s in j.get("snapshots", [])]

    def delete_snapshot(self, name):
        """``DELETE /v1/envs/{name}/snapshots/{snap}``"""
        self._t.json("DELETE", self._path("/snapshots/" + _q(name)))

    def restore(self, snapshot):
        """Replace a stopped computer's disk by a copy of ``snapshot`` (start it afterwards).
        ``POST /v1/envs/{name}/restore``"""
        return self._set(self._t.json("POST", self._path("/restore"),
                                      json_body={"snapshot": str(snapshot)}))

    def fork(self, new_name, snapshot=None):
        """A new running computer with a copy-on-write copy of this one's disk (as now, or as
        in ``snapshot``). ``POST /v1/envs/{name}/fork`` -> :class:`Env`"""
        body = {"name": new_name}
        if snapshot is not None:
            body["snapshot"] = str(snapshot)
        return Env(self._client, self._t.json("POST", self._path("/fork"), json_body=body,
                                              timeout=max(self._t.timeout or 0, 600)))

    def commit(self, image):
        """Make image ``image`` from the computer's disk. ``POST /v1/envs/{name}/commit``"""
        return self._t.json("POST", self._path("/commit"), json_body={"image": image},
                            timeout=max(self._t.timeout or 0, 600))

    # ---- ports

    def ports(self):
        """``GET /v1/envs/{name}/ports``"""
        return self._t.json("GET", self._path("/ports")).get("ports", [])

    def publish(self, port, host_port, proto="tcp"):
        """Forward ``host_port`` of the host to ``port`` here. ``POST /v1/envs/{name}/ports``"""
        return self._t.json("POST", self._path("/ports"),
                            json_body={"host_port": host_port, "port": port, "proto": proto})

    def unpublish(self, host_port, proto="tcp"):
        """``DELETE /v1/envs/{name}/ports/{host_port}?proto=``"""
        return self._t.json("DELETE", self._path("/ports/%d" % int(host_port)),
                            query={"proto": proto})

    # ---- exec

    def _exec_request(self, spec, stdin):
        """(kwargs for Transport.request) for spec with stdin."""
        if stdin is None:
            return dict(json_body=spec)
        if isinstance(stdin, str):
            return dict(json_body=dict(spec, stdin=stdin))
        if isinstance(stdin, (bytes, bytearray, memoryview)) and len(stdin) <= _INLINE_STDIN:
            return dict(json_body=dict(spec, stdin=base64.b64encode(bytes(stdin)).decode(),
                                       stdin_encoding="base64"))
        headers = {"Content-Type": "application/octet-stream"}
        body = stdin
        if hasattr(stdin, "read"):
            try:
                size = os.fstat(stdin.fileno()).st_size - stdin.tell()
                headers["Content-Length"] = str(size)
            except (OSError, AttributeError, io.UnsupportedOperation):
                pass  # sent chunked
        return dict(query={"spec": json.dumps(spec, separators=(",", ":"))}, body=body,
                    headers=headers)

    def exec(self, cmd, stdin=None, env=None, cwd=None, user=None, timeout=None,
             max_output=None, on_stdout=None, on_stderr=None):
        """Run ``cmd`` (a list of arguments, or a string run by ``sh -c``) and wait for it.

        ``stdin``: str, bytes or a binary file; ``env``: extra variables; ``cwd``; ``user``
        (name, ``uid`` or ``uid:gid``); ``timeout`` (seconds or ``"30s"``): the command's whole
        process tree is killed after it and :class:`CommandTimeout` is raised (its ``result``
        holds the output so far); ``max_output`` (bytes or ``"16M"``).
        With ``on_stdout`` / ``on_stderr`` callbacks the output is streamed to them as it
        arrives (and also collected in the result).
        ``POST /v1/envs/{name}/exec`` -> :class:`ExecResult`"""
        spec = _exec_spec(cmd, env, cwd, user, timeout, max_output)
        if on_stdout is not None or on_stderr is not None:
            out, err = [], []
            with self.exec_stream(cmd, stdin=stdin, env=env, cwd=cwd, user=user,
                                  timeout=timeout, max_output=max_output) as s:
                for which, chunk in s:
                    if which == "stdout":
                        out.append(chunk)
                        if on_stdout:
                            on_stdout(chunk)
                    else:
                        err.append(chunk)
                        if on_stderr:
                            on_stderr(chunk)
                res = s.result
            res.stdout, res.stderr = b"".join(out), b"".join(err)
        else:
            kw = self._exec_request(spec, stdin)
            res = ExecResult.from_json(self._t.json("POST", self._path("/exec"),
                                                    timeout=_sock_timeout(timeout), **kw),
                                       cmd=spec["cmd"])
        if res.timed_out:
            raise errors.CommandTimeout("%r timed out after %s" % (spec["cmd"], timeout),
                                        result=res, method="POST", path=self._path("/exec"))
        return res

    def exec_stream(self, cmd, stdin=None, env=None, cwd=None, user=None, timeout=None,
                    max_output=None):
        """Run ``cmd`` and iterate its output as it arrives: ``("stdout"|"stderr", bytes)``.
        When the iteration ends, ``.result`` is the :class:`ExecResult` (``exit_code``,
        ``duration_ms``, ``timed_out``; its stdout/stderr stay empty). Close it (or use
        ``with``) to stop early. A timeout shows as ``result.timed_out`` (no exception).
        ``POST /v1/envs/{name}/exec`` with ``"stream":true`` (NDJSON)"""
        spec = _exec_spec(cmd, env, cwd, user, timeout, max_output)
        spec["stream"] = True
        kw = self._exec_request(spec, stdin)
        s = self._t.request("POST", self._path("/exec"), stream=True,
                            timeout=_sock_timeout(timeout), **kw)
        return OutputStream(s, spec["cmd"])

    def pty(self, cmd=None, env=None, cwd=None, user=None, timeout=None, cols=80, rows=24,
            term="xterm-256color"):
        """An interactive terminal session (``cmd`` default: a login shell).
        ``GET /v1/envs/{name}/exec/ws`` (WebSocket) -> :class:`~paddock.pty.PtySession`"""
        from .pty import PtySession
        spec = {}
        if cmd is not None:
            spec["cmd"] = _cmd(cmd)
        e = dict(env or {})
        if term and "TERM" not in e:
            e["TERM"] = term
        if e:
            spec["env"] = {str(k): str(v) for k, v in e.items()}
        if cwd is not None:
            spec["cwd"] = cwd
        if user is not None:
            spec["user"] = str(user)
        if timeout is not None:
            spec["timeout"] = timeout
        if cols is not None and rows is not None:
            spec["cols"], spec["rows"] = int(cols), int(rows)
        path = self._path("/exec/ws") + "?spec=" + urllib.parse.quote(
            json.dumps(spec, separators=(",", ":")), safe="")
        return PtySession(self._t, path)


class OutputStream:
    """Iterator of ``(stream, bytes)`` chunks of an exec stream or a process's output; after
    the end, ``result`` (an :class:`ExecResult` without output) holds the exit status, or is
    ``None`` when the process still runs (output read without follow)."""

    def __init__(self, stream, cmd=None):
        self._s = stream
        self._cmd = cmd
        self._it = self._gen()
        self.result = None

    def _gen(self):
        try:
            for j in self._s.lines():
                for key in ("stdout", "stderr"):
                    if key in j:
                        yield key, _decode(j[key], j.get("encoding") == "base64")
                        break
                else:
                    if "exit_code" in j:
                        self.result = ExecResult(b"", b"", j.get("exit_code"),
                                                 j.get("duration_ms"), bool(j.get("timed_out")),
                                                 bool(j.get("truncated")), self._cmd)
                    elif "error" in j:
                        e = j["error"] or {}
                        raise errors.error_for(None, e.get("code"), e.get("message"))
        finally:
            self._s.close()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    def close(self):
        self._s.close()
        self._it.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Process(Record):
    """A background process: ``id``, ``cmd``, ``state`` (``running`` or ``exited``),
    ``exit_code``, ``started_at``, ``finished_at``, ``timed_out``, ``dropped_bytes``.
    Its methods are those of :class:`Procs` for this id."""

    def __init__(self, procs, data):
        super().__init__(data)
        self._procs = procs

    @property
    def id(self):
        return self.data["id"]

    @property
    def running(self):
        return self.data.get("state") == "running"

    def refresh(self):
        self.data = self._procs.get(self.id).data
        return self

    def logs(self):
        return self._procs.logs(self.id)

    def stream(self, follow=True):
        return self._procs.stream(self.id, follow=follow)

    def wait(self, timeout=None):
        return self._procs.wait(self.id, timeout=timeout)

    def kill(self, signal="TERM"):
        self.data = self._procs.kill(self.id, signal).data
        return self

    def remove(self):
        self._procs.remove(self.id)


class Procs:
    """Background processes of an environment (``env.procs``)."""

    def __init__(self, env):
        self._env = env
        self._t = env._t

    def _path(self, suffix=""):
        return self._env._path("/processes" + suffix)

    def start(self, cmd, stdin=None, env=None, cwd=None, user=None, timeout=None,
              max_output=None):
        """Start ``cmd`` in the background; returns at once with its :class:`Process`.
        ``POST /v1/envs/{name}/exec`` with ``"detach":true``"""
        spec = _exec_spec(cmd, env, cwd, user, timeout, max_output)
        spec["detach"] = True
        kw = self._env._exec_request(spec, stdin)
        return Process(self, self._t.json("POST", self._env._path("/exec"), **kw))

    def list(self):
        """Every process record, oldest first. ``GET /v1/envs/{name}/processes``"""
        j = self._t.json("GET", self._path())
        return [Process(self, p) for p in j.get("processes", [])]

    def get(self, pid):
        """``GET /v1/envs/{name}/processes/{id}``"""
        return Process(self, self._t.json("GET", self._path("/%d" % int(pid))))

    def logs(self, pid):
        """Its output so far (the newest 1 MiB) as an :class:`ExecResult`; ``exit_code`` is
        ``None`` while it runs. ``GET /v1/envs/{name}/processes/{id}/output``"""
        out, err = [], []
        s = self.stream(pid, follow=False)
        for which, chunk in s:
            (out if which == "stdout" else err).append(chunk)
        r = s.result or ExecResult()
        r.stdout, r.stderr = b"".join(out), b"".join(err)
        return r

    def stream(self, pid, follow=True):
        """Iterate its output as ``(stream, bytes)``: what is buffered, then (``follow``) new
        output live until it exits; ``.result`` then holds the exit status.
        ``GET /v1/envs/{name}/processes/{id}/output?follow=1``"""
        s = self._t.request("GET", self._path("/%d/output" % int(pid)),
                            query={"follow": "1" if follow else None}, stream=True,
                            timeout=None if follow else self._t.timeout)
        return OutputStream(s)

    def wait(self, pid, timeout=None):
        """Wait until it exits -> :class:`ExecResult` without output (``exit_code``,
        ``duration_ms``, ``timed_out``). ``timeout`` (seconds) bounds the wait here (raises
        :class:`paddock.ConnectionError` when it passes). ``POST /v1/envs/{name}/processes/{id}/wait``"""
        j = self._t.json("POST", self._path("/%d/wait" % int(pid)), timeout=timeout)
        return ExecResult(b"", b"", j.get("exit_code"), j.get("duration_ms"),
                          bool(j.get("timed_out")), bool(j.get("truncated")))

    def kill(self, pid, signal="TERM"):
        """Send a signal (``TERM``, ``KILL``, ``INT``, ... or a number).
        ``POST /v1/envs/{name}/processes/{id}/signal`` -> :class:`Process`"""
        return Process(self, self._t.json("POST", self._path("/%d/signal" % int(pid)),
                                          json_body={"signal": signal}))

    def remove(self, pid):
        """Forget a finished process. ``DELETE /v1/envs/{name}/processes/{id}``"""
        self._t.json("DELETE", self._path("/%d" % int(pid)))


class Watch:
    """Iterator of :class:`WatchEvent` (keep-alive lines are skipped). Ends when the directory
    is removed or the environment stops; ``close()`` (or ``with``) ends the watch."""

    def __init__(self, stream, kind=WatchEvent):
        self._s = stream
        self._it = (kind(j) for j in stream.lines())

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    def close(self):
        self._s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _NoChownTarFile(tarfile.TarFile):
    """Extraction keeps the caller's ownership (like tar --no-same-owner)."""

    def chown(self, *a, **kw):
        pass


def _inside(base, target):
    base = os.path.realpath(base)
    t = os.path.realpath(target)
    return t == base or t.startswith(base + os.sep)


class Files:
    """Files of an environment (``env.files``). Paths are absolute paths inside it."""

    def __init__(self, env):
        self._env = env
        self._t = env._t

    def _path(self, suffix=""):
        return self._env._path("/files" + suffix)

    def read(self, path, max=None):
        """The file's bytes. ``GET /v1/envs/{name}/files?path=``"""
        return self._t.request("GET", self._path(), query={"path": path, "max": max})[2]

    def read_text(self, path, encoding="utf-8"):
        """``read`` decoded. ``GET /v1/envs/{name}/files?path=``"""
        return self.read(path).decode(encoding)

    def write(self, path, data, mode=None, parents=True, user=None):
        """Replace (or create) a file with ``data`` (bytes, str or a binary file), atomically.
        ``PUT /v1/envs/{name}/files?path=&mode=&parents=&user=``"""
        headers = {"Content-Type": "application/octet-stream"}
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif hasattr(data, "read"):
            try:
                headers["Content-Length"] = str(os.fstat(data.fileno()).st_size - data.tell())
            except (OSError, AttributeError, io.UnsupportedOperation):
                pass  # sent chunked
        elif not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data: bytes, str or a binary file")
        return self._t.json("PUT", self._path(), body=data, headers=headers,
                            query={"path": path, "mode": _mode(mode), "parents": parents,
                                   "user": user}, timeout=max(self._t.timeout or 0, 600))

    def list(self, path):
        """The entries of a directory, sorted by name, as :class:`FileInfo`.
        ``GET /v1/envs/{name}/files/list?path=``"""
        j = self._t.json("GET", self._path("/list"), query={"path": path})
        out = []
        for e in j.get("entries", []):
            if e.get("encoding") == "base64":
                e = dict(e, name=base64.b64decode(e["name"]).decode("utf-8", "surrogateescape"))
            out.append(FileInfo(e))
        return out

    def stat(self, path):
        """:class:`FileInfo` of ``path`` (a symlink is described, not followed).
        ``GET /v1/envs/{name}/files/stat?path=``"""
        return FileInfo(self._t.json("GET", self._path("/stat"), query={"path": path}))

    def exists(self, path):
        """Whether ``path`` exists. ``GET /v1/envs/{name}/files/stat?path=``"""
        try:
            self.stat(path)
            return True
        except errors.NotFound:
            return False

    def remove(self, path, recursive=False):
        """``DELETE /v1/envs/{name}/files?path=&recursive=``"""
        self._t.json("DELETE", self._path(), query={"path": path,
                                                    "recursive": True if recursive else None})

    def mkdir(self, path, parents=True, mode=None, user=None):
        """``POST /v1/envs/{name}/files/mkdir?path=&parents=&mode=&user=``"""
        return self._t.json("POST", self._path("/mkdir"),
                            query={"path": path, "parents": parents, "mode": _mode(mode),
                                   "user": user})

    def move(self, src, dst, overwrite=False):
        """Rename ``src`` to ``dst`` (``overwrite`` an existing ``dst``).
        ``POST /v1/envs/{name}/files/move``"""
        return self._t.json("POST", self._path("/move"),
                            json_body={"from": src, "to": dst, "overwrite": bool(overwrite)})

    def upload(self, local_dir, remote_dir, user=None):
        """Copy the contents of the host directory ``local_dir`` into ``remote_dir`` (made with
        its parents), owned by ``user`` (default root). Symlinks stay symlinks.
        ``PUT /v1/envs/{name}/archive?path=`` with a tar of the directory ->
        ``{"path","entries","bytes"}``"""
        if not os.path.isdir(local_dir):
            raise NotADirectoryError(local_dir)

        def owner(ti):
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            return ti

        with tempfile.TemporaryFile() as f:
            with tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for entry in sorted(os.listdir(local_dir)):
                    tar.add(os.path.join(local_dir, entry), arcname=entry, filter=owner)
            f.seek(0)
            return self._t.json("PUT", self._env._path("/archive"), body=f,
                                headers={"Content-Type": "application/x-tar",
                                         "Content-Length": str(os.fstat(f.fileno()).st_size)},
                                query={"path": remote_dir, "parents": True, "user": user},
                                timeout=max(self._t.timeout or 0, 600))

    def download(self, remote_dir, local_dir):
        """Copy the contents of ``remote_dir`` into the host directory ``local_dir`` (made if
        missing). Owners are not kept; set-id bits are dropped; no member may land outside
        ``local_dir`` (also not through a symlink it brought). Returns the number of entries.
        ``GET /v1/envs/{name}/archive?path=``"""
        os.makedirs(local_dir, exist_ok=True)
        n = 0
        with self._t.request("GET", self._env._path("/archive"), query={"path": remote_dir},
                             stream=True, timeout=max(self._t.timeout or 0, 600)) as s:
            tar = _NoChownTarFile.open(fileobj=s, mode="r|")
            for m in tar:
                parts = m.name.split("/", 1)
                if len(parts) < 2 or parts[1] in ("", "."):
                    continue  # the directory itself
                rel = os.path.normpath(parts[1])
                if rel.startswith("/") or rel == ".." or rel.startswith("../"):
                    raise errors.ProtocolError("archive member outside the directory: %r"
                                               % m.name)
                if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
                    continue
                target = os.path.join(local_dir, rel)
                if not _inside(local_dir, os.path.dirname(target)):
                    raise errors.ProtocolError("archive member through a symlink: %r" % m.name)
                if m.islnk():
                    lparts = m.linkname.split("/", 1)
                    lrel = os.path.normpath(lparts[1] if len(lparts) == 2 else "")
                    if lrel.startswith("..") or lrel.startswith("/") or not _inside(
                            local_dir, os.path.join(local_dir, lrel)):
                        raise errors.ProtocolError("hard link outside the directory: %r"
                                                   % m.linkname)
                    m.linkname = lrel
                m.name = rel
                m.mode &= 0o777
                if os.path.islink(target) or (os.path.lexists(target) and
                                              not os.path.isdir(target)):
                    os.unlink(target)  # replaced, never written through
                kw = {}
                if hasattr(tarfile, "tar_filter"):
                    kw["filter"] = "tar"
                tar.extract(m, local_dir, **kw)
                n += 1
            tar.close()
        return n

    def watch(self, path, recursive=True):
        """Iterate the changes below directory ``path`` as :class:`WatchEvent`, as they happen
        (every change after this returns is reported). ``GET /v1/envs/{name}/files/watch``"""
        s = self._t.request("GET", self._path("/watch"),
                            query={"path": path, "recursive": None if recursive else "0"},
                            stream=True, timeout=max(self._t.timeout or 0, 60))
        return Watch(s)
