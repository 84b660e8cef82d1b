"""A TLS-terminating front for the remote-CLI tests: TLS on a loopback TCP port, the plain bytes
forwarded to a paddockd's unix socket, one backend connection per client connection.

It stands in for paddockd's own gateway (`paddockd --listen`) while that is being built; the
tests in test_remote_cli.py only need `url`, `fingerprint` and `heads` from it, so the gateway
can take its place. It is deliberately simple: Python's ssl module (OpenSSL) with TLS 1.2 as
the floor, a thread per connection.

Each client connection's first request head is recorded in `heads` (the CLI makes one request
per connection), and by default its Authorization line is taken out before it goes on: the
test daemon's unix socket would treat a bearer token as acting as that token, and the tests
only need to see that the CLI sent it.

Certificates come from the openssl command (`make_self_signed`, `make_ca`, `make_signed`),
EC P-256, in a directory the caller removes."""
import hashlib
import os
import select
import socket
import ssl
import subprocess
import threading


def run(*args):
    subprocess.run(list(args), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_self_signed(d, name, san="IP:127.0.0.1"):
    """A self-signed server certificate: (certfile, keyfile)."""
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=paddock-test",
        "-addext", "subjectAltName=" + san)
    return cert, key


def make_ca(d, name="ca"):
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=paddock test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


def make_signed(d, name, ca, san="IP:127.0.0.1"):
    """A server certificate signed by ca = (certfile, keyfile): (certfile, keyfile)."""
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    csr, ext = os.path.join(d, name + ".csr"), os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n" % san)
    run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=paddock-server")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext)
    return cert, key


def fingerprint(certfile):
    """'sha256:AB:CD:...' of the certificate's DER bytes, as paddock prints it."""
    with open(certfile) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return "sha256:" + ":".join("%02X" % b for b in hashlib.sha256(der).digest())


class TLSFront:
    def __init__(self, backend_sock, cert, host="127.0.0.1", strip_auth=True, plain=False):
        """plain: no TLS at all (for http:// to a loopback address); cert is then None."""
        self.backend_sock = backend_sock
        self.plain = plain
        self.fingerprint = None
        self.cert = cert
        self.strip_auth = strip_auth
        self.heads = []
        if not plain:
            self.set_cert(cert)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.authority = "%s:%d" % ("[%s]" % host if family == socket.AF_INET6 else host,
                                    self.port)
        self.url = ("http://" if plain else "https://") + self.authority
        self.closed = False
        self.conns = set()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def set_cert(self, cert):
        """Serve another certificate from the next connection on."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(*cert)
        self.ctx, self.cert, self.fingerprint = ctx, cert, fingerprint(cert[0])

    def _accept(self):
        while not self.closed:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _track(self, *socks, add=True):
        with self.lock:
            for s in socks:
                (self.conns.add if add else self.conns.discard)(s)

    def _serve(self, raw):
        raw.settimeout(30)
        # Each piece of a response goes out as it comes: with Nagle, a second small record
        # would wait for the client's delayed ACK (40 ms).
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            tls = raw if self.plain else self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()  # a client that refused our certificate, or spoke no TLS
            return
        back = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._track(tls, back)
        try:
            back.connect(self.backend_sock)
            tls.settimeout(None)
            self._pump(tls, back, bytearray(self._head(tls)))
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            self._track(tls, back, add=False)
            for s in (back, tls):
                try:
                    s.close()
                except OSError:
                    pass

    def _pump(self, tls, back, to_back):
        """Both directions in one thread (an SSL object must not be read and written from two
        threads at once), until the daemon has closed and everything it said is sent."""
        tls.setblocking(False)
        back.setblocking(False)
        to_tls = bytearray()
        tls_eof = back_eof = back_shut = False
        while not (back_eof and not to_tls):
            if tls_eof and not to_back and not back_shut:
                back.shutdown(socket.SHUT_WR)
                back_shut = True
            rl = [s for s, ok in ((tls, not tls_eof and len(to_back) < 1 << 20),
                                  (back, not back_eof and len(to_tls) < 1 << 20)) if ok]
            wl = [s for s, buf in ((back, to_back), (tls, to_tls)) if buf]
            ready = set()
            if tls in rl and not self.plain and tls.pending():
                ready.add(tls)
            else:
                r, w, _ = select.select(rl, wl, [], 60)
                if not r and not w:
                    return  # idle for a minute: drop it
                ready.update(r + w)
            if tls in ready and not tls_eof and len(to_back) < 1 << 20:
                try:
                    data = tls.recv(65536)
                    to_back += data
                    tls_eof = not data
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    pass
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError, ConnectionError):
                    tls_eof = True
            if back in ready and not back_eof and len(to_tls) < 1 << 20:
                try:
                    data = back.recv(65536)
                    to_tls += data
                    back_eof = not data
                except BlockingIOError:
                    pass
                except ConnectionError:
                    back_eof = True
            if to_back and back in ready:
                try:
                    del to_back[:back.send(to_back)]
                except BlockingIOError:
                    pass
            if to_tls:
                try:
                    del to_tls[:tls.send(to_tls)]
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    pass
        if self.plain:
            return
        tls.settimeout(5)
        try:
            tls.unwrap()  # close_notify: the response is complete
        except (OSError, ValueError, ssl.SSLError):
            pass

    def _head(self, tls):
        """The client's first request head (and whatever came with it), Authorization taken
        out when strip_auth."""
        buf = b""
        while b"\r\n\r\n" not in buf and len(buf) < 65536:
            data = tls.recv(65536)
            if not data:
                break
            buf += data
        head, sep, rest = buf.partition(b"\r\n\r\n")
        text = head.decode("latin-1")
        if buf:  # a client that refused our certificate after the handshake sent nothing
            self.heads.append(text)
        if self.strip_auth:
            lines = [l for l in text.split("\r\n") if not l.lower().startswith("authorization:")]
            head = "\r\n".join(lines).encode("latin-1")
        return head + sep + rest

    def close(self):
        self.closed = True
        self.listener.close()
        with self.lock:
            conns = list(self.conns)
        for s in conns:
            try:
                s.close()
            except OSError:
                pass
