"""The client: where the daemon is, and the environment collection."""
import os
import uuid

from . import errors
from ._transport import DEFAULT_SOCKET, Transport, _UNSET
from .env import Env, _q
from .results import Record

__version__ = "0.1.0"


class Paddock:
    """A connection to paddockd.

    - ``host``: ``https://HOST:PORT`` of the gateway (default ``$PADDOCK_HOST``). Without a
      host, the local unix socket ``socket`` (default ``$PADDOCK_SOCKET``, else
      ``/run/paddock/paddock.sock``).
    - ``token``: sent as ``Authorization: Bearer`` (default ``$PADDOCK_TOKEN``); on the unix
      socket a token makes the request act as that token.
    - ``fingerprint``: pin the server certificate's SHA-256 (``"sha256:AB:CD:..."``, default
      ``$PADDOCK_FINGERPRINT``); ``ca``: a CA file (default ``$PADDOCK_CA``). With neither,
      the system's CAs verify the server. Verification is never skipped.
    - ``timeout``: seconds to wait for an answer (commands with their own timeout and
      streams wait as long as they need).

    ``client.envs`` creates, finds and lists environments. A client may be shared by threads
    (each thread keeps its own connection). ``close()`` (or ``with``) closes the connections."""

    def __init__(self, host=None, token=None, socket=None, fingerprint=None, ca=None,
                 timeout=120.0):
        env = os.environ
        if host is None and socket is None:
            host = env.get("PADDOCK_HOST") or None
        if host is not None and socket is not None:
            raise ValueError("give either host or socket, not both")
        if token is None:
            token = env.get("PADDOCK_TOKEN") or None
        if host:
            if fingerprint is None:
                fingerprint = env.get("PADDOCK_FINGERPRINT") or None
            if ca is None:
                ca = env.get("PADDOCK_CA") or None
        elif socket is None:
            socket = env.get("PADDOCK_SOCKET") or DEFAULT_SOCKET
        self._transport = Transport(host=host, token=token, socket_path=socket,
                                    fingerprint=fingerprint, ca=ca, timeout=timeout,
                                    version=__version__)
        self.envs = Envs(self)
        self.tokens = Tokens(self)

    @property
    def where(self):
        """``unix:/path`` or ``https://host:port``."""
        return self._transport.where

    def system(self):
        """Version, cgroup mode, storage, counts. ``GET /v1/system``"""
        return self._transport.json("GET", "/v1/system")

    def images(self):
        """The images (name, size, created_at, used_by). ``GET /v1/images``"""
        return self._transport.json("GET", "/v1/images").get("images", [])

    def events(self, env=None, types=None):
        """Lifecycle events as they happen (nothing is replayed): an iterator of
        :class:`Event` (``time``, ``type``, ``env`` and the type's fields), optionally only of
        one environment and of some types (a list or ``"a,b"``). Ends on ``close()`` (or
        ``with``), or after an ``overflow`` event when it fell behind.
        ``GET /v1/events?env=&type=``"""
        from .env import Watch
        if isinstance(types, (list, tuple)):
            types = ",".join(types)
        s = self._transport.request("GET", "/v1/events", query={"env": env, "type": types},
                                    stream=True, timeout=None)
        return Watch(s, Event)

    def audit(self, env=None, token=None, since=None, limit=None):
        """Records of the audit log, oldest first (dicts: ``time``, ``token``, ``action``,
        ``env``, ``status``, ...). ``since``: a duration back from now or an RFC 3339 time;
        ``token=""``: the local administrator. ``GET /v1/audit``"""
        j = self._transport.json("GET", "/v1/audit", query={"env": env, "token": token,
                                                            "since": since, "limit": limit})
        return j.get("records", [])

    def metrics(self):
        """The Prometheus text exposition. ``GET /metrics``"""
        return self._transport.request("GET", "/metrics")[2].decode("utf-8")

    def close(self):
        self._transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "Paddock(%r)" % self.where


class Envs:
    """The environments (``client.envs``)."""

    def __init__(self, client):
        self._client = client
        self._t = client._transport

    def create(self, name=None, kind="sandbox", image=None, cpus=_UNSET, memory=_UNSET,
               swap=_UNSET, pids=_UNSET, disk=_UNSET, ttl=_UNSET, network=None, allow=None,
               links=None, bandwidth=None, env=None, labels=None, autostart=None):
        """Create an environment and start it -> :class:`Env`.

        ``name`` (default: ``sdk-`` and 12 random hex digits); ``kind`` ``"sandbox"`` or
        ``"computer"``; ``image`` (default: the daemon's default image); limits ``cpus``
        (number), ``memory``/``swap``/``disk`` (bytes or ``"512M"``), ``pids`` (``None``: no
        limit; left out: the kind's default); ``ttl`` (seconds or ``"10m"``; ``0``: none);
        ``network``: a mode (``"none"``, ``"open"``, ``"allow"``) or the whole network object,
        with ``allow``/``links``/``bandwidth`` as shortcuts into it; ``env`` variables of every
        process; ``labels``; ``autostart``. ``POST /v1/envs``"""
        body = {"name": name or "sdk-" + uuid.uuid4().hex[:12]}
        if kind is not None:
            body["kind"] = kind
        if image is not None:
            body["image"] = image
        for k, v in (("cpus", cpus), ("memory", memory), ("swap", swap), ("pids", pids),
                     ("disk", disk), ("ttl", ttl)):
            if v is not _UNSET:
                body[k] = v
        net = {"mode": network} if isinstance(network, str) else dict(network or {})
        if allow is not None:
            net["allow"] = list(allow)
        if links is not None:
            net["links"] = list(links)
        if bandwidth is not None:
            net["bandwidth"] = bandwidth
        if net:
            body["network"] = net
        if env is not None:
            body["env"] = {str(k): str(v) for k, v in env.items()}
        if labels is not None:
            body["labels"] = {str(k): str(v) for k, v in labels.items()}
        if autostart is not None:
            body["autostart"] = bool(autostart)
        return Env(self._client, self._t.json("POST", "/v1/envs", json_body=body,
                                              timeout=max(self._t.timeout or 0, 300)))

    def get(self, name):
        """The environment called ``name`` (:class:`NotFound` if none).
        ``GET /v1/envs/{name}``"""
        return Env(self._client, self._t.json("GET", "/v1/envs/" + _q(name)))

    def list(self, label=None):
        """Every environment (the caller may see), optionally only those with every label of
        ``label`` (a dict, ``"k=v"`` or a list of ``"k=v"``). ``GET /v1/envs?label=k=v``"""
        if isinstance(label, dict):
            label = ["%s=%s" % kv for kv in label.items()]
        elif isinstance(label, str):
            label = [label]
        j = self._t.json("GET", "/v1/envs", query={"label": label} if label else None)
        return [Env(self._client, e) for e in j.get("envs", [])]

    def __iter__(self):
        return iter(self.list())

    def __contains__(self, name):
        try:
            self.get(name)
            return True
        except errors.NotFound:
            return False


class Event(Record):
    """A lifecycle event: ``time``, ``type`` (``created``, ``started``, ``stopped``, ``exec_exited``,
    ...), ``env``, and the fields of its type."""

    @property
    def type(self):
        return self.data.get("type")

    @property
    def env(self):
        return self.data.get("env")


class Tokens:
    """API tokens (``client.tokens``); administrators only."""

    def __init__(self, client):
        self._t = client._transport

    def create(self, name, admin=False, max_envs=None, max_cpus=None, max_memory=None,
               max_disk=None, rate=None, expires=None):
        """Make a token -> the token object (a dict) with ``"secret"``, shown only this once.
        Quotas left out (or ``None``) are unlimited; ``rate`` requests per second (a number or
        ``"10/s"``); ``expires`` a duration from now. ``POST /v1/tokens``"""
        body = {"name": name, "admin": bool(admin)}
        for k, v in (("max_envs", max_envs), ("max_cpus", max_cpus),
                     ("max_memory", max_memory), ("max_disk", max_disk), ("rate", rate),
                     ("expires", expires)):
            if v is not None:
                body[k] = v
        return self._t.json("POST", "/v1/tokens", json_body=body)

    def list(self):
        """The token objects (never their secrets), in name order. ``GET /v1/tokens``"""
        return self._t.json("GET", "/v1/tokens").get("tokens", [])

    def remove(self, name):
        """Revoke a token at once (its open sessions end). ``DELETE /v1/tokens/{name}``"""
        self._t.json("DELETE", "/v1/tokens/" + _q(name))
