#include "cli/tls.h"
#include "cli/hostkey.h"
#include "cli/lazylib.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <sys/socket.h>

#ifndef GNUTLS_SONAME
#define GNUTLS_SONAME "libgnutls.so.30"
#endif

#define HANDSHAKE_TIMEOUT_MS 30000
/* GnuTLS's defaults, with every protocol version below TLS 1.2 taken out. */
#define TLS_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* The GnuTLS functions we call, looked up once GnuTLS is loaded; the prototypes are the
 * header's, so a mismatch is a compile error, not a crash. */
#define GNUTLS_FUNCS(X)                                                                            \
        X(gnutls_init)                                                                             \
        X(gnutls_deinit)                                                                           \
        X(gnutls_priority_set_direct)                                                              \
        X(gnutls_certificate_allocate_credentials)                                                 \
        X(gnutls_certificate_free_credentials)                                                     \
        X(gnutls_certificate_set_x509_trust_file)                                                  \
        X(gnutls_credentials_set)                                                                  \
        X(gnutls_server_name_set)                                                                  \
        X(gnutls_session_set_verify_cert)                                                          \
        X(gnutls_session_get_verify_cert_status)                                                   \
        X(gnutls_certificate_verification_status_print)                                            \
        X(gnutls_certificate_get_peers)                                                            \
        X(gnutls_transport_set_ptr)                                                                \
        X(gnutls_transport_set_push_function)                                                      \
        X(gnutls_transport_set_pull_function)                                                      \
        X(gnutls_transport_set_pull_timeout_function)                                              \
        X(gnutls_transport_set_errno)                                                              \
        X(gnutls_handshake)                                                                        \
        X(gnutls_handshake_set_timeout)                                                            \
        X(gnutls_record_recv)                                                                      \
        X(gnutls_record_send)                                                                      \
        X(gnutls_record_check_pending)                                                             \
        X(gnutls_bye)                                                                              \
        X(gnutls_alert_get)                                                                        \
        X(gnutls_alert_get_name)                                                                   \
        X(gnutls_error_is_fatal)                                                                   \
        X(gnutls_strerror)

#define DECLARE(f) static __typeof__(f) *p_##f;
GNUTLS_FUNCS(DECLARE)
#undef DECLARE
static gnutls_free_function *p_gnutls_free; /* a variable in GnuTLS, not a function */

struct tls {
        gnutls_session_t s;
        gnutls_certificate_credentials_t cred;
        int fd;
        bool nonblock;     /* of the read or write under way */
        bool send_pending; /* a record went out in part: the next write finishes it */
        int last_errno;    /* of the socket, after GNUTLS_E_PULL_ERROR / PUSH_ERROR */
};

static int load_gnutls(void)
{
        static int loaded; /* 0: not yet, 1: done, -1: failed */
        if (loaded)
                return loaded;
        loaded = -1;
        void *h = dlopen(GNUTLS_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                fprintf(stderr, "paddock: https:// needs GnuTLS (%s): %s\n", GNUTLS_SONAME,
                        dlerror());
                return -1;
        }
#define LOAD(f)                                                                                    \
        if (!(p_##f = (__typeof__(p_##f))dlsym(h, #f))) {                                          \
                fprintf(stderr, "paddock: %s lacks %s\n", GNUTLS_SONAME, #f);                      \
                return -1;                                                                         \
        }
        GNUTLS_FUNCS(LOAD)
#undef LOAD
        /* hostkey.c's SHA-256; GnuTLS links libnettle, so this only looks it up. */
        if (lazy_nettle() < 0)
                return -1;
        p_gnutls_free = (gnutls_free_function *)dlsym(h, "gnutls_free");
        if (!p_gnutls_free) {
                fprintf(stderr, "paddock: %s lacks gnutls_free\n", GNUTLS_SONAME);
                return -1;
        }
        loaded = 1;
        return 1;
}

/* The socket under GnuTLS, blocking or not as the caller of tls_read / tls_write asked;
 * MSG_NOSIGNAL: a peer gone is EPIPE, never SIGPIPE. */
static ssize_t push(gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
        struct tls *t = ptr;
        ssize_t n;
        do
                n = send(t->fd, data, len, MSG_NOSIGNAL | (t->nonblock ? MSG_DONTWAIT : 0));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                t->last_errno = errno;
                p_gnutls_transport_set_errno(t->s, errno == EWOULDBLOCK ? EAGAIN : errno);
        }
        return n;
}

static ssize_t pull(gnutls_transport_ptr_t ptr, void *data, size_t len)
{
        struct tls *t = ptr;
        ssize_t n;
        do
                n = recv(t->fd, data, len, t->nonblock ? MSG_DONTWAIT : 0);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                t->last_errno = errno;
                p_gnutls_transport_set_errno(t->s, errno == EWOULDBLOCK ? EAGAIN : errno);
        }
        return n;
}

/* Used by the handshake for its deadline. */
static int pull_timeout(gnutls_transport_ptr_t ptr, unsigned int ms)
{
        struct tls *t = ptr;
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        int timeout = ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms;
        int r;
        while ((r = poll(&p, 1, timeout)) < 0 && errno == EINTR)
                ;
        return r;
}

static bool is_ip_literal(const char *host)
{
        unsigned char a[16];
        return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

void tls_close(struct tls *t)
{
        if (!t)
                return;
        if (t->s) {
                /* Say goodbye if the socket takes it at once; never wait for it. */
                t->nonblock = true;
                p_gnutls_bye(t->s, GNUTLS_SHUT_WR);
                p_gnutls_deinit(t->s);
        }
        if (t->cred)
                p_gnutls_certificate_free_credentials(t->cred);
        free(t);
}

static void print_verify_failure(struct tls *t, const char *name, const char *ca)
{
        unsigned status = p_gnutls_session_get_verify_cert_status(t->s);
        gnutls_datum_t out = {};
        if (p_gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
                fprintf(stderr, "paddock: the certificate of %s does not verify against %s: %s\n",
                        name, ca, (const char *)out.data);
                (*p_gnutls_free)(out.data);
        } else {
                fprintf(stderr, "paddock: the certificate of %s does not verify against %s\n", name,
                        ca);
        }
}

/* Credentials, priorities, server name and our socket functions on a new session. */
static int setup(struct tls *t, const struct endpoint *ep, const char *name)
{
        int r = p_gnutls_certificate_allocate_credentials(&t->cred);
        if (r < 0)
                goto fail;
        if (ep->ca_cert) {
                r = p_gnutls_certificate_set_x509_trust_file(t->cred, ep->ca_cert,
                                                              GNUTLS_X509_FMT_PEM);
                if (r <= 0) {
                        fprintf(stderr, "paddock: cannot read CA certificates from %s: %s\n",
                                ep->ca_cert,
                                r == 0 ? "no certificate in it" : p_gnutls_strerror(r));
                        return -1;
                }
        }
        if ((r = p_gnutls_init(&t->s, GNUTLS_CLIENT)) < 0 ||
            (r = p_gnutls_priority_set_direct(t->s, TLS_PRIORITY, NULL)) < 0 ||
            (r = p_gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, t->cred)) < 0)
                goto fail;
        if (!is_ip_literal(ep->host) &&
            (r = p_gnutls_server_name_set(t->s, GNUTLS_NAME_DNS, ep->host, strlen(ep->host))) < 0)
                goto fail;
        /* The chain and the host name (DNS name or IP address) are checked in the handshake. */
        if (ep->ca_cert)
                p_gnutls_session_set_verify_cert(t->s, ep->host, 0);
        p_gnutls_transport_set_ptr(t->s, t);
        p_gnutls_transport_set_push_function(t->s, push);
        p_gnutls_transport_set_pull_function(t->s, pull);
        p_gnutls_transport_set_pull_timeout_function(t->s, pull_timeout);
        p_gnutls_handshake_set_timeout(t->s, HANDSHAKE_TIMEOUT_MS);
        return 0;
fail:
        fprintf(stderr, "paddock: TLS setup for %s failed: %s\n", name, p_gnutls_strerror(r));
        return -1;
}

int tls_open(int fd, const struct endpoint *ep, struct tls **ret)
{
        char name[320];
        endpoint_name(ep, name, sizeof(name));
        if (load_gnutls() < 0)
                return -1;
        struct tls *t = calloc(1, sizeof(*t));
        if (!t) {
                fprintf(stderr, "paddock: out of memory\n");
                return -1;
        }
        t->fd = fd;
        if (setup(t, ep, name) < 0)
                goto fail;
        int r;
        do
                r = p_gnutls_handshake(t->s);
        while (r < 0 && !p_gnutls_error_is_fatal(r));
        if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                print_verify_failure(t, name, ep->ca_cert);
                transport_set_refused();
                goto fail;
        }
        if (r == GNUTLS_E_FATAL_ALERT_RECEIVED) {
                fprintf(stderr, "paddock: TLS handshake with %s failed: the server sent: %s\n",
                        name, p_gnutls_alert_get_name(p_gnutls_alert_get(t->s)));
                goto fail;
        }
        if (r < 0) {
                fprintf(stderr, "paddock: TLS handshake with %s failed: %s\n", name,
                        r == GNUTLS_E_PULL_ERROR || r == GNUTLS_E_PUSH_ERROR
                            ? strerror(t->last_errno)
                            : p_gnutls_strerror(r));
                goto fail;
        }
        unsigned n = 0;
        const gnutls_datum_t *certs = p_gnutls_certificate_get_peers(t->s, &n);
        if (!certs || n == 0) {
                fprintf(stderr, "paddock: %s sent no certificate\n", name);
                transport_set_refused();
                goto fail;
        }
        uint8_t key[HOSTKEY_LEN];
        hostkey_digest(certs[0].data, certs[0].size, key);
        /* A pin is the identity, whatever else holds; a CA's verdict came in the handshake;
         * with neither, the known_hosts file decides. */
        if ((ep->fingerprint && hostkey_check_pin(ep, key) < 0) ||
            (!ep->fingerprint && !ep->ca_cert && hostkey_check_known(ep, key) < 0)) {
                transport_set_refused();
                goto fail;
        }
        *ret = t;
        return 0;
fail:
        tls_close(t);
        return -1;
}

ssize_t tls_read(struct tls *t, void *buf, size_t len, bool nonblock)
{
        t->nonblock = nonblock;
        for (;;) {
                ssize_t n = p_gnutls_record_recv(t->s, buf, len);
                if (n >= 0)
                        return n;
                if (n == GNUTLS_E_AGAIN && nonblock)
                        return -EAGAIN;
                if (n == GNUTLS_E_PREMATURE_TERMINATION)
                        return -ECONNRESET; /* cut without close_notify: maybe truncated */
                if (n == GNUTLS_E_PULL_ERROR)
                        return -(t->last_errno ? t->last_errno : EIO);
                /* Interrupted, a renegotiation request we ignore, a warning alert: go on. */
                if (!p_gnutls_error_is_fatal((int)n))
                        continue;
                return -EPROTO;
        }
}

ssize_t tls_write(struct tls *t, const void *buf, size_t len, bool nonblock)
{
        t->nonblock = nonblock;
        for (;;) {
                /* GnuTLS has encrypted a record it could not send whole: NULL, 0 sends the rest,
                 * and returns how much of the caller's bytes that record held. */
                ssize_t n = t->send_pending ? p_gnutls_record_send(t->s, NULL, 0)
                                            : p_gnutls_record_send(t->s, buf, len);
                if (n >= 0) {
                        t->send_pending = false;
                        return n;
                }
                if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
                        t->send_pending = true;
                        if (nonblock && n == GNUTLS_E_AGAIN)
                                return -EAGAIN;
                        continue;
                }
                if (n == GNUTLS_E_PUSH_ERROR)
                        return -(t->last_errno ? t->last_errno : EIO);
                return -EPROTO;
        }
}

bool tls_pending(const struct tls *t)
{
        return p_gnutls_record_check_pending(t->s) > 0;
}
