/* Preview URLs, the engine's side: see ingress.h. */
#include "daemon/engine_internal.h"
#include "daemon/gateway.h"
#include "daemon/ingress.h"
#include "daemon/log.h"
#include "daemon/tokens.h"
#include "lib/jsonutil.h"
#include "lib/secret.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define POLICY_FILE "ingress.json"
/* Connects under way at once: each holds a socket of the daemon for up to INGRESS_CONNECT_MS,
 * so a flood of preview requests (or a compromised gateway) cannot run it out of fds. */
#define MAX_PENDING 256

static unsigned n_pending;

struct policy {
        bool public;
        char token_hash[SECRET_HASH_HEX + 1]; /* "" = none */
};

static bool hash_valid(const char *h)
{
        return strlen(h) == SECRET_HASH_HEX && strspn(h, "0123456789abcdef") == SECRET_HASH_HEX;
}

int ingress_set_policy(struct engine *e, const char *env, bool public, const char *token_hash)
{
        if (token_hash && *token_hash && !hash_valid(token_hash))
                return -EINVAL;
        if (!engine_find(e, env))
                return -ENOENT;
        char dir[4096], path[4200], tmp[4200];
        int r = engine_env_dir(e, env, dir, sizeof(dir));
        if (r < 0 || BUF_PRINTF(path, "%s/" POLICY_FILE, dir) < 0 ||
            BUF_PRINTF(tmp, "%s/." POLICY_FILE ".tmp", dir) < 0)
                return r < 0 ? r : -ENAMETOOLONG;
        json_t *j = json_pack("{s:b,s:s}", "public", public, "token_hash",
                              token_hash ? token_hash : "");
        if (!j)
                return -ENOMEM;
        r = json_dump_file(j, tmp, JSON_COMPACT);
        json_decref(j);
        if (r < 0) {
                unlink(tmp);
                return -EIO;
        }
        if (rename(tmp, path) < 0) {
                r = -errno;
                unlink(tmp);
                return r;
        }
        return 0;
}

static void read_policy(struct engine *e, const char *env, struct policy *ret)
{
        *ret = (struct policy){0};
        char dir[4096], path[4200];
        if (engine_env_dir(e, env, dir, sizeof(dir)) < 0 ||
            BUF_PRINTF(path, "%s/" POLICY_FILE, dir) < 0)
                return;
        json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
        if (!j)
                return; /* none (or unreadable): not public, no traffic token */
        const char *h = json_string_value(json_object_get(j, "token_hash"));
        ret->public = json_is_true(json_object_get(j, "public"));
        if (h && hash_valid(h))
                snprintf(ret->token_hash, sizeof(ret->token_hash), "%s", h);
        json_decref(j);
}

struct pending {
        unsigned epoch;
        uint64_t id;
        int fd;
        char env[NAME_BUF_SIZE];
        unsigned port;
        struct loop_source *src;
        struct loop_timer *timer;
};

static void pending_end(struct pending *p, int status, const char *code, const char *message)
{
        loop_remove(p->src);
        loop_cancel_timer(p->timer);
        gateway_ingress_answer(p->epoch, p->id, status, code, message, status ? -1 : p->fd);
        close(p->fd);
        free(p);
        n_pending--;
}

static void on_connected(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct pending *p = data;
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        if (err == EINPROGRESS || err == EALREADY)
                return;
        if (err) {
                char msg[160];
                snprintf(msg, sizeof(msg), "port %u of %s: %s", p->port, p->env,
                         err == ECONNREFUSED ? "nothing listens there" : strerror(err));
                pending_end(p, 502, "bad_gateway", msg);
                return;
        }
        log_debug("ingress: connected to port %u of %s", p->port, p->env);
        pending_end(p, 0, NULL, NULL);
}

static void on_timeout(struct loop_timer *t, void *data)
{
        struct pending *p = data;
        p->timer = NULL;
        char msg[160];
        snprintf(msg, sizeof(msg), "port %u of %s did not accept a connection within %d s",
                 p->port, p->env, INGRESS_CONNECT_MS / 1000);
        pending_end(p, 504, "gateway_timeout", msg);
}

/* The checks; 0 with *ret_v set, or an HTTP status with code and message. */
static int admit(struct engine *e, json_t *msg, const char *name, struct env **ret_v,
                 const char **code, const char **message)
{
        const char *secret = json_string_value(json_object_get(msg, "secret"));
        const char *traffic = json_string_value(json_object_get(msg, "traffic_token"));
        /* NAME as a Host spells it (lowercase): that environment, else the one whose name
         * differs only in case (none when that is ambiguous); one hash bucket. */
        struct env *v = engine_find_nocase(e, name);
        bool ok = false;
        if (v) {
                struct policy pol;
                read_policy(e, env_name(v), &pol);
                ok = pol.public;
                if (!ok && traffic && pol.token_hash[0]) {
                        char h[SECRET_HASH_HEX + 1];
                        secret_hash_hex(traffic, strlen(traffic), h);
                        ok = secret_hash_equal(h, pol.token_hash);
                }
        }
        if (!ok && secret) {
                const struct token_row *t = tokens_find_secret(engine_tokens(e), secret);
                if (!t) {
                        *code = "unauthorized";
                        *message = "invalid or expired token";
                        return 401;
                }
                ok = v && (t->admin || strcmp(env_owner(v), t->name) == 0);
                if (!ok)
                        v = NULL; /* another token's environment: as if there were none */
        }
        if (!ok && !v && (secret || traffic)) {
                *code = "bad_gateway";
                *message = "no such environment";
                return 502;
        }
        if (!ok) {
                *code = "unauthorized";
                *message = traffic ? "invalid traffic access token"
                                   : "a token is required (Authorization: Bearer, the paddock_token "
                                     "cookie, or e2b-traffic-access-token)";
                return 401;
        }
        /* Paused by the idle timer: this request wakes it (engine_idle.c), and the connection is
         * made to the resumed processes. Stopped by it (a computer): not, because nothing would
         * listen there: a start runs paddock-init alone, the servers went with the stop. */
        if (env_idled(v) && env_paused(v)) {
                char err[256] = "";
                int r = engine_idle_wake(e, v, err, sizeof(err));
                if (r < 0) {
                        log_warn("ingress: %s", err);
                        *code = "bad_gateway";
                        *message = "the environment could not be woken";
                        return 502;
                }
        }
        if (!env_running(v) || env_paused(v)) {
                *code = "bad_gateway";
                *message = env_paused(v)  ? "the environment is paused"
                           : env_idled(v) ? "the environment was stopped when idle: start it"
                                          : "the environment is not running";
                return 502;
        }
        if (!engine_has_network(e) || v->net.mode == NET_NONE || !v->addr.s_addr) {
                *code = "bad_gateway";
                *message = "the environment has no network";
                return 502;
        }
        *ret_v = v;
        return 0;
}

void ingress_request(void *ctx, unsigned epoch, json_t *msg)
{
        struct engine *e = ctx;
        json_int_t id = json_integer_value(json_object_get(msg, "id"));
        json_int_t port = json_integer_value(json_object_get(msg, "port"));
        const char *name = json_string_value(json_object_get(msg, "env"));
        if (id <= 0)
                return; /* nothing to answer to */
        if (!name || strlen(name) > NAME_LEN_MAX || port < 1 || port > 65535) {
                gateway_ingress_answer(epoch, (uint64_t)id, 400, "invalid_argument",
                                       "malformed preview request", -1);
                return;
        }
        struct env *v = NULL;
        const char *code = NULL, *message = NULL;
        int status = admit(e, msg, name, &v, &code, &message);
        if (status) {
                char text[200];
                snprintf(text, sizeof(text), "%s: %s", name, message);
                gateway_ingress_answer(epoch, (uint64_t)id, status, code, text, -1);
                return;
        }
        struct pending *p = n_pending < MAX_PENDING ? calloc(1, sizeof(*p)) : NULL;
        if (!p && n_pending >= MAX_PENDING) {
                gateway_ingress_answer(epoch, (uint64_t)id, 503, "unavailable",
                                       "too many preview connections being made: try again", -1);
                return;
        }
        if (!p) {
                gateway_ingress_answer(epoch, (uint64_t)id, 503, "unavailable", "out of memory", -1);
                return;
        }
        *p = (struct pending){.epoch = epoch, .id = (uint64_t)id, .port = (unsigned)port};
        snprintf(p->env, sizeof(p->env), "%s", env_name(v));
        n_pending++;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr = v->addr};
        p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->fd < 0) {
                free(p);
                n_pending--;
                gateway_ingress_answer(epoch, (uint64_t)id, 503, "unavailable", "no socket", -1);
                return;
        }
        if (connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
                char text[200];
                snprintf(text, sizeof(text), "port %u of %s: %s", p->port, p->env,
                         errno == ECONNREFUSED ? "nothing listens there" : strerror(errno));
                gateway_ingress_answer(epoch, (uint64_t)id, 502, "bad_gateway", text, -1);
                close(p->fd);
                free(p);
                n_pending--;
                return;
        }
        if (loop_add_fd(engine_loop(e), p->fd, EPOLLOUT, on_connected, p, &p->src) < 0 ||
            !(p->timer = loop_add_timer(engine_loop(e), INGRESS_CONNECT_MS, on_timeout, p))) {
                pending_end(p, 503, "unavailable", "out of memory");
                return;
        }
}
