/* The connection to paddockd, whatever carries it: the daemon's unix socket, plain TCP to a
 * loopback address (http://127.0.0.1:PORT, for tests and local proxies), or TLS to a remote
 * gateway (https://HOST:PORT, GnuTLS; tls.c). Everything that talks to the daemon - HTTP
 * requests (client.c), WebSockets (wsclient.c) and through them exec streams, cp, watch,
 * shells and image uploads - reads and writes through a struct transport, never the fd.
 *
 * The unix socket path costs what it did before: a connect and plain recv/send. GnuTLS is
 * loaded (dlopen) only when a TLS connection is made. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum transport_kind {
        TRANSPORT_UNIX,
        TRANSPORT_TCP, /* plain HTTP: only to a loopback address */
        TRANSPORT_TLS,
};

/* Where the daemon is, and how a TLS server's certificate is checked (tls.c, hostkey.c). */
struct endpoint {
        enum transport_kind kind;
        const char *socket_path;   /* UNIX */
        char host[256];            /* TCP, TLS: a DNS name or an address (IPv6 without brackets) */
        char port[8];
        char authority[272];       /* "host:port", "[v6]:port": Host header and known_hosts key */
        const char *fingerprint;   /* TLS: the pinned certificate, "sha256:AB:CD:..." */
        const char *ca_cert;       /* TLS: verify the chain and host name against this CA file */
        bool trust_new;            /* TLS: store an unknown host's certificate without asking */
};

/* "https://HOST[:PORT]", "https://[v6][:PORT]", "http://LOOPBACK[:PORT]", "unix:///PATH".
 * 0, or -EINVAL with *ret_why saying what is wrong. The port defaults to 443 (80 for http);
 * plain http is refused unless the host is a loopback address. ret->socket_path points into
 * url for unix://. */
int endpoint_parse(const char *url, struct endpoint *ret, const char **ret_why);
void endpoint_unix(const char *socket_path, struct endpoint *ret);
/* The endpoint as messages name it: the socket path, or "https://host:port". */
const char *endpoint_name(const struct endpoint *ep, char *buf, size_t len);

struct tls;

struct transport {
        int fd;
        struct tls *tls;  /* TRANSPORT_TLS */
        char *unread;     /* bytes given back (transport_unread), returned before the stream's */
        size_t unread_len, unread_off;
};

/* Connect to ep (close-on-exec; for TLS the handshake and the certificate check are done
 * too, and nothing has been sent). On failure prints why ("paddock: cannot connect to paddockd
 * at ...") and returns -1; transport_refused() then says whether it was the server's
 * certificate that was refused. */
int transport_open(const struct endpoint *ep, struct transport *ret);
void transport_close(struct transport *t);

/* Up to len bytes: > 0, 0 at the peer's end, -EAGAIN when nonblock and nothing is there, or
 * -errno (-ECONNRESET also for a TLS stream cut without close_notify). EINTR is retried. */
ssize_t transport_read(struct transport *t, void *buf, size_t len, bool nonblock);
/* Some of buf: bytes written, -EAGAIN when nonblock and full, or -errno (-EPIPE: the peer is
 * gone; SIGPIPE is never raised). After -EAGAIN, call again with the same bytes first. */
ssize_t transport_write(struct transport *t, const void *buf, size_t len, bool nonblock);
/* All of buf, blocking. 0 or -errno. */
int transport_write_all(struct transport *t, const void *buf, size_t len);
/* Bytes that are read already (given back, or decrypted) and that no poll on the fd announces. */
bool transport_pending(const struct transport *t);
/* Give bytes back: the next reads return them first (read past an HTTP head). -ENOMEM. */
int transport_unread(struct transport *t, const void *buf, size_t len);
/* Wait up to timeout_ms (-1: forever) for POLLIN (true at once with pending bytes) or POLLOUT.
 * 1 when ready, 0 at the timeout, -errno. */
int transport_wait(struct transport *t, short events, int timeout_ms);

/* Was a server's certificate refused in this process (wrong pin, changed or unconfirmed
 * known host, failed CA check)? main exits 2 then, whatever the verb made of the failure. */
bool transport_refused(void);
void transport_set_refused(void);
