"""Framework-neutral tool definitions for agent frameworks.

Each :class:`Tool` has a ``name``, a ``description`` written for a model, ``parameters`` (a
JSON Schema object) and a callable. Wrap them in whatever your framework expects::

    from paddock import Paddock
    from paddock.tools import make_tools

    tools = make_tools(Paddock())
    specs = [t.spec() for t in tools]          # {"name", "description", "parameters"}
    by_name = {t.name: t for t in tools}
    result = by_name["run_command"].run({"environment": "box", "command": "ls /"})

``tool(**args)`` validates the arguments and returns a JSON-serialisable dict, raising
:class:`~paddock.PaddockError` on failure; ``tool.run(args)`` (args a dict or a JSON string)
never raises for API or argument errors: it returns ``{"error": {"code", "message"}}``
instead, which is what a model should see."""
import base64
import json

from . import errors
from .client import Paddock

DEFAULT_MAX_OUTPUT = 20000  # characters of stdout/stderr kept per stream for the model
DEFAULT_MAX_FILE = 100000   # bytes of a file returned by read_file


class Tool:
    def __init__(self, name, description, parameters, func):
        self.name = name
        self.description = description
        self.parameters = parameters
        self.func = func

    def spec(self):
        """``{"name", "description", "parameters"}``: the shape most frameworks take."""
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters}

    def __call__(self, **kwargs):
        validate(self.parameters, kwargs)
        return self.func(**kwargs)

    def invoke(self, arguments=None):
        """Call with a dict (or a JSON string) of arguments; raises on errors."""
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as e:
                raise errors.InvalidArgument("arguments are not JSON: %s" % e,
                                             code="invalid_argument") from None
        return self(**(arguments or {}))

    def run(self, arguments=None):
        """Like :meth:`invoke`, but an error becomes ``{"error": {"code", "message"}}``."""
        try:
            return self.invoke(arguments)
        except errors.PaddockError as e:
            return {"error": {"code": e.code or "error", "message": e.message}}
        except (ValueError, TypeError) as e:
            return {"error": {"code": "invalid_argument", "message": str(e)}}

    def __repr__(self):
        return "Tool(%r)" % self.name


# ----------------------------------------------------------------------------- validation

_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
          "array": list, "object": dict, "null": type(None)}


def _check(schema, value, where):
    types = schema.get("type")
    if types is not None:
        tl = types if isinstance(types, list) else [types]
        ok = False
        for t in tl:
            py = _TYPES[t]
            if isinstance(value, bool) and t in ("integer", "number"):
                continue
            if isinstance(value, py):
                ok = True
                break
        if not ok:
            raise errors.InvalidArgument("%s: expected %s, got %s" % (
                where, " or ".join(tl), type(value).__name__), code="invalid_argument")
    if "enum" in schema and value not in schema["enum"]:
        raise errors.InvalidArgument("%s: one of %s" % (where, ", ".join(map(str, schema["enum"]))),
                                     code="invalid_argument")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise errors.InvalidArgument("%s: at least %s" % (where, schema["minimum"]),
                                         code="invalid_argument")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            _check(schema["items"], v, "%s[%d]" % (where, i))
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in value:
                raise errors.InvalidArgument("%s: missing required argument %r" % (where, k),
                                             code="invalid_argument")
        for k, v in value.items():
            if k in props:
                _check(props[k], v, k if where == "arguments" else "%s.%s" % (where, k))
            elif schema.get("additionalProperties") is False:
                raise errors.InvalidArgument("unknown argument %r" % k, code="invalid_argument")
            elif isinstance(schema.get("additionalProperties"), dict):
                _check(schema["additionalProperties"], v, "%s.%s" % (where, k))


def validate(schema, args):
    """Check ``args`` against the subset of JSON Schema these tools use; raises
    :class:`~paddock.InvalidArgument` naming the argument."""
    _check(schema, args, "arguments")


# ----------------------------------------------------------------------------- helpers

def _obj(props, required=()):
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


_ENV = {"type": "string", "description": "Name of the environment."}
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_COMMAND = {"type": ["string", "array"], "items": {"type": "string"},
            "description": "A shell command line (run with sh -c), or an array of arguments "
                           "run directly."}


def _clip(text, limit):
    """(text, note) keeping the head and the tail of an overlong text."""
    if limit is None or len(text) <= limit:
        return text, None
    head = limit // 2
    tail = limit - head
    omitted = len(text) - limit
    return (text[:head] + "\n[... %d characters omitted ...]\n" % omitted + text[-tail:],
            "output was %d characters; the middle %d were omitted" % (len(text), omitted))


def _summary(env):
    d = env.data
    net = d.get("network") or {}
    return {"name": d.get("name"), "kind": d.get("kind"), "state": d.get("state"),
            "image": d.get("image"), "ip": net.get("ip"), "network_mode": net.get("mode"),
            "limits": d.get("limits"), "labels": d.get("labels"),
            "created_at": d.get("created_at"), "expires_at": d.get("expires_at")}


def _result(r, max_output):
    out, n1 = _clip(r.stdout.decode("utf-8", "replace"), max_output)
    err, n2 = _clip(r.stderr.decode("utf-8", "replace"), max_output)
    j = {"exit_code": r.exit_code, "stdout": out, "stderr": err}
    if r.duration_ms is not None:
        j["duration_ms"] = r.duration_ms
    if r.timed_out:
        j["timed_out"] = True
    notes = []
    if n1:
        notes.append("stdout: " + n1)
    if n2:
        notes.append("stderr: " + n2)
    if r.truncated:
        notes.append("the daemon cut the output at its max_output limit")
    if notes:
        j["note"] = "; ".join(notes)
    return j


# ----------------------------------------------------------------------------- the tools

def make_tools(client=None, max_output=DEFAULT_MAX_OUTPUT, prefix=""):
    """The tool list for ``client`` (default: ``Paddock()`` from the environment variables).
    ``max_output``: characters of each output stream a tool returns (the middle of longer
    output is cut, with a note); ``prefix`` is put before every tool name."""
    c = client if client is not None else Paddock()
    tools = []

    def tool(name, description, parameters):
        def deco(f):
            tools.append(Tool(prefix + name, description, parameters, f))
            return f
        return deco

    @tool("create_environment",
          "Create an isolated Linux environment and start it. A 'sandbox' is throw-away and "
          "locked down (writable only below /tmp and /workspace, no network by default, "
          "destroyed after its TTL, 1 hour by default); a 'computer' is a persistent machine "
          "with its own writable disk and internet access by default, and supports snapshots "
          "and forks. Returns the environment's name, state and limits.",
          _obj({"name": {"type": "string", "description": "Name (letters, digits, '-', '_', "
                         "'.'; at most 63). A random name when left out."},
                "kind": {"type": "string", "enum": ["sandbox", "computer"],
                         "description": "Default: sandbox."},
                "image": {"type": "string", "description": "Image name; default: the "
                          "daemon's default image."},
                "cpus": {"type": "number", "minimum": 0.01, "description": "CPU limit."},
                "memory": {"type": "string", "description": "Memory limit such as '512M'."},
                "disk": {"type": "string", "description": "Disk limit such as '2G'."},
                "ttl": {"type": "string", "description": "Lifetime such as '30m'; '0': "
                        "none."},
                "network": {"type": "string", "enum": ["none", "open", "allow"],
                            "description": "Egress policy: none (loopback only), open "
                            "(internet, never private ranges), allow (only 'allow')."},
                "allow": {"type": "array", "items": {"type": "string"},
                          "description": "Allowed destinations: host[:port], *.domain, "
                          "CIDR[:port]."},
                "env": dict(_STR_MAP, description="Environment variables of every process."),
                "labels": dict(_STR_MAP, description="Labels to find it by.")}))
    def create_environment(name=None, kind="sandbox", image=None, cpus=None, memory=None,
                           disk=None, ttl=None, network=None, allow=None, env=None,
                           labels=None):
        kw = {}
        for k, v in (("cpus", cpus), ("memory", memory), ("disk", disk), ("ttl", ttl)):
            if v is not None:
                kw[k] = v
        return _summary(c.envs.create(name, kind=kind, image=image, network=network,
                                      allow=allow, env=env, labels=labels, **kw))

    @tool("run_command",
          "Run a command in an environment and wait for it. Returns exit_code, stdout and "
          "stderr (very long output is shortened in the middle, with a note). A command "
          "still running after 'timeout' seconds is killed with everything it started and "
          "the result has timed_out: true. Use start_process for servers and long jobs.",
          _obj({"environment": _ENV, "command": _COMMAND,
                "timeout": {"type": "number", "minimum": 0.001,
                            "description": "Seconds; default 120."},
                "cwd": {"type": "string", "description": "Working directory."},
                "user": {"type": "string", "description": "User name or uid[:gid]; default "
                         "root."},
                "env": dict(_STR_MAP, description="Extra environment variables."),
                "stdin": {"type": "string", "description": "Text fed to standard input."}},
               ["environment", "command"]))
    def run_command(environment, command, timeout=120, cwd=None, user=None, env=None,
                    stdin=None):
        e = _env(c, environment)
        try:
            r = e.exec(command, stdin=stdin, env=env, cwd=cwd, user=user, timeout=timeout)
        except errors.CommandTimeout as t:
            r = t.result
        return _result(r, max_output)

    @tool("start_process",
          "Start a command in the background (a server, a long build) and return at once "
          "with its process id. Read its output later with read_process_output.",
          _obj({"environment": _ENV, "command": _COMMAND,
                "cwd": {"type": "string"}, "user": {"type": "string"},
                "env": dict(_STR_MAP, description="Extra environment variables."),
                "timeout": {"type": "number", "minimum": 0.001,
                            "description": "Kill it after this many seconds; default never."}},
               ["environment", "command"]))
    def start_process(environment, command, cwd=None, user=None, env=None, timeout=None):
        p = _env(c, environment).procs.start(command, cwd=cwd, user=user, env=env,
                                            timeout=timeout)
        return {"id": p.id, "state": p.state, "cmd": p.cmd}

    @tool("read_process_output",
          "Read the output of a background process so far (the newest 1 MiB is kept), its "
          "state (running or exited) and exit code. With wait_seconds, first wait up to that "
          "long for it to exit.",
          _obj({"environment": _ENV,
                "id": {"type": "integer", "minimum": 1, "description": "The process id."},
                "wait_seconds": {"type": "number", "minimum": 0}},
               ["environment", "id"]))
    def read_process_output(environment, id, wait_seconds=0):
        e = _env(c, environment)
        if wait_seconds:
            try:
                e.procs.wait(id, timeout=wait_seconds)
            except errors.ConnectionError:
                pass  # still running after wait_seconds
        r = e.procs.logs(id)
        j = _result(r, max_output)
        j["state"] = "running" if r.exit_code is None else "exited"
        j["id"] = id
        return j

    @tool("read_file",
          "Read a file of an environment. Text comes back as 'content' with encoding utf-8; "
          "other bytes as base64. Files larger than max_bytes are cut (truncated: true).",
          _obj({"environment": _ENV,
                "path": {"type": "string", "description": "Absolute path inside."},
                "max_bytes": {"type": "integer", "minimum": 1,
                              "description": "Default %d." % DEFAULT_MAX_FILE}},
               ["environment", "path"]))
    def read_file(environment, path, max_bytes=DEFAULT_MAX_FILE):
        e = _env(c, environment)
        try:
            data = e.files.read(path)
        except errors.TooLarge:
            r = e.exec(["head", "-c", str(max_bytes), path])
            data = r.stdout + b"\0"  # marks it as longer than max_bytes
        truncated = len(data) > max_bytes
        data = data[:max_bytes]
        try:
            content, enc = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            content, enc = base64.b64encode(data).decode(), "base64"
        return {"path": path, "content": content, "encoding": enc, "truncated": truncated}

    @tool("write_file",
          "Create or replace a file in an environment (parent directories are made). "
          "content is text, or base64 when encoding is 'base64'.",
          _obj({"environment": _ENV, "path": {"type": "string"},
                "content": {"type": "string"},
                "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
                "mode": {"type": "string", "description": "Octal permissions such as '0755'."}},
               ["environment", "path", "content"]))
    def write_file(environment, path, content, encoding="utf-8", mode=None):
        if encoding == "base64":
            try:
                data = base64.b64decode(content, validate=True)
            except ValueError:
                raise errors.InvalidArgument("content: not base64",
                                             code="invalid_argument") from None
        else:
            data = content.encode("utf-8")
        return _env(c, environment).files.write(path, data, mode=mode)

    @tool("list_files",
          "List a directory of an environment: name, type (file, dir, symlink, other), size "
          "and modification time of each entry.",
          _obj({"environment": _ENV, "path": {"type": "string"}}, ["environment", "path"]))
    def list_files(environment, path):
        ents = _env(c, environment).files.list(path)
        return {"path": path, "entries": [{"name": x.name, "type": x.type, "size": x.size,
                                           "mtime": x.mtime} for x in ents]}

    @tool("snapshot_environment",
          "Take a snapshot of a computer's disk (copy-on-write, milliseconds) to fork from or "
          "restore later. Sandboxes cannot be snapshotted.",
          _obj({"environment": _ENV, "name": {"type": "string",
                                               "description": "Default: a dated name."}},
               ["environment"]))
    def snapshot_environment(environment, name=None):
        return _env(c, environment).snapshot(name).data

    @tool("fork_environment",
          "Make a new running computer from a copy of a computer's disk (as it is now, or as "
          "in one of its snapshots), with the same image, limits and network policy. Use it "
          "to try something risky on a copy.",
          _obj({"environment": _ENV, "new_name": {"type": "string"},
                "snapshot": {"type": "string"}}, ["environment", "new_name"]))
    def fork_environment(environment, new_name, snapshot=None):
        return _summary(_env(c, environment).fork(new_name, snapshot=snapshot))

    @tool("destroy_environment",
          "Destroy an environment and everything in it (also when it is running).",
          _obj({"environment": _ENV}, ["environment"]))
    def destroy_environment(environment):
        _env(c, environment).destroy(force=True)
        return {"destroyed": environment}

    @tool("list_environments",
          "List the environments: name, kind, state, image, address, limits.",
          _obj({"label": {"type": "string", "description": "Only those with label k=v."}}))
    def list_environments(label=None):
        return {"environments": [_summary(e) for e in c.envs.list(label=label)]}

    @tool("set_network_policy",
          "Change what an environment may reach, at once: mode none (loopback only), open "
          "(the internet, never private ranges or the host) or allow (only the 'allow' list: "
          "host[:port], *.domain, CIDR[:port]); links name environments it may talk to.",
          _obj({"environment": _ENV,
                "mode": {"type": "string", "enum": ["none", "open", "allow"]},
                "allow": {"type": "array", "items": {"type": "string"}},
                "links": {"type": "array", "items": {"type": "string"}}},
               ["environment"]))
    def set_network_policy(environment, mode=None, allow=None, links=None):
        e = _env(c, environment).network(mode=mode, allow=allow, links=links)
        n = e.network_policy
        return {"name": e.name, "network": {"mode": n.get("mode"), "allow": n.get("allow"),
                                            "links": n.get("links")}}

    return tools


def _env(client, name):
    """An Env handle without a request (the tool's own request finds out if it exists)."""
    from .env import Env
    return Env(client, {"name": name})


def get_tool(tools, name):
    for t in tools:
        if t.name == name:
            return t
    raise KeyError(name)
