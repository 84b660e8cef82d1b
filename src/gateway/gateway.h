/* paddock-gateway: the unprivileged network front of paddockd (docs/security.md).
 *
 * main.c reads the command line, the certificate and key, then confines the process
 * (confine.c); loop.c runs the event loop: TLS, strict request parsing (reqparse.c), token
 * checks and rate limits (tokens.c), and the relay of each client connection to the engine
 * over a socketpair handed over the control socket. */
#pragma once
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>

#define GW_MAX_LISTEN 16

struct gw_listener {
        int fd;
        bool tls;
};

struct gw_config {
        int control_fd;
        struct gw_listener listen[GW_MAX_LISTEN];
        size_t n_listen;
        gnutls_certificate_credentials_t cred; /* NULL when no listener is TLS */
        gnutls_priority_t prio;
        const char *domain; /* --domain: preview URLs PORT-NAME.DOMAIN (ingress.h), or NULL */
};

/* loop.c: set up the event loop (epoll, registrations) before confinement. */
int gw_loop_init(const struct gw_config *cfg);
/* Runs until the control socket reaches EOF (returns 0) or a fatal error (-errno). */
int gw_loop_run(void);

/* confine.c: Landlock with no filesystem (or TCP) access at all. Returns the kernel's Landlock
 * ABI, or -EOPNOTSUPP when the kernel has no Landlock. */
int gw_landlock(void);
/* confine.c: the seccomp allowlist of the event loop; kills the process on anything else. */
int gw_seccomp(void);

#define gw_log(...) gw_log_(__VA_ARGS__)
void gw_log_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
