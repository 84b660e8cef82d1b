/* POST /v1/envs/{name}/exec: buffered JSON result, or NDJSON stream as output arrives. */
#include "daemon/api.h"
#include "daemon/api_exec.h"
#include "daemon/audit.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/procs.h"
#include "lib/base64.h"
#include "lib/strbuf.h"
#include "lib/util.h"

#include <limits.h>

#define MAX_ARGS 4096

/* Text as a JSON string, or base64 when it is not valid UTF-8. */
static json_t *text_or_base64(const char *p, size_t n, bool b64)
{
        if (!b64)
                return json_stringn(p ? p : "", n);
        char *enc = malloc(base64_encoded_size(n));
        if (!enc)
                return NULL;
        size_t len = base64_encode(p, n, enc);
        json_t *j = json_stringn(enc, len);
        free(enc);
        return j;
}

struct exec_ctx {
        struct request *req;
        struct engine *eng;
        bool stream;
        bool done;
        int refs; /* the session and the HTTP response each hold one */
        struct exec_session *session;
        struct strbuf out, err; /* buffered mode: collected output */
        struct strbuf pending; /* stream mode: NDJSON not yet sent */
        size_t pending_off;
        char carry[2][4];    /* stream mode: an incomplete UTF-8 tail per stream */
        size_t carry_len[2];
};

static void ctx_unref(struct exec_ctx *c)
{
        if (--c->refs > 0)
                return;
        strbuf_free(&c->out);
        strbuf_free(&c->err);
        strbuf_free(&c->pending);
        free(c);
}

static void append_line(struct exec_ctx *c, json_t *j)
{
        char *line = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(j);
        if (!line)
                return;
        strbuf_add(&c->pending, line, strlen(line));
        strbuf_add(&c->pending, "\n", 1);
        free(line);
        http_stream_wake(c->req);
}

static void stream_chunk(struct exec_ctx *c, int stream, const char *p, size_t n)
{
        const char *key = stream == 1 ? "stdout" : "stderr";
        int i = stream - 1;
        char tmp[65536 + 8];
        size_t len = 0;
        /* Prepend the held-back tail so multi-byte characters are never split. */
        memcpy(tmp, c->carry[i], c->carry_len[i]);
        len = c->carry_len[i];
        if (n > sizeof(tmp) - len)
                n = sizeof(tmp) - len;
        memcpy(tmp + len, p, n);
        len += n;
        size_t whole = utf8_whole_prefix(tmp, len);
        if (len - whole > 3)
                whole = len;
        c->carry_len[i] = len - whole;
        memcpy(c->carry[i], tmp + whole, c->carry_len[i]);
        if (whole == 0)
                return;
        bool b64 = !utf8_valid(tmp, whole);
        json_t *j = json_pack("{s:o}", key, text_or_base64(tmp, whole, b64));
        if (j && b64)
                json_object_set_new(j, "encoding", json_string("base64"));
        append_line(c, j);
}

static void on_output(void *data, int stream, const char *p, size_t n)
{
        struct exec_ctx *c = data;
        if (!c->req)
                return;
        if (c->stream) {
                while (n > 0) {
                        size_t k = n > 65536 ? 65536 : n;
                        stream_chunk(c, stream, p, k);
                        p += k;
                        n -= k;
                }
        } else {
                strbuf_add(stream == 1 ? &c->out : &c->err, p, n);
        }
}

static void on_done(void *data, const struct exec_result *res)
{
        struct exec_ctx *c = data;
        c->done = true;
        c->session = NULL;
        if (c->req) {
                if (c->stream) {
                        /* Flush held-back bytes of a truncated character as base64. */
                        for (int i = 0; i < 2; i++)
                                if (c->carry_len[i]) {
                                        json_t *j = json_pack(
                                                "{s:o,s:s}", i == 0 ? "stdout" : "stderr",
                                                text_or_base64(c->carry[i], c->carry_len[i], true),
                                                "encoding", "base64");
                                        c->carry_len[i] = 0;
                                        append_line(c, j);
                                }
                        append_line(c, json_pack("{s:i,s:I,s:b,s:b}", "exit_code", res->exit_code,
                                                 "duration_ms", (json_int_t)res->duration_ms,
                                                 "timed_out", res->timed_out, "truncated",
                                                 res->truncated));
                } else {
                        bool b64 = !utf8_valid(c->out.data ? c->out.data : "", c->out.len) ||
                                   !utf8_valid(c->err.data ? c->err.data : "", c->err.len);
                        json_t *j = json_pack("{s:i,s:o,s:o,s:I,s:b,s:b}", "exit_code",
                                              res->exit_code, "stdout",
                                              text_or_base64(c->out.data, c->out.len, b64),
                                              "stderr",
                                              text_or_base64(c->err.data, c->err.len, b64),
                                              "duration_ms", (json_int_t)res->duration_ms,
                                              "timed_out", res->timed_out, "truncated",
                                              res->truncated);
                        if (j && b64)
                                json_object_set_new(j, "encoding", json_string("base64"));
                        req_on_free(c->req, NULL, NULL);
                        http_reply_json(c->req, 200, j);
                        c->req = NULL;
                        c->refs--; /* the buffered reply no longer needs the context */
                }
        }
        ctx_unref(c);
}

static const struct exec_callbacks callbacks = {.output = on_output, .done = on_done};

static ssize_t stream_read(void *data, char *buf, size_t max)
{
        struct exec_ctx *c = data;
        size_t n = take_pending(buf, max, c->pending.data, c->pending.len, &c->pending_off);
        if (n == 0) {
                c->pending.len = c->pending_off = 0;
                return c->done ? -1 : 0;
        }
        return (ssize_t)n;
}

/* The client is gone (its stream closed, or a buffered request ended): the command keeps
 * running, detached. */
static void request_gone(void *data)
{
        struct exec_ctx *c = data;
        c->req = NULL;
        if (c->session)
                exec_detach(c->session);
        /* The session's done callback no longer runs (detached sessions skip callbacks), so
         * drop its reference here when it was detached. */
        if (!c->done && c->session)
                c->refs--;
        ctx_unref(c);
}

static const struct http_stream_ops stream_ops = {.read = stream_read, .closed = request_gone};

bool api_exec_argv(struct request *r, json_t *cmd, char ***ret)
{
        size_t n = json_array_size(cmd);
        if (!json_is_array(cmd) || n == 0 || n > MAX_ARGS) {
                http_reply_error(r, 400, "invalid_argument",
                                 "cmd: must be a non-empty array of strings (at most %d)", MAX_ARGS);
                return false;
        }
        char **argv = calloc(n + 1, sizeof(char *));
        if (!argv) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return false;
        }
        for (size_t i = 0; i < n; i++) {
                json_t *a = json_array_get(cmd, i);
                if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a) ||
                    (i == 0 && json_string_length(a) == 0)) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "cmd[%zu]: must be a string without NUL bytes", i);
                        free(argv);
                        return false;
                }
                argv[i] = (char *)json_string_value(a); /* borrowed from the body */
        }
        req_set_note(r, "argv", audit_argv_json(argv, AUDIT_ARGV_MAX, NULL));
        *ret = argv;
        return true;
}

/* env, cwd, user and timeout of an exec request (POST exec and exec/ws). */
bool api_exec_options(struct request *r, json_t *body, struct exec_request *rq)
{
        json_t *j;
        if ((j = json_object_get(body, "env")) && !json_is_null(j)) {
                if (!api_env_map(r, j, "env"))
                        return false;
                rq->env = j;
        }
        if ((j = json_object_get(body, "cwd")) && !json_is_null(j)) {
                const char *cwd = json_string_value(j);
                if (!cwd || cwd[0] != '/' || strlen(cwd) > PATH_MAX - 1 ||
                    strlen(cwd) != json_string_length(j)) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "cwd: must be an absolute path inside the environment");
                        return false;
                }
                rq->cwd = cwd;
        }
        if ((j = json_object_get(body, "user")) && !json_is_null(j)) {
                const char *u = json_string_value(j);
                if (!u || !*u || strlen(u) > EXEC_USER_MAX || strlen(u) != json_string_length(j)) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "user: a user name, uid or uid:gid");
                        return false;
                }
                rq->user = u;
        }
        if ((j = json_object_get(body, "timeout")) && !json_is_null(j)) {
                uint64_t s;
                if (!api_duration(r, j, "timeout", &s))
                        return false;
                rq->timeout_ms = s * 1000;
        }
        return true;
}

void api_env_exec(struct request *r, struct engine *e, struct env *v)
{
        static const char *const fields[] = {"cmd", "env", "cwd", "user", "stdin",
                                             "stdin_encoding", "timeout", "max_output", "stream",
                                             "tty", "detach", NULL};
        /* A raw body is the command's stdin; the request itself is in ?spec=. */
        bool raw_stdin = req_spool_fd(r) >= 0;
        json_t *body;
        if (raw_stdin) {
                const char *spec = req_query(r, "spec");
                json_error_t jerr;
                body = spec ? json_loads(spec, JSON_REJECT_DUPLICATES, &jerr) : NULL;
                if (!json_is_object(body)) {
                        json_decref(body);
                        http_reply_error(r, 400, "invalid_argument",
                                         "spec: with a raw (octet-stream) body the exec request "
                                         "goes in ?spec= as a JSON object");
                        return;
                }
        } else {
                body = req_json_object(r);
                if (!body)
                        return;
        }
        struct exec_request rq = {.max_output = EXEC_DEFAULT_MAX_OUTPUT};
        if (raw_stdin) {
                if (json_object_get(body, "stdin")) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "stdin: given twice (the body is the stdin)");
                        json_decref(body);
                        return;
                }
                rq.stdin_from_fd = true;
                rq.stdin_fd = req_spool_fd(r);
        }
        char **argv = NULL;
        unsigned char *stdin_buf = NULL;
        json_t *j;
        if (!api_known_fields(r, body, fields))
                goto out;
        if (json_is_true(json_object_get(body, "tty"))) {
                http_reply_error(r, 422, "unprocessable",
                                 "tty: interactive sessions use the WebSocket endpoint "
                                 "GET /v1/envs/{name}/exec/ws");
                goto out;
        }
        if (!api_exec_argv(r, json_object_get(body, "cmd"), &argv))
                goto out;
        rq.argv = argv;
        if (!api_exec_options(r, body, &rq))
                goto out;
        if ((j = json_object_get(body, "max_output")) && !json_is_null(j)) {
                uint64_t m;
                if (!api_size(r, j, "max_output", &m))
                        goto out;
                if (m > EXEC_MAX_OUTPUT_LIMIT) {
                        http_reply_error(r, 400, "invalid_argument", "max_output: at most 256M");
                        goto out;
                }
                rq.max_output = m;
        }
        if ((j = json_object_get(body, "stdin")) && !json_is_null(j)) {
                if (!json_is_string(j)) {
                        http_reply_error(r, 400, "invalid_argument", "stdin: must be a string");
                        goto out;
                }
                json_t *enc = json_object_get(body, "stdin_encoding");
                if (enc && !json_is_null(enc)) {
                        if (!json_is_string(enc) || strcmp(json_string_value(enc), "base64")) {
                                http_reply_error(r, 400, "invalid_argument",
                                                 "stdin_encoding: only \"base64\"");
                                goto out;
                        }
                        size_t len = json_string_length(j);
                        stdin_buf = malloc(len / 4 * 3 + 4);
                        long n = stdin_buf ? base64_decode(json_string_value(j), len, stdin_buf) : -1;
                        if (n < 0) {
                                http_reply_error(r, 400, "invalid_argument", "stdin: invalid base64");
                                goto out;
                        }
                        rq.stdin_data = stdin_buf;
                        rq.stdin_len = (size_t)n;
                } else {
                        rq.stdin_data = json_string_value(j);
                        rq.stdin_len = json_string_length(j);
                }
        }
        json_t *detach = json_object_get(body, "detach");
        if (detach && !json_is_boolean(detach)) {
                http_reply_error(r, 400, "invalid_argument", "detach: must be true or false");
                goto out;
        }
        if (json_is_true(detach)) {
                char err[512] = "";
                unsigned id;
                if (!json_object_get(body, "max_output"))
                        rq.max_output = SIZE_MAX; /* the per-process ring buffer bounds memory */
                req_set_note(r, "detach", json_true());
                rq.audit = audit_exec_begin(r, argv); /* its exit's record */
                int rc = procs_start(e, v, &rq, &id, err, sizeof(err));
                if (rc < 0) {
                        audit_exec_free(rq.audit);
                        http_reply_errno(r, rc, "%s", err[0] ? err : strerror(-rc));
                } else {
                        req_set_note(r, "process", json_integer(id));
                        http_reply_json(r, 201, proc_json(procs_find(env_name(v), id)));
                }
                goto out;
        }
        json_t *stream = json_object_get(body, "stream");
        if (stream && !json_is_boolean(stream)) {
                http_reply_error(r, 400, "invalid_argument", "stream: must be true or false");
                goto out;
        }
        struct exec_ctx *c = calloc(1, sizeof(*c));
        if (!c) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                goto out;
        }
        *c = (struct exec_ctx){.req = r, .eng = e, .stream = json_is_true(stream), .refs = 2};
        char err[512] = "";
        rq.audit = audit_exec_begin(r, argv);
        int rc = exec_start(e, v, &rq, &callbacks, c, &c->session, err, sizeof(err));
        if (rc < 0) {
                audit_exec_free(rq.audit);
                free(c);
                http_reply_errno(r, rc, "%s", err[0] ? err : strerror(-rc));
                goto out;
        }
        if (c->stream) {
                http_reply_stream(r, 200, "application/x-ndjson", &stream_ops, c);
        } else {
                req_on_free(r, request_gone, c);
                http_defer(r);
        }
out:
        free(argv);
        free(stdin_buf);
        json_decref(body);
}
