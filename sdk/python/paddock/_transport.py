"""HTTP/1.1 to paddockd: over its unix socket, or over HTTPS (the gateway) with a bearer token.

One kept-alive connection per thread (``threading.local``), so a client object can be shared
by threads. Streaming answers (exec streams, process output, watch, archives) get a connection
of their own that is closed when the stream is."""
import hashlib
import hmac
import http.client
import json
import socket
import ssl
import threading
import urllib.parse
import weakref

from . import errors

DEFAULT_SOCKET = "/run/paddock/paddock.sock"
USER_AGENT = "paddock-python/%s"

_UNSET = object()
# "No timeout" is a week: a socket in timeout mode (poll, then read) answered ~0.1 ms sooner
# per exec than a blocking one in bench/sdk_python.py on the build machine.
FOREVER = 7 * 86400.0


def parse_fingerprint(fp):
    """``sha256:AB:CD:..`` (the prefix, colons and case are optional) -> 32 bytes."""
    s = fp.strip()
    if s.lower().startswith("sha256:"):
        s = s[7:]
    elif ":" in s and s.split(":", 1)[0].isalpha() and len(s.split(":", 1)[0]) > 2:
        raise ValueError("fingerprint: only sha256 fingerprints are supported: %r" % fp)
    s = s.replace(":", "").replace(" ", "")
    try:
        b = bytes.fromhex(s)
    except ValueError:
        raise ValueError("fingerprint: not hex: %r" % fp) from None
    if len(b) != 32:
        raise ValueError("fingerprint: a SHA-256 fingerprint has 32 bytes, got %d" % len(b))
    return b


def format_fingerprint(digest):
    return "sha256:" + ":".join("%02X" % x for x in digest)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=None):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self.unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class _TLSConnection(http.client.HTTPConnection):
    """HTTPS with either normal certificate verification (system CAs or a CA file) or a pinned
    SHA-256 fingerprint of the server's certificate, checked before any byte of the request
    is sent."""

    default_port = 443

    def __init__(self, host, port, timeout, context, pin):
        super().__init__(host, port, timeout=timeout)
        self._context = context
        self._pin = pin

    def connect(self):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        try:
            ss = self._context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        if self._pin is not None:
            der = ss.getpeercert(binary_form=True)
            got = hashlib.sha256(der or b"").digest()
            if not hmac.compare_digest(got, self._pin):
                ss.close()
                raise errors.ConnectionError(
                    "the server's certificate %s does not match the pinned fingerprint %s"
                    % (format_fingerprint(got), format_fingerprint(self._pin)), code="tls")
        self.sock = ss


def _is_retryable(exc):
    return isinstance(exc, (http.client.RemoteDisconnected, BrokenPipeError,
                            ConnectionResetError, ConnectionAbortedError))


class Stream:
    """A streaming answer on a connection of its own. Iterate ``lines()`` for NDJSON, or use
    ``read(n)``; ``close()`` (or the ``with`` block) drops the connection."""

    def __init__(self, conn, resp, method, path):
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        self.headers = resp.headers
        self._where = (method, path)
        self.closed = False

    def read(self, n=-1):
        try:
            return self.resp.read(n) if n is not None and n >= 0 else self.resp.read()
        except http.client.IncompleteRead as e:
            raise errors.ProtocolError("the stream was cut off: %s" % e,
                                       method=self._where[0], path=self._where[1]) from None
        except (OSError, http.client.HTTPException) as e:
            if self.closed:
                return b""
            raise errors.ConnectionError("reading the stream: %s" % e, method=self._where[0],
                                         path=self._where[1]) from None

    def readinto(self, b):
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def lines(self):
        """Yield each JSON object of an NDJSON body; empty lines (keep-alives) are skipped.
        Ends when the server ends the stream."""
        while True:
            try:
                line = self.resp.readline()
            except http.client.IncompleteRead as e:
                raise errors.ProtocolError("the stream was cut off: %s" % e,
                                           method=self._where[0], path=self._where[1]) from None
            except (OSError, ValueError, http.client.HTTPException) as e:
                if self.closed:
                    return
                raise errors.ConnectionError("reading the stream: %s" % e,
                                             method=self._where[0], path=self._where[1]) from None
            if not line:
                return
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except ValueError:
                raise errors.ProtocolError("not a JSON line: %r" % line[:200],
                                           method=self._where[0], path=self._where[1]) from None

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                sock = self.conn.sock
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Transport:
    """Where and how to reach the daemon. ``request()`` is one HTTP exchange."""

    def __init__(self, host=None, token=None, socket_path=None, fingerprint=None, ca=None,
                 timeout=120.0, version="0"):
        self.token = token
        self.timeout = timeout
        self.user_agent = USER_AGENT % version
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all = weakref.WeakSet()
        self.pin = None
        self.context = None
        if host:
            u = urllib.parse.urlsplit(host if "://" in host else "https://" + host)
            if u.scheme not in ("https", "http"):
                raise ValueError("host: only https://HOST[:PORT] (or http:// to a local proxy)")
            if not u.hostname:
                raise ValueError("host: no host name in %r" % host)
            self.scheme = u.scheme
            self.host = u.hostname
            self.port = u.port or (443 if u.scheme == "https" else 80)
            self.socket_path = None
            if u.scheme == "https":
                if fingerprint:
                    self.pin = parse_fingerprint(fingerprint)
                    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                    # The pin replaces the CA check: the certificate must be exactly this one.
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                else:
                    ctx = ssl.create_default_context(cafile=ca)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                self.context = ctx
            elif fingerprint or ca:
                raise ValueError("fingerprint/ca need an https:// host")
            self.where = "%s://%s:%d" % (self.scheme, self.host, self.port)
        else:
            self.scheme = "unix"
            self.socket_path = socket_path or DEFAULT_SOCKET
            self.where = "unix:" + self.socket_path

    # ---- connections

    def new_connection(self, timeout):
        if self.scheme == "unix":
            c = _UnixConnection(self.socket_path, timeout=timeout)
        elif self.scheme == "https":
            c = _TLSConnection(self.host, self.port, timeout, self.context, self.pin)
        else:
            c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        with self._lock:
            self._all.add(c)
        return c

    def connect_socket(self, timeout):
        """A connected (and, over https, verified) socket for a protocol of our own (WebSocket)."""
        c = self.new_connection(timeout)
        try:
            c.connect()
        except errors.PaddockError:
            raise
        except (OSError, ssl.SSLError) as e:
            raise errors.ConnectionError("cannot connect to %s: %s" % (self.where, e)) from None
        s = c.sock
        c.sock = None
        return s

    def _thread_conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            c = self.new_connection(self.timeout)
            self._local.conn = c
            self._local.used = 0
        return c

    def _drop_thread_conn(self):
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
        self._local.conn = None

    def close(self):
        """Close every connection this transport opened (in any thread)."""
        with self._lock:
            conns = list(self._all)
        for c in conns:
            try:
                c.close()
            except Exception:
                pass
        self._local.conn = None

    def headers(self, extra=None):
        h = {"User-Agent": self.user_agent}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if extra:
            h.update(extra)
        return h

    # ---- one exchange

    def request(self, method, path, query=None, json_body=_UNSET, body=None, headers=None,
                timeout=_UNSET, stream=False, ok=(200, 201)):
        """Send one request. Returns ``(status, headers, bytes)``, or a :class:`Stream` when
        ``stream``. Error answers raise the matching :class:`~paddock.PaddockError`."""
        url = path
        if query:
            q = [(k, v) for k, v in _query_items(query)]
            if q:
                url += "?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
        h = self.headers(headers)
        data = body
        if json_body is not _UNSET:
            data = json.dumps(json_body, separators=(",", ":")).encode()
            h.setdefault("Content-Type", "application/json")
        if isinstance(data, str):
            data = data.encode()
        to = self.timeout if timeout is _UNSET else timeout
        if to is None:
            to = FOREVER
        resendable = data is None or isinstance(data, (bytes, bytearray, memoryview))

        for attempt in (0, 1):
            if stream:
                conn, reused = self.new_connection(to), False
            else:
                conn = self._thread_conn()
                reused = self._local.used > 0
                conn.timeout = to
                if conn.sock is not None:
                    conn.sock.settimeout(to)
            try:
                conn.request(method, url, body=data, headers=h)
                resp = conn.getresponse()
            except errors.PaddockError:
                self._forget(conn, stream)
                raise
            except (OSError, http.client.HTTPException, ssl.SSLError) as e:
                self._forget(conn, stream)
                if attempt == 0 and reused and resendable and _is_retryable(e):
                    continue  # the server closed an idle kept-alive connection: once more
                if isinstance(e, socket.timeout):
                    raise errors.ConnectionError("%s %s: no answer from %s within %ss"
                                                 % (method, path, self.where, to),
                                                 method=method, path=path) from None
                raise errors.ConnectionError("%s %s: cannot talk to paddockd at %s: %s"
                                             % (method, path, self.where, e),
                                             method=method, path=path) from None
            break
        if not stream:
            self._local.used += 1

        if resp.status not in ok:
            try:
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            if stream or resp.will_close:
                self._forget(conn, stream)
            raise _error_from(resp, raw, method, path)
        if stream:
            return Stream(conn, resp, method, path)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self._forget(conn, False)
            raise errors.ConnectionError("%s %s: the answer was cut off: %s" % (method, path, e),
                                         method=method, path=path) from None
        if resp.will_close:
            self._forget(conn, False)
        return resp.status, resp.headers, raw

    def json(self, method, path, **kw):
        status, headers, raw = self.request(method, path, **kw)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise errors.ProtocolError("%s %s: the answer is not JSON: %r"
                                       % (method, path, raw[:200]), method=method,
                                       path=path) from None

    def _forget(self, conn, stream):
        conn.close()
        if not stream and getattr(self._local, "conn", None) is conn:
            self._local.conn = None


def _query_items(query):
    items = query.items() if isinstance(query, dict) else query
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, bool):
            v = "1" if v else "0"
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield k, str(x)
            continue
        yield k, str(v)


def _error_from(resp, raw, method, path):
    code, message = None, None
    try:
        j = json.loads(raw)
        e = j.get("error") if isinstance(j, dict) else None
        if isinstance(e, dict):
            code, message = e.get("code"), e.get("message")
    except ValueError:
        pass
    if message is None:
        message = raw.decode("utf-8", "replace").strip() or resp.reason
    retry_after = None
    ra = resp.headers.get("Retry-After")
    if ra:
        try:
            retry_after = float(ra)
        except ValueError:
            retry_after = None
    return errors.error_for(resp.status, code, message, method=method, path=path,
                            retry_after=retry_after)
