"""Value objects returned by the SDK: results of exec, processes, file information, watch
events, snapshots. Each keeps the daemon's JSON object in ``.data``."""
import base64


def _decode(s, b64):
    if s is None:
        return b""
    if b64:
        return base64.b64decode(s)
    return s.encode("utf-8")


class ExecResult:
    """The outcome of a command: ``stdout`` and ``stderr`` (bytes), ``exit_code`` (128+N when
    killed by signal N; ``None`` for a process that still runs), ``duration_ms``, ``timed_out``,
    ``truncated``. ``text`` / ``stderr_text`` are the outputs decoded as UTF-8."""

    def __init__(self, stdout=b"", stderr=b"", exit_code=None, duration_ms=None,
                 timed_out=False, truncated=False, cmd=None):
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code
        self.duration_ms = duration_ms
        self.timed_out = timed_out
        self.truncated = truncated
        self.cmd = cmd

    @classmethod
    def from_json(cls, j, cmd=None):
        b64 = j.get("encoding") == "base64"
        return cls(_decode(j.get("stdout"), b64), _decode(j.get("stderr"), b64),
                   j.get("exit_code"), j.get("duration_ms"), bool(j.get("timed_out")),
                   bool(j.get("truncated")), cmd)

    @property
    def text(self):
        """stdout decoded as UTF-8 (undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self):
        return self.stderr.decode("utf-8", "replace")

    @property
    def ok(self):
        return self.exit_code == 0 and not self.timed_out

    def check(self):
        """Return self when the command exited 0, else raise :class:`CommandFailed`."""
        if not self.ok:
            raise CommandFailed(self)
        return self

    def __repr__(self):
        return "ExecResult(exit_code=%r, stdout=%r, stderr=%r%s)" % (
            self.exit_code, self.stdout[:200], self.stderr[:200],
            ", timed_out=True" if self.timed_out else "")


class CommandFailed(Exception):
    """Raised by :meth:`ExecResult.check` for a non-zero exit (not an API error)."""

    def __init__(self, result):
        super().__init__("command %r exited %s: %s" % (
            result.cmd, result.exit_code, result.stderr_text.strip()[-500:]))
        self.result = result


class Record:
    """A JSON object with attribute access: ``rec.name`` is ``rec.data["name"]``."""

    def __init__(self, data):
        self.data = data

    def __getattr__(self, k):
        try:
            return self.__dict__["data"][k]
        except KeyError:
            raise AttributeError(k) from None

    def __getitem__(self, k):
        return self.data[k]

    def get(self, k, default=None):
        return self.data.get(k, default)

    def __eq__(self, other):
        return isinstance(other, Record) and type(other) is type(self) and other.data == self.data

    def __repr__(self):
        return "%s(%r)" % (type(self).__name__, self.data)


class FileInfo(Record):
    """An entry of ``files.list`` or the answer of ``files.stat``: ``name`` (list) or ``path``
    (stat), ``type`` (``file``, ``dir``, ``symlink``, ``other``), ``size``, ``mode`` (permission
    bits, int), ``mtime``; stat adds ``uid``, ``gid`` and ``target`` for a symlink."""

    @property
    def is_dir(self):
        return self.data.get("type") == "dir"

    @property
    def is_file(self):
        return self.data.get("type") == "file"


class WatchEvent(Record):
    """One change below a watched directory: ``path``, ``event`` (``create``, ``modify``,
    ``delete``, ``move_from``, ``move_to``, ``attrib``, or ``overflow`` when events were lost)
    and ``type`` (``file`` or ``dir``)."""

    def __init__(self, data):
        if data.get("encoding") == "base64" and "path" in data:
            data = dict(data)
            data["path"] = base64.b64decode(data["path"]).decode("utf-8", "surrogateescape")
        super().__init__(data)

    @property
    def path(self):
        return self.data.get("path")

    @property
    def type(self):
        return self.data.get("type")


class Snapshot(Record):
    """A snapshot of a computer: ``name``, ``created_at``."""
