/* libwslay and libnettle, loaded when first needed. Every shared library the CLI names is mapped
 * and relocated at every start, and libnettle also probes the CPU then (CPUID, which a virtual
 * machine traps): on the test machine the two cost `paddock --version`, `ls` and `exec` about
 * 0.2 ms a run (bench/cli.py), and only a WebSocket (`exec -t`, `shell`) or TLS to a remote
 * daemon uses either. So the CLI does not link them (readelf -d build/paddock names libjansson
 * and libc only) but dlopens them by the sonames it was built against, as tls.c does GnuTLS.
 *
 * How the calls get here: this file defines the functions of theirs that the CLI and
 * lib/websocket.c call, under the libraries' own names and with their headers' prototypes, so
 * the linker resolves those calls to these definitions (an executable's own come first) and
 * needs neither library. Each definition forwards to the library's function found by dlsym.
 * They are not exported (nothing linked the executable against these libraries), so the
 * libraries' calls among their own functions still stay inside them.
 *
 * The entry points load before any work: wsc_open (both libraries, before connecting) and
 * tls_open (libnettle; GnuTLS needs it anyway, so it is already mapped). A function reached
 * without that would find its library loaded here, or stop the CLI if it cannot be. */
#include "cli/lazylib.h"
#include "cli/cli.h"

#include <dlfcn.h>
#include <nettle/memops.h>
#include <nettle/sha1.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <wslay/wslay.h>

#ifndef WSLAY_SONAME
#define WSLAY_SONAME "libwslay.so.1"
#endif
#ifndef NETTLE_SONAME
#define NETTLE_SONAME "libnettle.so.8"
#endif

#define WSLAY_FUNCS(X)                                                                             \
        X(wslay_event_context_client_init)                                                         \
        X(wslay_event_context_free)                                                                \
        X(wslay_event_config_set_max_recv_msg_length)                                              \
        X(wslay_event_recv)                                                                        \
        X(wslay_event_send)                                                                        \
        X(wslay_event_queue_msg)                                                                   \
        X(wslay_event_set_error)                                                                   \
        X(wslay_event_want_read)                                                                   \
        X(wslay_event_want_write)                                                                  \
        X(wslay_event_get_queued_msg_length)

#define NETTLE_FUNCS(X)                                                                            \
        X(nettle_sha1_init)                                                                        \
        X(nettle_sha1_update)                                                                      \
        X(nettle_sha1_digest)                                                                      \
        X(nettle_sha256_init)                                                                      \
        X(nettle_sha256_update)                                                                    \
        X(nettle_sha256_digest)                                                                    \
        X(nettle_memeql_sec)

/* The prototypes are the headers', so a mismatch is a compile error, not a crash. */
#define DECLARE(f) static __typeof__(f) *p_##f;
WSLAY_FUNCS(DECLARE)
NETTLE_FUNCS(DECLARE)
#undef DECLARE

#define LOAD(f)                                                                                    \
        if (!(p_##f = (__typeof__(p_##f))dlsym(h, #f))) {                                          \
                fprintf(stderr, "paddock: %s lacks %s\n", soname, #f);                             \
                return -1;                                                                         \
        }

/* 0: not tried yet, 1: loaded, -1: failed. */
static int wslay_state, nettle_state;

static void *open_lib(const char *soname, const char *what)
{
        void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (!h)
                fprintf(stderr, "paddock: %s needs %s: %s\n", what, soname, dlerror());
        return h;
}

static int load_wslay(void)
{
        const char *soname = WSLAY_SONAME;
        void *h = open_lib(soname, "a WebSocket session");
        if (!h)
                return -1;
        WSLAY_FUNCS(LOAD)
        return 0;
}

static int load_nettle(void)
{
        const char *soname = NETTLE_SONAME;
        void *h = open_lib(soname, "checking a WebSocket handshake or a host key");
        if (!h)
                return -1;
        NETTLE_FUNCS(LOAD)
        return 0;
}

int lazy_wslay(void)
{
        if (!wslay_state)
                wslay_state = load_wslay() < 0 ? -1 : 1;
        return wslay_state < 0 ? -1 : 0;
}

int lazy_nettle(void)
{
        if (!nettle_state)
                nettle_state = load_nettle() < 0 ? -1 : 1;
        return nettle_state < 0 ? -1 : 0;
}

/* Called by every forwarder: one comparison once loaded. */
#define NEED(lib)                                                                                  \
        do {                                                                                       \
                if (lib##_state <= 0 && lazy_##lib() < 0)                                          \
                        exit(EXIT_FAIL);                                                           \
        } while (0)

int wslay_event_context_client_init(wslay_event_context_ptr *ctx,
                                    const struct wslay_event_callbacks *callbacks, void *user_data)
{
        NEED(wslay);
        return p_wslay_event_context_client_init(ctx, callbacks, user_data);
}

void wslay_event_context_free(wslay_event_context_ptr ctx)
{
        NEED(wslay);
        p_wslay_event_context_free(ctx);
}

void wslay_event_config_set_max_recv_msg_length(wslay_event_context_ptr ctx, uint64_t val)
{
        NEED(wslay);
        p_wslay_event_config_set_max_recv_msg_length(ctx, val);
}

int wslay_event_recv(wslay_event_context_ptr ctx)
{
        NEED(wslay);
        return p_wslay_event_recv(ctx);
}

int wslay_event_send(wslay_event_context_ptr ctx)
{
        NEED(wslay);
        return p_wslay_event_send(ctx);
}

int wslay_event_queue_msg(wslay_event_context_ptr ctx, const struct wslay_event_msg *arg)
{
        NEED(wslay);
        return p_wslay_event_queue_msg(ctx, arg);
}

void wslay_event_set_error(wslay_event_context_ptr ctx, int val)
{
        NEED(wslay);
        p_wslay_event_set_error(ctx, val);
}

int wslay_event_want_read(wslay_event_context_ptr ctx)
{
        NEED(wslay);
        return p_wslay_event_want_read(ctx);
}

int wslay_event_want_write(wslay_event_context_ptr ctx)
{
        NEED(wslay);
        return p_wslay_event_want_write(ctx);
}

size_t wslay_event_get_queued_msg_length(wslay_event_context_ptr ctx)
{
        NEED(wslay);
        return p_wslay_event_get_queued_msg_length(ctx);
}

void nettle_sha1_init(struct sha1_ctx *ctx)
{
        NEED(nettle);
        p_nettle_sha1_init(ctx);
}

void nettle_sha1_update(struct sha1_ctx *ctx, size_t length, const uint8_t *data)
{
        NEED(nettle);
        p_nettle_sha1_update(ctx, length, data);
}

void nettle_sha1_digest(struct sha1_ctx *ctx, size_t length, uint8_t *digest)
{
        NEED(nettle);
        p_nettle_sha1_digest(ctx, length, digest);
}

void nettle_sha256_init(struct sha256_ctx *ctx)
{
        NEED(nettle);
        p_nettle_sha256_init(ctx);
}

void nettle_sha256_update(struct sha256_ctx *ctx, size_t length, const uint8_t *data)
{
        NEED(nettle);
        p_nettle_sha256_update(ctx, length, data);
}

void nettle_sha256_digest(struct sha256_ctx *ctx, size_t length, uint8_t *digest)
{
        NEED(nettle);
        p_nettle_sha256_digest(ctx, length, digest);
}

int nettle_memeql_sec(const void *a, const void *b, size_t n)
{
        NEED(nettle);
        return p_nettle_memeql_sec(a, b, n);
}
