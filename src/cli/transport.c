#include "cli/transport.h"
#include "cli/tls.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

/* A remote host that neither answers nor refuses is given this long. */
#define CONNECT_TIMEOUT_MS 15000

static bool refused;

bool transport_refused(void)
{
        return refused;
}

void transport_set_refused(void)
{
        refused = true;
}

void endpoint_unix(const char *socket_path, struct endpoint *ret)
{
        *ret = (struct endpoint){.kind = TRANSPORT_UNIX, .socket_path = socket_path};
}

const char *endpoint_name(const struct endpoint *ep, char *buf, size_t len)
{
        if (ep->kind == TRANSPORT_UNIX)
                return ep->socket_path;
        snprintf(buf, len, "%s://%s", ep->kind == TRANSPORT_TLS ? "https" : "http", ep->authority);
        return buf;
}

static bool is_loopback_address(const char *host)
{
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6);
        return false;
}

/* A DNS name or an IPv4 address: letters, digits, '-', '.', '_' (lower-cased). */
static bool host_name_ok(char *host)
{
        if (!*host)
                return false;
        for (char *s = host; *s; s++) {
                if (*s >= 'A' && *s <= 'Z')
                        *s = (char)(*s - 'A' + 'a');
                else if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
                           *s == '.' || *s == '_'))
                        return false;
        }
        return true;
}

static bool port_ok(const char *s, size_t len)
{
        unsigned long v = 0;
        if (len == 0 || len > 5)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (unsigned long)(s[i] - '0');
        }
        return v >= 1 && v <= 65535;
}

int endpoint_parse(const char *url, struct endpoint *ret, const char **ret_why)
{
        struct endpoint ep = {};
        const char *rest;
        if (strncmp(url, "unix://", 7) == 0) {
                if (url[7] != '/') {
                        *ret_why = "unix:// wants an absolute path (unix:///run/paddock/paddock.sock)";
                        return -EINVAL;
                }
                endpoint_unix(url + 7, ret);
                return 0;
        }
        if (strncmp(url, "https://", 8) == 0) {
                ep.kind = TRANSPORT_TLS;
                rest = url + 8;
        } else if (strncmp(url, "http://", 7) == 0) {
                ep.kind = TRANSPORT_TCP;
                rest = url + 7;
        } else {
                *ret_why = "the host must be https://HOST:PORT (or http://127.0.0.1:PORT, "
                           "unix:///PATH)";
                return -EINVAL;
        }
        size_t alen = strcspn(rest, "/?#");
        if (rest[alen] && strcmp(rest + alen, "/") != 0) {
                *ret_why = "the host URL may not have a path, query or fragment";
                return -EINVAL;
        }
        if (memchr(rest, '@', alen)) {
                *ret_why = "the host URL may not have a user name (give --token)";
                return -EINVAL;
        }
        const char *host = rest, *port = NULL;
        size_t hlen;
        bool v6 = false;
        if (rest[0] == '[') {
                const char *close = memchr(rest, ']', alen);
                if (!close) {
                        *ret_why = "unclosed '[' in the host URL";
                        return -EINVAL;
                }
                host = rest + 1;
                hlen = (size_t)(close - host);
                v6 = true;
                if (close + 1 < rest + alen) {
                        if (close[1] != ':') {
                                *ret_why = "malformed host URL";
                                return -EINVAL;
                        }
                        port = close + 2;
                }
        } else {
                const char *colon = memchr(rest, ':', alen);
                hlen = colon ? (size_t)(colon - rest) : alen;
                if (colon) {
                        port = colon + 1;
                        if (memchr(port, ':', alen - hlen - 1)) {
                                *ret_why = "an IPv6 address goes in brackets: https://[::1]:PORT";
                                return -EINVAL;
                        }
                }
        }
        size_t plen = port ? (size_t)(rest + alen - port) : 0;
        if (port && !port_ok(port, plen)) {
                *ret_why = "the port must be a number from 1 to 65535";
                return -EINVAL;
        }
        if (hlen == 0 || hlen >= sizeof(ep.host)) {
                *ret_why = "the host URL has no host, or a host name too long";
                return -EINVAL;
        }
        memcpy(ep.host, host, hlen);
        ep.host[hlen] = 0;
        struct in6_addr a6;
        if (v6 ? inet_pton(AF_INET6, ep.host, &a6) != 1 : !host_name_ok(ep.host)) {
                *ret_why = v6 ? "not an IPv6 address between '[' and ']'" : "malformed host name";
                return -EINVAL;
        }
        if (port)
                snprintf(ep.port, sizeof(ep.port), "%.*s", (int)plen, port);
        else
                snprintf(ep.port, sizeof(ep.port), "%s", ep.kind == TRANSPORT_TLS ? "443" : "80");
        if (v6) {
                char canon[INET6_ADDRSTRLEN];
                inet_ntop(AF_INET6, &a6, canon, sizeof(canon));
                snprintf(ep.host, sizeof(ep.host), "%s", canon);
        }
        snprintf(ep.authority, sizeof(ep.authority), v6 ? "[%s]:%s" : "%s:%s", ep.host, ep.port);
        /* Plain HTTP would send the token in clear: only where nothing but this machine can
         * listen. A name (even "localhost") could resolve elsewhere. */
        if (ep.kind == TRANSPORT_TCP && !is_loopback_address(ep.host)) {
                *ret_why = "plain http:// is only allowed to a loopback address (127.0.0.1, [::1]); "
                           "use https://";
                return -EINVAL;
        }
        *ret = ep;
        return 0;
}

static int connect_unix(const char *socket_path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* An AF_UNIX connect interrupted by a signal has not happened at all: try again. */
        while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                if (errno != EINTR)
                        return -errno;
        return TAKE_FD(fd);
}

/* One address, with a deadline; the socket is blocking again on success. */
static int connect_one(const struct addrinfo *ai)
{
        _cleanup_close_ int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
                return -errno;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                if (errno != EINPROGRESS)
                        return -errno;
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                int r;
                while ((r = poll(&p, 1, CONNECT_TIMEOUT_MS)) < 0 && errno == EINTR)
                        ;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
                int err = 0;
                socklen_t len = sizeof(err);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                        return -errno;
                if (err)
                        return -err;
        }
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
                return -errno;
        /* Requests go out as a head and a body in separate writes: without this, Nagle and
         * the peer's delayed ACK would hold the body back for tens of milliseconds. */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return TAKE_FD(fd);
}

/* Every address of host in turn; -errno of the last one that failed. */
static int connect_tcp(const struct endpoint *ep, const char **ret_why)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_NUMERICSERV};
        struct addrinfo *res = NULL;
        int g = getaddrinfo(ep->host, ep->port, &hints, &res);
        if (g != 0) {
                *ret_why = g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g);
                return -EHOSTUNREACH;
        }
        int r = -EHOSTUNREACH;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                r = connect_one(ai);
                if (r >= 0)
                        break;
        }
        freeaddrinfo(res);
        if (r < 0)
                *ret_why = strerror(-r);
        return r;
}

int transport_open(const struct endpoint *ep, struct transport *ret)
{
        char name[320];
        const char *why = NULL;
        int fd;
        if (ep->kind == TRANSPORT_UNIX) {
                fd = connect_unix(ep->socket_path);
                if (fd == -ENAMETOOLONG)
                        why = "socket path too long";
                else if (fd < 0)
                        why = strerror(-fd);
        } else {
                fd = connect_tcp(ep, &why);
        }
        if (fd < 0) {
                fprintf(stderr, "paddock: cannot connect to paddockd at %s: %s\n",
                        endpoint_name(ep, name, sizeof(name)), why);
                return -1;
        }
        struct transport t = {.fd = fd};
        if (ep->kind == TRANSPORT_TLS && tls_open(fd, ep, &t.tls) < 0) {
                close(fd);
                return -1;
        }
        *ret = t;
        return 0;
}

void transport_close(struct transport *t)
{
        if (t->tls)
                tls_close(t->tls);
        t->tls = NULL;
        if (t->fd >= 0)
                close(t->fd);
        t->fd = -EBADF;
        free(t->unread);
        t->unread = NULL;
        t->unread_len = t->unread_off = 0;
}

bool transport_pending(const struct transport *t)
{
        return t->unread_off < t->unread_len || (t->tls && tls_pending(t->tls));
}

int transport_unread(struct transport *t, const void *buf, size_t len)
{
        if (len == 0)
                return 0;
        size_t left = t->unread_len - t->unread_off;
        char *n = malloc(left + len);
        if (!n)
                return -ENOMEM;
        memcpy(n, buf, len);
        if (left)
                memcpy(n + len, t->unread + t->unread_off, left);
        free(t->unread);
        t->unread = n;
        t->unread_len = left + len;
        t->unread_off = 0;
        return 0;
}

ssize_t transport_read(struct transport *t, void *buf, size_t len, bool nonblock)
{
        if (t->unread_off < t->unread_len) {
                size_t n = t->unread_len - t->unread_off;
                if (n > len)
                        n = len;
                memcpy(buf, t->unread + t->unread_off, n);
                t->unread_off += n;
                if (t->unread_off == t->unread_len) {
                        free(t->unread);
                        t->unread = NULL;
                        t->unread_len = t->unread_off = 0;
                }
                return (ssize_t)n;
        }
        if (t->tls)
                return tls_read(t->tls, buf, len, nonblock);
        for (;;) {
                ssize_t n = recv(t->fd, buf, len, nonblock ? MSG_DONTWAIT : 0);
                if (n >= 0)
                        return n;
                if (errno == EINTR)
                        continue;
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
}

ssize_t transport_write(struct transport *t, const void *buf, size_t len, bool nonblock)
{
        if (t->tls)
                return tls_write(t->tls, buf, len, nonblock);
        for (;;) {
                ssize_t n = send(t->fd, buf, len, MSG_NOSIGNAL | (nonblock ? MSG_DONTWAIT : 0));
                if (n >= 0)
                        return n;
                if (errno == EINTR)
                        continue;
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
}

int transport_write_all(struct transport *t, const void *buf, size_t len)
{
        const char *p = buf;
        while (len > 0) {
                ssize_t n = transport_write(t, p, len, false);
                if (n < 0)
                        return (int)n;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int transport_wait(struct transport *t, short events, int timeout_ms)
{
        if ((events & POLLIN) && transport_pending(t))
                return 1;
        struct pollfd p = {.fd = t->fd, .events = events};
        for (;;) {
                int r = poll(&p, 1, timeout_ms);
                if (r >= 0)
                        return r;
                if (errno != EINTR)
                        return -errno;
        }
}
