/* GET /v1/envs/{name}/exec/ws: an interactive terminal session over a WebSocket.
 *
 * The request (cmd, env, cwd, user, timeout, cols, rows) is a JSON object in ?spec=; every
 * check that can fail (environment, handshake, request, starting the command) happens before
 * the 101, so failures are ordinary HTTP errors. The command starts before the switch with its
 * terminal output held back; once the WebSocket is up:
 *   binary frames, both ways: terminal bytes (keystrokes in, screen output out);
 *   text frames, client -> server: {"resize":{"cols":C,"rows":R}} or {"signal":"INT"};
 *   text frames, server -> client: {"exit_code":N,...} as the last message, or {"error":{...}}.
 * Ctrl-C, Ctrl-D and friends are plain bytes: the pty's line discipline inside the environment
 * turns them into signals and end-of-file. The client going away hangs the terminal up. */
#include "daemon/api.h"
#include "daemon/api_exec.h"
#include "daemon/audit.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/tokens.h"
#include "daemon/ws.h"
#include "lib/websocket.h"
#include "lib/util.h"

#include <signal.h>
#include <strings.h>
#include <sys/ioctl.h>

#define WS_OUTPUT_HIGH_WATER (1u << 20)  /* queued for a slow client: stop reading the terminal */
#define EARLY_OUTPUT_MAX     (64u << 10) /* kept until the WebSocket is up */
#define TTY_MAX_DIMENSION    10000

/* What `paddock shell` runs: bash when the image has it, else sh, as login shells. */
static const char *const default_shell[] = {
    "/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l", NULL};

struct tty_ctx {
        struct engine *eng;
        struct exec_session *session; /* NULL once done */
        struct ws_conn *ws;           /* NULL until upgraded */
        bool done;
        struct exec_result res;
        char *early; /* output before the upgrade (errors from before the terminal existed) */
        size_t early_len;
        struct token_session *token; /* the caller's token, while it has one */
        bool revoked;
};

static void ctx_end(struct tty_ctx *c)
{
        tokens_session_remove(engine_tokens(c->eng), c->token);
        if (c->session)
                exec_hangup(c->session);
        free(c->early);
        free(c);
}

static void send_json(struct tty_ctx *c, json_t *j)
{
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(j);
        if (text && c->ws)
                ws_send(c->ws, 1, text, strlen(text));
        free(text);
}

static void send_error(struct tty_ctx *c, const char *code, const char *msg)
{
        send_json(c, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
}

static void send_result(struct tty_ctx *c)
{
        send_json(c, json_pack("{s:i,s:I,s:b}", "exit_code", c->res.exit_code, "duration_ms",
                               (json_int_t)c->res.duration_ms, "timed_out", c->res.timed_out));
        ws_close(c->ws, 1000, "exited");
}

/* ---- from the command ---------------------------------------------------------------------- */

static void on_output(void *data, int stream, const char *buf, size_t len)
{
        struct tty_ctx *c = data;
        if (!c->ws) {
                size_t room = EARLY_OUTPUT_MAX - c->early_len;
                if (len > room)
                        len = room;
                char *n = len ? realloc(c->early, c->early_len + len) : NULL;
                if (n) {
                        memcpy(n + c->early_len, buf, len);
                        c->early = n;
                        c->early_len += len;
                }
                return;
        }
        ws_send(c->ws, 2, buf, len);
        if (c->session && ws_queued(c->ws) > WS_OUTPUT_HIGH_WATER)
                exec_tty_pause_output(c->session, true);
}

static void on_done(void *data, const struct exec_result *res)
{
        struct tty_ctx *c = data;
        c->session = NULL;
        c->done = true;
        c->res = *res;
        if (c->ws)
                send_result(c);
}

static void on_input_drained(void *data)
{
        struct tty_ctx *c = data;
        if (c->ws)
                ws_pause_read(c->ws, false);
}

static const struct exec_callbacks exec_cbs = {
    .output = on_output, .done = on_done, .input_drained = on_input_drained};

/* ---- from the client ----------------------------------------------------------------------- */

static const struct {
        const char *name;
        int sig;
} signals[] = {{"INT", SIGINT},     {"QUIT", SIGQUIT}, {"TSTP", SIGTSTP}, {"HUP", SIGHUP},
               {"TERM", SIGTERM},   {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
               {"WINCH", SIGWINCH}, {"CONT", SIGCONT}};

static bool dimension(json_t *j, unsigned *ret)
{
        if (!json_is_integer(j) || json_integer_value(j) < 1 ||
            json_integer_value(j) > TTY_MAX_DIMENSION)
                return false;
        *ret = (unsigned)json_integer_value(j);
        return true;
}

static void control_message(struct tty_ctx *c, const uint8_t *msg, size_t len)
{
        json_error_t jerr;
        json_t *j = json_loadb((const char *)msg, len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *resize = json_object_get(j, "resize"), *sig = json_object_get(j, "signal");
        if (!json_is_object(j) || json_object_size(j) != 1 || (!resize && !sig)) {
                send_error(c, "invalid_argument",
                           "control messages are {\"resize\":{\"cols\":C,\"rows\":R}} or "
                           "{\"signal\":\"NAME\"}");
        } else if (resize) {
                unsigned cols, rows;
                if (!dimension(json_object_get(resize, "cols"), &cols) ||
                    !dimension(json_object_get(resize, "rows"), &rows))
                        send_error(c, "invalid_argument", "resize: cols and rows from 1 to 10000");
                else if (c->session)
                        exec_tty_resize(c->session, cols, rows);
        } else {
                const char *name = json_string_value(sig);
                int signo = 0;
                for (size_t i = 0; name && i < ELEMENTSOF(signals); i++)
                        if (!strcmp(name, signals[i].name))
                                signo = signals[i].sig;
                if (!signo)
                        send_error(c, "invalid_argument", "signal: unknown signal name");
                else if (c->session)
                        exec_signal(c->session, signo);
        }
        json_decref(j);
}

static void on_ws_message(void *data, int opcode, const uint8_t *msg, size_t len)
{
        struct tty_ctx *c = data;
        if (opcode == 1) {
                control_message(c, msg, len);
                return;
        }
        if (!c->session)
                return;
        long queued = exec_tty_input(c->session, msg, len);
        if (queued < 0 || (size_t)queued > EXEC_TTY_INPUT_MAX)
                ws_pause_read(c->ws, true);
}

static void on_ws_drained(void *data)
{
        struct tty_ctx *c = data;
        if (c->session)
                exec_tty_pause_output(c->session, false);
}

static void on_ws_closed(void *data)
{
        ctx_end(data);
}

static const struct ws_ops ws_ops = {
    .message = on_ws_message, .drained = on_ws_drained, .closed = on_ws_closed};

/* The caller's token was revoked or expired: the terminal goes at once. */
static void on_token_end(void *data)
{
        struct tty_ctx *c = data;
        c->revoked = true;
        if (c->session) {
                exec_hangup(c->session);
                c->session = NULL;
        }
        if (c->ws) {
                send_error(c, "unauthorized", "token revoked or expired");
                ws_close(c->ws, 1008, "token revoked");
        }
}

/* ---- the switch ---------------------------------------------------------------------------- */

static void on_upgraded(void *data, int fd, const char *extra, size_t extra_len,
                        struct http_upgraded *u)
{
        struct tty_ctx *c = data;
        int r = ws_conn_new(engine_loop(c->eng), fd, extra, extra_len, u, &ws_ops, c, &c->ws);
        if (r < 0) {
                log_warn("exec/ws: taking over the connection: %s", strerror(-r));
                http_upgraded_close(u);
                ctx_end(c);
                return;
        }
        if (c->early_len)
                ws_send(c->ws, 2, c->early, c->early_len);
        free(c->early);
        c->early = NULL;
        c->early_len = 0;
        if (c->revoked)
                on_token_end(c);
        else if (c->done)
                send_result(c);
        else
                exec_tty_pause_output(c->session, false);
}

static void on_abandoned(void *data)
{
        ctx_end(data);
}

static const struct http_upgrade_ops upgrade_ops = {.upgraded = on_upgraded,
                                                    .abandoned = on_abandoned};

/* Is token one of the comma-separated values of header (case-insensitive)? */
static bool header_has_token(const char *header, const char *token)
{
        size_t tlen = strlen(token);
        for (const char *p = header; p && *p;) {
                p += strspn(p, " \t,");
                size_t n = strcspn(p, ",");
                size_t m = n;
                while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
                        m--;
                if (m == tlen && !strncasecmp(p, token, tlen))
                        return true;
                p += n;
        }
        return false;
}

static bool handshake_ok(struct request *r)
{
        const char *upgrade = req_header(r, "Upgrade");
        const char *connection = req_header(r, "Connection");
        const char *version = req_header(r, "Sec-WebSocket-Version");
        const char *key = req_header(r, "Sec-WebSocket-Key");
        if (!upgrade || !header_has_token(upgrade, "websocket") || !connection ||
            !header_has_token(connection, "upgrade")) {
                http_reply_error(r, 400, "invalid_argument",
                                 "this endpoint speaks WebSocket only (Upgrade: websocket)");
                return false;
        }
        if (!version || strcmp(version, "13") != 0) {
                http_reply_error(r, 400, "invalid_argument", "Sec-WebSocket-Version: must be 13");
                return false;
        }
        if (!ws_key_valid(key)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "Sec-WebSocket-Key: must be base64 of 16 bytes");
                return false;
        }
        return true;
}

/* The request from ?spec= into rq; argv malloc'd. Replies 400 and returns false on bad input. */
static bool parse_spec(struct request *r, json_t *spec, struct exec_request *rq, char ***argv)
{
        static const char *const fields[] = {"cmd",     "env",  "cwd",  "user",
                                             "timeout", "cols", "rows", NULL};
        if (!api_known_fields(r, spec, fields))
                return false;
        json_t *j;
        if ((j = json_object_get(spec, "cmd")) && !json_is_null(j)) {
                if (!api_exec_argv(r, j, argv))
                        return false;
        } else {
                *argv = malloc(sizeof(default_shell));
                if (!*argv) {
                        http_reply_errno(r, -ENOMEM, "out of memory");
                        return false;
                }
                memcpy(*argv, default_shell, sizeof(default_shell));
        }
        rq->argv = *argv;
        if (!api_exec_options(r, spec, rq))
                return false;
        json_t *cols = json_object_get(spec, "cols"), *rows = json_object_get(spec, "rows");
        if ((cols && !dimension(cols, &rq->cols)) || (rows && !dimension(rows, &rq->rows)) ||
            (!cols != !rows)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "cols, rows: both or neither, each from 1 to %d",
                                 TTY_MAX_DIMENSION);
                return false;
        }
        return true;
}

void api_env_exec_ws(struct request *r, struct engine *e, struct env *v)
{
        if (strcmp(req_method(r), "GET") != 0) {
                http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s",
                                 req_method(r), req_path(r));
                return;
        }
        if (!handshake_ok(r))
                return;
        const char *text = req_query(r, "spec");
        json_error_t jerr;
        json_t *spec = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) : json_object();
        if (!json_is_object(spec)) {
                json_decref(spec);
                http_reply_error(r, 400, "invalid_argument", "spec: must be a JSON object");
                return;
        }
        char **argv = NULL;
        struct exec_request rq = {.max_output = SIZE_MAX, .tty = true};
        struct tty_ctx *c = NULL;
        if (!parse_spec(r, spec, &rq, &argv))
                goto out;
        c = calloc(1, sizeof(*c));
        if (!c) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                goto out;
        }
        c->eng = e;
        char err[512] = "";
        rq.audit = audit_exec_begin(r, argv);
        int rc = exec_start(e, v, &rq, &exec_cbs, c, &c->session, err, sizeof(err));
        if (rc < 0) {
                audit_exec_free(rq.audit);
                free(c);
                http_reply_errno(r, rc, "%s", err[0] ? err : strerror(-rc));
                goto out;
        }
        /* Hold the screen back until there is a WebSocket to show it on. */
        exec_tty_pause_output(c->session, true);
        if (req_actor(r)[0])
                c->token = tokens_session_add(engine_tokens(e), req_actor(r), on_token_end, c);
        char accept[WS_ACCEPT_LEN + 1];
        ws_accept_for(req_header(r, "Sec-WebSocket-Key"), accept);
        const char *const headers[] = {
            "Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Accept", accept, NULL};
        http_reply_upgrade(r, headers, &upgrade_ops, c);
out:
        free(argv);
        json_decref(spec);
}
