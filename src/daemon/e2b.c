/* E2B routing: which surface a request belongs to (e2b.h). */
#include "daemon/e2b.h"

#include "daemon/api.h"
#include "daemon/tokens.h"
#include "lib/base64.h"
#include "lib/parse.h"
#include "lib/secret.h"
#include "lib/state.h"
#include "lib/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void e2b_reply_error(struct request *r, unsigned status, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        json_t *j = json_pack("{s:i,s:s}", "code", (int)status, "message", msg);
        if (!j) /* a message that is not UTF-8 (echoed input) */
                j = json_pack("{s:i,s:s}", "code", (int)status, "message", "request failed");
        http_reply_json(r, status, j);
}

/* Work in the sandbox is activity for idle stop, and wakes it when the idle timer paused or
 * stopped it, as the native API's exec and files routes do (api_idle.c): the caller only sees
 * a slower first answer. /health does neither: it answers 204 for an idle sandbox too (the
 * next request will be served), so a client that polls it keeps nothing awake. */
static bool envd_wake(struct request *r, struct engine *e, struct env *v)
{
        if (!strcmp(req_path(r), "/health"))
                return true;
        engine_idle_touch(e, v);
        if (api_wake_later(r, e, v, true))
                return false; /* dispatched again once it runs (starting, or stopped when idle) */
        if (!env_idled(v))
                return true;
        char err[512] = "";
        int rc = engine_idle_wake(e, v, err, sizeof(err));
        if (rc == -EBUSY)
                e2b_reply_error(r, 409, "%s", err);
        else if (rc < 0)
                e2b_reply_error(r, 502, "sandbox %s could not be woken: %s", env_name(v), err);
        return rc >= 0;
}

bool e2b_handle(struct request *r, struct engine *e)
{
        const char *path = req_path(r);
        if (!req_header(r, "E2b-Sandbox-Id"))
                return e2b_api_handle(r, e);
        struct e2b_target t;
        if (e2b_envd_target(r, e, &t) < 0 || !envd_wake(r, e, t.env))
                return true;
        if (!strncmp(path, "/process.Process/", 17) ||
            !strncmp(path, "/filesystem.Filesystem/", 23)) {
                e2b_rpc_dispatch(r, e, &t, path + 1);
                return true;
        }
        if (e2b_envd_handle(r, e, &t))
                return true;
        e2b_reply_error(r, 404, "no such envd route: %s", path);
        return true;
}

bool e2b_head(struct request *r, struct engine *e)
{
        if (!req_header(r, "E2b-Sandbox-Id"))
                return false;
        struct e2b_target t;
        /* a refusal is answered now, and the body is then dropped unread */
        if (e2b_envd_target(r, e, &t) >= 0 && !strcmp(req_path(r), "/files"))
                req_set_upload_limit(r, E2B_UPLOAD_MAX);
        return true;
}

bool e2b_wants_spool(const char *method, const char *path, const char *content_type)
{
        return !strcmp(method, "POST") && !strcmp(path, "/files");
}

int e2b_sandbox_record(struct engine *e, const char *id, struct e2b_row *ret)
{
        struct e2b_row *rows = NULL;
        size_t n = 0;
        int r = state_e2b_list(engine_state(e), id, NULL, NULL, 1, &rows, &n);
        if (r < 0)
                return r;
        if (n == 0) {
                free(rows);
                return -ENOENT;
        }
        *ret = rows[0];
        free(rows); /* ret took the metadata */
        return 0;
}

bool e2b_token_matches(const struct e2b_row *b, const char *token)
{
        char hash[SECRET_HASH_HEX + 1];
        bool ok = false;
        secret_hash_hex(token, strlen(token), hash);
        /* Every stored hash is compared, in constant time each, whatever matched before. */
        for (const char *p = b->token_hash; *p;) {
                size_t len = strcspn(p, ",");
                char one[SECRET_HASH_HEX + 1] = "";
                if (len == SECRET_HASH_HEX) {
                        memcpy(one, p, len);
                        one[len] = 0;
                        ok |= secret_hash_equal(one, hash);
                }
                p += len;
                p += *p == ',';
        }
        return ok;
}

/* The user named by "Authorization: Basic base64(user:)" (Connect RPCs) or ?username=
 * (the /files routes); false when neither names one. */
static bool request_user(struct request *r, char *buf, size_t len)
{
        const char *u = req_query(r, "username");
        if (u && *u) {
                snprintf(buf, len, "%s", u);
                return strlen(u) < len;
        }
        const char *auth = req_header(r, "Authorization");
        if (!auth || strncasecmp(auth, "Basic ", 6) != 0)
                return false;
        const char *b64 = auth + 6;
        size_t n = strlen(b64);
        unsigned char dec[128];
        if (n == 0 || n > 160)
                return false;
        long m = base64_decode(b64, n, dec);
        if (m <= 0 || (size_t)m >= sizeof(dec))
                return false;
        dec[m] = 0;
        char *colon = strchr((char *)dec, ':');
        if (colon)
                *colon = 0;
        if (!dec[0] || strlen((char *)dec) >= len)
                return false;
        snprintf(buf, len, "%s", (char *)dec);
        return true;
}

/* [a-z_][a-z0-9_-]{0,31}, or a number (a uid) */
static bool user_name_ok(const char *u)
{
        size_t n = strlen(u);
        if (n == 0 || n > 32)
                return false;
        if (strspn(u, "0123456789") == n)
                return n <= 10;
        return (islower((unsigned char)u[0]) || u[0] == '_') &&
               strspn(u, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* The sandbox id is the environment's name. A request through the gateway must carry one of
 * the sandbox's access tokens (X-Access-Token); on the local socket the administrator may
 * address any running environment, and a token given there is checked all the same. One the
 * idle timer paused or stopped counts as running: e2b_handle wakes it once the request is
 * known to be allowed. */
int e2b_envd_target(struct request *r, struct engine *e, struct e2b_target *t)
{
        const char *id = req_header(r, "E2b-Sandbox-Id");
        const char *tok = req_header(r, "X-Access-Token");
        bool remote = req_from_gateway(r);
        struct env *v = id && name_is_valid(id) ? engine_find(e, id) : NULL;
        if (v && env_deleting(v))
                v = NULL; /* killed: its end is under way */
        struct e2b_row b;
        bool known = v && e2b_sandbox_record(e, id, &b) >= 0;
        if (known)
                free(b.metadata);
        /* Through the gateway an environment that is not an E2B sandbox answers like a missing
         * one: nobody can probe other tenants' environment names. */
        bool up = v && ((env_running(v) && !env_paused(v)) || env_idled(v) || env_starting(v));
        if (!up || (remote && !known)) {
                e2b_reply_error(r, 502, "sandbox %s is not running", id ? id : "");
                return -ENOENT;
        }
        /* An API token given with the request (the local socket) acts as that token: it may
         * address only its own sandboxes. */
        const char *auth = req_header(r, "Authorization");
        bool basic = auth && !strncasecmp(auth, "Basic ", 6); /* the RPCs' user, no credential */
        if ((auth && !basic) || (!auth && req_header(r, "X-API-Key"))) {
                if (!api_resolve_caller(r, e))
                        return -EACCES;
                if (!req_actor_admin(r) && strcmp(req_actor(r), env_owner(v))) {
                        e2b_reply_error(r, 502, "sandbox %s is not running", id);
                        return -ENOENT;
                }
        }
        if ((remote || tok) && (!known || !tok || !e2b_token_matches(&b, tok))) {
                e2b_reply_error(r, 401, "invalid or missing access token (X-Access-Token)");
                return -EACCES;
        }
        /* The access tokens are the owner's: a revoked or expired owner token ends them. */
        const char *owner = env_owner(v);
        if (tok && owner[0]) {
                const struct token_row *row = tokens_find(engine_tokens(e), owner);
                if (!row || token_expired(row, wall_s())) {
                        e2b_reply_error(r, 401, "the sandbox's API key was revoked or expired");
                        return -EACCES;
                }
        }
        /* The audit log and metrics name the sandbox's owner. */
        if (tok)
                req_set_actor(r, owner, !owner[0]);
        else if (!(auth && !basic) && !req_header(r, "X-API-Key"))
                req_set_actor(r, "", true); /* the local administrator */
        memset(t, 0, sizeof(*t));
        t->env = v;
        char user[33];
        if (!request_user(r, user, sizeof(user)))
                snprintf(user, sizeof(user), "%s", known ? b.user : "root");
        if (!user_name_ok(user)) {
                e2b_reply_error(r, 400, "invalid user name");
                return -EINVAL;
        }
        snprintf(t->user, sizeof(t->user), "%s", user);
        if (!strcmp(user, "root") || !strcmp(user, "0"))
                snprintf(t->home, sizeof(t->home), "/root");
        else if (known && !strcmp(user, b.user))
                snprintf(t->home, sizeof(t->home), "%s", b.home);
        else
                snprintf(t->home, sizeof(t->home), "/home/%s", user);
        return 0;
}
