/* paddock-gateway: command line, certificate, confinement, then the event loop (loop.c).
 *
 *   paddock-gateway --control FD --listen FD:tls|plain [--listen FD:MODE ...]
 *                   --cert-fd FD --key-fd FD [--domain DOMAIN]
 *
 * paddockd (src/daemon/gateway.c) starts it as its own uid with no capabilities and
 * no_new_privs, with every fd already open: the SOCK_SEQPACKET control socket, bound and
 * listening TCP sockets, and the PEM certificate and key (read here, then closed). */
#include "gateway/gateway.h"
#include "lib/util.h"

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>

/* TLS 1.2 and 1.3 only, AEAD ciphers only, our order. */
#define GW_PRIORITY                                                                                \
        "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"     \
        "+CHACHA20-POLY1305:-MAC-ALL:+AEAD:%SERVER_PRECEDENCE"

#define PEM_MAX (1 << 20)

void gw_log_(const char *fmt, ...)
{
        char line[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        /* One write per line, so lines from a dying process are never interleaved. */
        char out[600];
        int n = snprintf(out, sizeof(out), "paddock-gateway: %s\n", line);
        if (n > (int)sizeof(out) - 1)
                n = (int)sizeof(out) - 1;
        (void)!write(STDERR_FILENO, out, (size_t)n);
}

static int parse_fd(const char *s, int *ret)
{
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || (*end && *end != ':') || v < 0 || v > INT_MAX)
                return -EINVAL;
        if (fcntl((int)v, F_GETFD) < 0)
                return -EBADF;
        *ret = (int)v;
        return 0;
}

static int read_pem(int fd, gnutls_datum_t *ret)
{
        size_t len = 0, cap = 8192;
        _cleanup_free_ char *p = malloc(cap);
        if (!p)
                return -ENOMEM;
        for (;;) {
                if (len == cap) {
                        if (cap >= PEM_MAX)
                                return -EFBIG;
                        char *n = realloc(p, cap *= 2);
                        if (!n)
                                return -ENOMEM;
                        p = n;
                }
                ssize_t k = read(fd, p + len, cap - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        ret->data = (unsigned char *)TAKE_PTR(p);
        ret->size = (unsigned)len;
        return 0;
}

static void usage(void)
{
        fprintf(stderr, "usage: paddock-gateway --control FD --listen FD:tls|plain [--listen ...] "
                        "--cert-fd FD --key-fd FD [--domain DOMAIN]\n");
        exit(2);
}

static int load_credentials(struct gw_config *cfg, int cert_fd, int key_fd)
{
        gnutls_datum_t cert = { 0 }, key = { 0 };
        int r = read_pem(cert_fd, &cert);
        if (r >= 0)
                r = read_pem(key_fd, &key);
        close(cert_fd);
        close(key_fd);
        if (r < 0) {
                gw_log("reading the certificate or key: %s", strerror(-r));
                goto out;
        }
        r = gnutls_certificate_allocate_credentials(&cfg->cred);
        if (r >= 0)
                r = gnutls_certificate_set_x509_key_mem2(cfg->cred, &cert, &key,
                                                         GNUTLS_X509_FMT_PEM, NULL, 0);
        if (r < 0) {
                gw_log("loading the certificate and key: %s", gnutls_strerror(r));
                r = -EINVAL;
        }
out:
        if (key.data)
                explicit_bzero(key.data, key.size);
        free(cert.data);
        free(key.data);
        return r < 0 ? r : 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "control", required_argument, NULL, 'c' },
                { "listen", required_argument, NULL, 'l' },
                { "cert-fd", required_argument, NULL, 'C' },
                { "key-fd", required_argument, NULL, 'K' },
                { "domain", required_argument, NULL, 'D' },
                {},
        };
        struct gw_config cfg = { .control_fd = -1 };
        int cert_fd = -1, key_fd = -1, c;
        bool any_tls = false;
        while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        if (parse_fd(optarg, &cfg.control_fd) < 0)
                                usage();
                        break;
                case 'C':
                        if (parse_fd(optarg, &cert_fd) < 0)
                                usage();
                        break;
                case 'K':
                        if (parse_fd(optarg, &key_fd) < 0)
                                usage();
                        break;
                case 'D':
                        cfg.domain = optarg;
                        break;
                case 'l': {
                        const char *colon = strchr(optarg, ':');
                        if (cfg.n_listen == GW_MAX_LISTEN || !colon)
                                usage();
                        struct gw_listener *l = &cfg.listen[cfg.n_listen++];
                        if (parse_fd(optarg, &l->fd) < 0)
                                usage();
                        if (strcmp(colon + 1, "tls") == 0)
                                l->tls = any_tls = true;
                        else if (strcmp(colon + 1, "plain") != 0)
                                usage();
                        break;
                }
                default:
                        usage();
                }
        }
        if (optind != argc || cfg.control_fd < 0 || cfg.n_listen == 0)
                usage();
        if (any_tls && (cert_fd < 0 || key_fd < 0)) {
                gw_log("a TLS listener needs --cert-fd and --key-fd");
                return 2;
        }

        /* Writes to a gone peer fail with EPIPE (all sends use MSG_NOSIGNAL; this covers stderr). */
        signal(SIGPIPE, SIG_IGN);
        int r = gnutls_global_init();
        if (r < 0) {
                gw_log("gnutls: %s", gnutls_strerror(r));
                return 1;
        }
        if (cert_fd >= 0 && key_fd >= 0) {
                if (load_credentials(&cfg, cert_fd, key_fd) < 0)
                        return 1;
        } else {
                if (cert_fd >= 0)
                        close(cert_fd);
                if (key_fd >= 0)
                        close(key_fd);
        }
        const char *err = NULL;
        r = gnutls_priority_init(&cfg.prio, GW_PRIORITY, &err);
        if (r < 0) {
                gw_log("TLS priority string at '%s': %s", err ? err : "?", gnutls_strerror(r));
                return 1;
        }

        r = gw_loop_init(&cfg);
        if (r < 0) {
                gw_log("setting up the event loop: %s", strerror(-r));
                return 1;
        }

        /* No core dumps or ptrace by our own uid: memory holds the private key and secrets. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
                gw_log("PR_SET_DUMPABLE: %m");
                return 1;
        }
        r = gw_landlock();
        if (r == -EOPNOTSUPP)
                gw_log("Landlock is not available on this kernel; going on without it");
        else if (r < 0) {
                gw_log("Landlock: %s", strerror(-r));
                return 1;
        }
        int abi = r;
        r = gw_seccomp();
        if (r < 0) {
                gw_log("seccomp: %s", strerror(-r));
                return 1;
        }
        if (abi > 0)
                gw_log("confined: Landlock ABI %d without filesystem access, seccomp allowlist", abi);
        gw_log("serving %zu listener(s)", cfg.n_listen);
        r = gw_loop_run();
        if (r < 0) {
                gw_log("event loop: %s", strerror(-r));
                return 1;
        }
        return 0;
}
