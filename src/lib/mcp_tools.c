/* The MCP tools of `paddock mcp` and paddockd's POST /mcp: for each, what an agent reads to
 * decide when to use it, the JSON Schema of its arguments, and the API request(s) it is made of
 * (docs/API.md). Arguments are checked against the schema before anything is sent; the daemon
 * checks values (sizes, names, rules) and its message comes back as the tool's error. */
#include "lib/mcp.h"
#include "lib/base64.h"
#include "lib/jsonutil.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*tool_fn)(const struct mcp_backend *c, const json_t *args, struct tool_result *res);

struct tool {
        const char *name;
        const char *title;
        const char *description;
        const char *schema; /* JSON text */
        tool_fn run;
};

/* ------------------------------------------------------------------ schema pieces */

#define ENV_ARG                                                                                    \
        "\"environment\":{\"type\":\"string\",\"minLength\":1,"                                    \
        "\"description\":\"Name of the environment (as given to create_environment).\"}"
#define SIZE_T "[\"string\",\"integer\"]"
#define COMMAND_ARGS                                                                               \
        "\"command\":{\"type\":[\"array\",\"string\"],\"items\":{\"type\":\"string\"},"            \
        "\"minItems\":1,\"minLength\":1,\"description\":\"The program and its arguments as an "    \
        "array ([\\\"python3\\\",\\\"app.py\\\"]), or one string run by /bin/sh -c (pipes, "       \
        "redirections and && work).\"},"                                                           \
        "\"cwd\":{\"type\":\"string\",\"description\":\"Working directory (absolute).\"},"         \
        "\"user\":{\"type\":\"string\",\"description\":\"User to run as: a name, UID or "          \
        "UID:GID (default root).\"},"                                                              \
        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"             \
        "\"description\":\"Extra environment variables.\"},"                                       \
        "\"stdin\":{\"type\":\"string\",\"description\":\"Text fed to the command's standard "     \
        "input (then end of file).\"}"
#define NETWORK_PROPS                                                                              \
        "\"mode\":{\"type\":\"string\",\"enum\":[\"none\",\"allow\",\"open\"],"                    \
        "\"description\":\"none: loopback only; open: the internet (never the host or private "    \
        "ranges); allow: only the hosts in allow.\"},"                                             \
        "\"allow\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"Rules "   \
        "such as example.com:443, *.pypi.org, 1.2.3.0/24. Giving allow without mode sets mode "    \
        "allow.\"}"

/* ------------------------------------------------------------------ helpers */

static const char *arg_str(const json_t *args, const char *key)
{
        return json_string_value(json_object_get(args, key));
}

/* The exec request of run_command and start_process: the command as an array (a string goes
 * to sh -c), the optional fields copied. */
static json_t *exec_body(const json_t *args)
{
        json_t *body = json_object();
        const json_t *cmd = json_object_get(args, "command");
        json_t *argv =
            json_is_string(cmd) ? json_pack("[ssO]", "sh", "-c", cmd) : json_copy((json_t *)cmd);
        if (!body || !argv || json_object_set_new(body, "cmd", argv) < 0) {
                json_decref(body);
                return NULL;
        }
        static const char *const copied[] = {"cwd", "user", "env", "stdin", "timeout"};
        for (size_t i = 0; i < ELEMENTSOF(copied); i++) {
                json_t *v = json_object_get(args, copied[i]);
                if (v && json_object_set(body, copied[i], v) < 0) {
                        json_decref(body);
                        return NULL;
                }
        }
        return body;
}

/* A growing byte buffer for a stream of output chunks. */
struct bytes {
        char *data;
        size_t len;
};

static int bytes_add(struct bytes *b, const json_t *chunk, bool base64)
{
        const char *s = json_string_value(chunk);
        size_t n = json_string_length(chunk);
        if (!s || n == 0)
                return 0;
        char *grown = realloc(b->data, b->len + n + 1);
        if (!grown)
                return -ENOMEM;
        b->data = grown;
        if (base64) {
                long k = base64_decode(s, n, (unsigned char *)b->data + b->len);
                if (k < 0)
                        return -EPROTO;
                b->len += (size_t)k;
        } else {
                memcpy(b->data + b->len, s, n);
                b->len += n;
        }
        return 0;
}

/* Put stdout and stderr into the result, clipped: text for the model, fields for programs. */
static int add_streams(json_t *out, const struct bytes *so, const struct bytes *se)
{
        size_t cut_out = 0, cut_err = 0;
        char *o = mcp_clip_output(so->data ? so->data : "", so->len, "stdout", &cut_out);
        char *e = mcp_clip_output(se->data ? se->data : "", se->len, "stderr", &cut_err);
        int r = -ENOMEM;
        if (o && e && json_object_set_new(out, "stdout", json_string(o)) == 0 &&
            json_object_set_new(out, "stderr", json_string(e)) == 0 &&
            json_object_set_new(out, "stdout_bytes_cut", json_integer((json_int_t)cut_out)) == 0 &&
            json_object_set_new(out, "stderr_bytes_cut", json_integer((json_int_t)cut_err)) == 0)
                r = 0;
        free(o);
        free(e);
        return r;
}

/* The text of a finished or running command for the model: status line, then each stream. */
static void streams_text(struct tool_result *res, const char *status, const json_t *out)
{
        const char *o = json_string_value(json_object_get(out, "stdout"));
        const char *e = json_string_value(json_object_get(out, "stderr"));
        tool_text(res, "%s\n--- stdout ---\n%s%s--- stderr ---\n%s%s", status, o,
                  *o && o[strlen(o) - 1] != '\n' ? "\n" : "", e,
                  *e && e[strlen(e) - 1] != '\n' ? "\n" : "");
}

/* ------------------------------------------------------------------ environments */

static int create_environment(const struct mcp_backend *c, const json_t *args,
                              struct tool_result *res)
{
        struct mcp_response resp = {};
        if (mcp_api_json(c, "POST", "/v1/envs", args, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

static int list_environments(const struct mcp_backend *c, const json_t *args,
                             struct tool_result *res)
{
        _cleanup_free_ char *query = strdup("");
        const char *key;
        const json_t *value;
        json_object_foreach(json_object_get(args, "labels"), key, value)
        {
                _cleanup_free_ char *k = mcp_escape(key);
                _cleanup_free_ char *v = mcp_escape(json_string_value(value));
                char *q = NULL;
                if (!query || !k || !v ||
                    asprintf(&q, "%s%slabel=%s%%3D%s", query, *query ? "&" : "?", k, v) < 0) {
                        tool_fail(res, "out of memory");
                        return 0;
                }
                free(query);
                query = q;
        }
        _cleanup_free_ char *path = NULL;
        if (!query || asprintf(&path, "/v1/envs%s", query) < 0)
                path = NULL;
        struct mcp_response resp = {};
        if (mcp_api_json(c, "GET", path, NULL, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

static int destroy_environment(const struct mcp_backend *c, const json_t *args,
                               struct tool_result *res)
{
        _cleanup_free_ char *path = mcp_env_path(arg_str(args, "environment"), "?force=1");
        struct mcp_response resp = {};
        if (mcp_api_json(c, "DELETE", path, NULL, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

static int set_network_policy(const struct mcp_backend *c, const json_t *args,
                              struct tool_result *res)
{
        _cleanup_free_ char *path = mcp_env_path(arg_str(args, "environment"), "%s", "");
        _cleanup_json_ json_t *network = json_deep_copy(args);
        json_object_del(network, "environment");
        _cleanup_json_ json_t *body = json_pack("{sO}", "network", network);
        if (!body) {
                tool_fail(res, "out of memory");
                return 0;
        }
        struct mcp_response resp = {};
        if (mcp_api_json(c, "PATCH", path, body, &resp, res) < 0)
                return 0;
        json_t *net = json_object_get(resp.json, "network");
        tool_json(res, net ? net : resp.json);
        mcp_response_done(&resp);
        return 0;
}

/* ------------------------------------------------------------------ commands */

/* run_command's timeout when none is given: just under the 60 s request timeout many MCP
 * clients use, so the agent hears that the command timed out (and can choose start_process or
 * a longer timeout) instead of losing the answer. */
#define DEFAULT_TIMEOUT_S 55

static int run_command(const struct mcp_backend *c, const json_t *args, struct tool_result *res)
{
        _cleanup_free_ char *path = mcp_env_path(arg_str(args, "environment"), "/exec");
        _cleanup_json_ json_t *body = exec_body(args);
        if (body && !json_object_get(body, "timeout"))
                json_object_set_new(body, "timeout", json_integer(DEFAULT_TIMEOUT_S));
        if (!body) {
                tool_fail(res, "out of memory");
                return 0;
        }
        struct mcp_response resp = {};
        if (mcp_api_json(c, "POST", path, body, &resp, res) < 0)
                return 0;
        const json_t *j = resp.json;
        bool b64 = json_is_string(json_object_get(j, "encoding"));
        struct bytes so = {}, se = {};
        _cleanup_json_ json_t *out = json_object();
        int r = bytes_add(&so, json_object_get(j, "stdout"), b64);
        if (r >= 0)
                r = bytes_add(&se, json_object_get(j, "stderr"), b64);
        if (r >= 0 && out) {
                json_object_set(out, "exit_code", json_object_get(j, "exit_code"));
                r = add_streams(out, &so, &se);
        }
        free(so.data);
        free(se.data);
        if (r < 0 || !out) {
                tool_fail(res, "cannot read the command's output: %s",
                          strerror(r < 0 ? -r : ENOMEM));
                mcp_response_done(&resp);
                return 0;
        }
        bool timed_out = json_is_true(json_object_get(j, "timed_out"));
        bool truncated = json_is_true(json_object_get(j, "truncated"));
        json_object_set_new(out, "timed_out", json_boolean(timed_out));
        json_object_set_new(out, "daemon_truncated", json_boolean(truncated));
        json_object_set(out, "duration_ms", json_object_get(j, "duration_ms"));
        char status[256];
        snprintf(status, sizeof(status), "exit_code: %lld%s%s",
                 (long long)json_integer_value(json_object_get(j, "exit_code")),
                 timed_out ? " (timed out: the command and its children were killed)" : "",
                 truncated ? " (paddockd stopped keeping output past its limit; later output "
                             "was dropped)"
                           : "");
        streams_text(res, status, out);
        res->structured = TAKE_PTR(out);
        mcp_response_done(&resp);
        return 0;
}

static int start_process(const struct mcp_backend *c, const json_t *args, struct tool_result *res)
{
        _cleanup_free_ char *path = mcp_env_path(arg_str(args, "environment"), "/exec");
        _cleanup_json_ json_t *body = exec_body(args);
        if (!body || json_object_set_new(body, "detach", json_true()) < 0) {
                tool_fail(res, "out of memory");
                return 0;
        }
        struct mcp_response resp = {};
        if (mcp_api_json(c, "POST", path, body, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        char *text = NULL;
        if (asprintf(&text,
                     "started process %lld (%s); read its output with read_process_output "
                     "{\"environment\":\"%s\",\"id\":%lld}\n%s",
                     (long long)json_integer_value(json_object_get(resp.json, "id")),
                     json_is_string(json_object_get(resp.json, "state"))
                         ? json_string_value(json_object_get(resp.json, "state"))
                         : "running",
                     arg_str(args, "environment"),
                     (long long)json_integer_value(json_object_get(resp.json, "id")),
                     res->text ? res->text : "") >= 0) {
                free(res->text);
                res->text = text;
        }
        mcp_response_done(&resp);
        return 0;
}

static int kill_process(const struct mcp_backend *c, const json_t *args, struct tool_result *res)
{
        json_int_t id = json_integer_value(json_object_get(args, "id"));
        _cleanup_free_ char *path =
            mcp_env_path(arg_str(args, "environment"), "/processes/%lld/signal", (long long)id);
        const char *sig = arg_str(args, "signal");
        _cleanup_json_ json_t *body = json_pack("{ss}", "signal", sig ? sig : "TERM");
        struct mcp_response resp = {};
        if (mcp_api_json(c, "POST", path, body, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

/* One NDJSON line of a process's output into so/se/exit. */
static int take_output_line(const char *line, size_t len, struct bytes *so, struct bytes *se,
                            json_t *out)
{
        if (len == 0)
                return 0;
        _cleanup_json_ json_t *j = json_loadb(line, len, 0, NULL);
        if (!json_is_object(j))
                return -EPROTO;
        bool b64 = json_is_string(json_object_get(j, "encoding"));
        if (json_object_get(j, "stdout"))
                return bytes_add(so, json_object_get(j, "stdout"), b64);
        if (json_object_get(j, "stderr"))
                return bytes_add(se, json_object_get(j, "stderr"), b64);
        if (json_object_get(j, "exit_code")) {
                json_object_set(out, "exit_code", json_object_get(j, "exit_code"));
                json_object_set(out, "timed_out", json_object_get(j, "timed_out"));
        }
        return 0;
}

/* How long read_process_output's wait waits: under the 60 s a request may take in many MCP
 * clients (the SDKs' default), so the answer, with "still running", arrives before they give
 * up on it. */
#define WAIT_MAX_MS 50000

/* Wait until the process has exited or WAIT_MAX_MS have passed, looking at its record now and
 * then: the daemon's wait routes block without a limit, and a tool call must not. 0 (also when
 * it still runs), or -1 after making res an error. */
static int wait_for_exit(const struct mcp_backend *c, const char *env, json_int_t id,
                         struct tool_result *res)
{
        _cleanup_free_ char *path = mcp_env_path(env, "/processes/%lld", (long long)id);
        unsigned slept_ms = 0, step_ms = 50;
        for (;;) {
                struct mcp_response resp = {};
                if (mcp_api_json(c, "GET", path, NULL, &resp, res) < 0)
                        return -1;
                const char *state = json_string_value(json_object_get(resp.json, "state"));
                bool exited = state && strcmp(state, "running") != 0;
                mcp_response_done(&resp);
                if (exited || slept_ms >= WAIT_MAX_MS)
                        return 0;
                c->sleep_ms(c->data, step_ms);
                slept_ms += step_ms;
                if (step_ms < 500)
                        step_ms *= 2;
        }
}

static int read_process_output(const struct mcp_backend *c, const json_t *args,
                               struct tool_result *res)
{
        json_int_t id = json_integer_value(json_object_get(args, "id"));
        const char *env = arg_str(args, "environment");
        if (json_is_true(json_object_get(args, "wait")) && wait_for_exit(c, env, id, res) < 0)
                return 0;
        _cleanup_free_ char *path = mcp_env_path(env, "/processes/%lld/output", (long long)id);
        struct mcp_response resp = {};
        if (mcp_api_json(c, "GET", path, NULL, &resp, res) < 0)
                return 0;
        struct bytes so = {}, se = {};
        _cleanup_json_ json_t *out =
            json_pack("{sIsssn}", "id", id, "state", "running", "exit_code");
        int r = out ? 0 : -ENOMEM;
        for (const char *p = resp.body ? resp.body : ""; r >= 0 && *p;) {
                size_t n = strcspn(p, "\n");
                r = take_output_line(p, n, &so, &se, out);
                p += n + (p[n] == '\n');
        }
        if (r >= 0 && json_integer_value(json_object_get(out, "exit_code")) >= 0 &&
            json_is_integer(json_object_get(out, "exit_code")))
                json_object_set_new(out, "state", json_string("exited"));
        if (r >= 0)
                r = add_streams(out, &so, &se);
        free(so.data);
        free(se.data);
        mcp_response_done(&resp);
        if (r < 0) {
                tool_fail(res, "cannot read the process's output: %s", strerror(-r));
                return 0;
        }
        char status[160];
        const json_t *code = json_object_get(out, "exit_code");
        if (json_is_integer(code))
                snprintf(status, sizeof(status), "process %lld exited, exit_code: %lld%s",
                         (long long)id, (long long)json_integer_value(code),
                         json_is_true(json_object_get(out, "timed_out")) ? " (timed out)" : "");
        else
                snprintf(status, sizeof(status),
                         "process %lld is still running (output so far; call again later, or "
                         "with wait true to wait up to 50 s for its end)",
                         (long long)id);
        streams_text(res, status, out);
        res->structured = TAKE_PTR(out);
        return 0;
}

/* ------------------------------------------------------------------ files */

/* "?path=P" plus more query text, P escaped. */
static char *path_query(const json_t *args, const char *route, const char *more)
{
        _cleanup_free_ char *p = mcp_escape(arg_str(args, "path"));
        if (!p)
                return NULL;
        return mcp_env_path(arg_str(args, "environment"), "%s?path=%s%s", route, p,
                            more ? more : "");
}

static int read_file(const struct mcp_backend *c, const json_t *args, struct tool_result *res)
{
        json_int_t max = json_integer_value(json_object_get(args, "max_bytes"));
        char more[48];
        snprintf(more, sizeof(more), "&max=%lld", (long long)(max > 0 ? max : 1 << 20));
        _cleanup_free_ char *path = path_query(args, "/files", more);
        struct mcp_response resp = {};
        if (mcp_api_json(c, "GET", path, NULL, &resp, res) < 0)
                return 0;
        const char *data = resp.body ? resp.body : "";
        bool text = utf8_valid(data, resp.len) && strlen(data) == resp.len;
        _cleanup_free_ char *b64 = NULL;
        if (!text) {
                b64 = malloc(base64_encoded_size(resp.len) + 1);
                if (!b64) {
                        tool_fail(res, "out of memory");
                        mcp_response_done(&resp);
                        return 0;
                }
                base64_encode(data, resp.len, b64);
        }
        res->structured =
            json_pack("{sssIssss}", "path", arg_str(args, "path"), "size", (json_int_t)resp.len,
                      "encoding", text ? "utf-8" : "base64", "content", text ? data : b64);
        if (text)
                tool_text(res, "%s", data);
        else
                tool_text(res, "[binary file %s, %zu bytes, base64-encoded:]\n%s",
                          arg_str(args, "path"), resp.len, b64);
        mcp_response_done(&resp);
        return 0;
}

static int write_file(const struct mcp_backend *c, const json_t *args, struct tool_result *res)
{
        const char *mode = arg_str(args, "mode");
        _cleanup_free_ char *m = mode ? mcp_escape(mode) : NULL;
        char more[64] = "";
        if (m)
                snprintf(more, sizeof(more), "&mode=%.32s", m);
        _cleanup_free_ char *path = path_query(args, "/files", more);
        const json_t *content = json_object_get(args, "content");
        const char *enc = arg_str(args, "encoding");
        _cleanup_free_ unsigned char *decoded = NULL;
        const char *body = json_string_value(content);
        size_t len = json_string_length(content);
        if (enc && strcmp(enc, "base64") == 0) {
                decoded = malloc(len / 4 * 3 + 3);
                long n = decoded ? base64_decode(body, len, decoded) : -1;
                if (n < 0) {
                        tool_fail(res, "content: not valid base64");
                        return 0;
                }
                body = (const char *)decoded;
                len = (size_t)n;
        }
        if (!path) {
                tool_fail(res, "out of memory");
                return 0;
        }
        struct mcp_request req = {
            .method = "PUT",
            .path = path,
            .body = body,
            .body_len = len,
            .content_type = "application/octet-stream",
        };
        struct mcp_response resp = {};
        if (mcp_api(c, &req, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

static int list_files(const struct mcp_backend *c, const json_t *args, struct tool_result *res)
{
        _cleanup_free_ char *path = path_query(args, "/files/list", NULL);
        struct mcp_response resp = {};
        if (mcp_api_json(c, "GET", path, NULL, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

/* ------------------------------------------------------------------ storage */

static int snapshot(const struct mcp_backend *c, const json_t *args, struct tool_result *res)
{
        _cleanup_free_ char *path = mcp_env_path(arg_str(args, "environment"), "/snapshots");
        _cleanup_json_ json_t *body = json_object();
        if (body && json_object_get(args, "name"))
                json_object_set(body, "name", json_object_get(args, "name"));
        struct mcp_response resp = {};
        if (mcp_api_json(c, "POST", path, body, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

static int fork_environment(const struct mcp_backend *c, const json_t *args,
                            struct tool_result *res)
{
        _cleanup_free_ char *path = mcp_env_path(arg_str(args, "environment"), "/fork");
        _cleanup_json_ json_t *body = json_deep_copy(args);
        json_object_del(body, "environment");
        struct mcp_response resp = {};
        if (mcp_api_json(c, "POST", path, body, &resp, res) < 0)
                return 0;
        tool_json(res, resp.json);
        mcp_response_done(&resp);
        return 0;
}

/* ------------------------------------------------------------------ the table */

static const struct tool tools[] = {
    {"create_environment", "Create an environment",
     "Create and start an isolated Linux environment to run code in. kind \"sandbox\" (the "
     "default) is throw-away: writable only below /tmp and /workspace, destroyed after its TTL "
     "(1 h by default). kind \"computer\" is persistent: its own writable disk, no TTL unless "
     "given, and it can be snapshotted and forked. Use this before run_command when you need a "
     "new place to work; returns the environment object (state, limits, network, ip).",
     "{\"type\":\"object\",\"properties\":{"
     "\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"A new name: letters, "
     "digits, -, _, . (at most 63).\"},"
     "\"kind\":{\"type\":\"string\",\"enum\":[\"sandbox\",\"computer\"]},"
     "\"image\":{\"type\":\"string\",\"description\":\"Root filesystem image (default: the "
     "daemon's default image).\"},"
     "\"cpus\":{\"type\":[\"number\",\"string\"],\"description\":\"CPU limit, e.g. 1.5.\"},"
     "\"memory\":{\"type\":" SIZE_T ",\"description\":\"Memory limit, e.g. \\\"512M\\\".\"},"
     "\"disk\":{\"type\":" SIZE_T ",\"description\":\"Disk limit, e.g. \\\"10G\\\".\"},"
     "\"pids\":{\"type\":\"integer\",\"minimum\":4,\"description\":\"Process limit.\"},"
     "\"ttl\":{\"type\":" SIZE_T ",\"description\":\"Destroy it after this long, e.g. "
     "\\\"30m\\\" (0: never).\"},"
     "\"network\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":"
     "{" NETWORK_PROPS "}},"
     "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
     "\"description\":\"Environment variables of every process in it.\"},"
     "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
     "\"description\":\"Labels to find it by later.\"}"
     "},\"required\":[\"name\"],\"additionalProperties\":false}",
     create_environment},
    {"run_command", "Run a command",
     "Run a command inside a running environment and wait for it to finish. Returns its "
     "exit_code, stdout and stderr. Use it for anything short: installing packages, building, "
     "running tests or scripts. Each stream is limited to about 100 KB: longer output keeps its "
     "start and end and says how many bytes were cut. The default timeout is 55 s (MCP clients "
     "often give up on a call after 60 s); for servers, long builds or anything longer use "
     "start_process.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG "," COMMAND_ARGS ","
     "\"timeout\":{\"type\":" SIZE_T ",\"description\":\"Kill it after this long: seconds, or "
     "\\\"90s\\\", \\\"10m\\\" (default 55 s).\"}"
     "},\"required\":[\"environment\",\"command\"],\"additionalProperties\":false}",
     run_command},
    {"start_process", "Start a background process",
     "Start a command in the background inside a running environment and return at once with "
     "its process id: for servers, watchers and long builds. Read what it printed, and whether "
     "it has exited, with read_process_output.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG "," COMMAND_ARGS ","
     "\"timeout\":{\"type\":" SIZE_T ",\"description\":\"Kill it after this long (default: "
     "never).\"}"
     "},\"required\":[\"environment\",\"command\"],\"additionalProperties\":false}",
     start_process},
    {"read_process_output", "Read a background process's output",
     "Return what a process started with start_process has printed so far (its newest 1 MiB, "
     "stdout and stderr separately, each cut to about 100 KB) and, once it has exited, its "
     "exit_code. With wait true, first wait up to 50 s for the process to exit (call again if it "
     "still runs).",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG ","
     "\"id\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"The id start_process "
     "returned.\"},"
     "\"wait\":{\"type\":\"boolean\",\"description\":\"Wait up to 50 s for the process to exit "
     "first "
     "(default false).\"}"
     "},\"required\":[\"environment\",\"id\"],\"additionalProperties\":false}",
     read_process_output},
    {"kill_process", "Stop a background process",
     "Send a signal to a process started with start_process: TERM (the default) asks it to "
     "stop, KILL stops it at once, INT is Ctrl-C. Use it to stop a server or a build you no "
     "longer need; read_process_output then shows how it ended.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG ","
     "\"id\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"The id start_process "
     "returned.\"},"
     "\"signal\":{\"type\":\"string\",\"enum\":[\"TERM\",\"KILL\",\"INT\",\"HUP\","
     "\"QUIT\",\"USR1\",\"USR2\"],\"description\":\"Default TERM.\"}"
     "},\"required\":[\"environment\",\"id\"],\"additionalProperties\":false}",
     kill_process},
    {"read_file", "Read a file",
     "Read a file inside a running environment. Text comes back as it is; a file that is not "
     "UTF-8 text comes back base64-encoded (encoding \"base64\").",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG ","
     "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Absolute path inside the "
     "environment.\"},"
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Refuse files larger "
     "than this (default 1048576).\"}"
     "},\"required\":[\"environment\",\"path\"],\"additionalProperties\":false}",
     read_file},
    {"write_file", "Write a file",
     "Create or replace a file inside a running environment (parent directories are made). "
     "Prefer this to echo or heredocs in run_command for source code and configuration. A "
     "sandbox can write only below /tmp and /workspace.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG ","
     "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Absolute path inside the "
     "environment.\"},"
     "\"content\":{\"type\":\"string\",\"description\":\"The whole new content.\"},"
     "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\",\"base64\"],\"description\":"
     "\"How content is given (default utf-8; base64 for binary data).\"},"
     "\"mode\":{\"type\":\"string\",\"description\":\"Permission bits in octal, e.g. "
     "\\\"0755\\\" for a script (default: kept, or 0644 for a new file).\"}"
     "},\"required\":[\"environment\",\"path\",\"content\"],\"additionalProperties\":false}",
     write_file},
    {"list_files", "List a directory",
     "List a directory inside a running environment: name, type (file, dir, symlink, other), "
     "size, mode and mtime of each entry, sorted by name.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG ","
     "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Absolute path of the "
     "directory.\"}"
     "},\"required\":[\"environment\",\"path\"],\"additionalProperties\":false}",
     list_files},
    {"snapshot", "Snapshot a computer",
     "Take a read-only, copy-on-write snapshot of a computer's disk (not a sandbox), e.g. "
     "before a risky change. A running computer is frozen for the milliseconds it takes. Use "
     "fork with the snapshot's name to start a new computer from it.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG ","
     "\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Snapshot name (default "
     "snap-DATE-TIME).\"}"
     "},\"required\":[\"environment\"],\"additionalProperties\":false}",
     snapshot},
    {"fork", "Fork a computer",
     "Create and start a new computer that is a copy-on-write copy of a computer's disk as it "
     "is now (or of one of its snapshots), with the same image, limits and network policy. Use "
     "it to try several approaches in parallel from the same state.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG ","
     "\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Name of the new "
     "computer.\"},"
     "\"snapshot\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Copy this snapshot "
     "instead of the current disk.\"}"
     "},\"required\":[\"environment\",\"name\"],\"additionalProperties\":false}",
     fork_environment},
    {"destroy_environment", "Destroy an environment",
     "Destroy an environment and everything in it (processes, files, snapshots), also while it "
     "runs. Use it when you are done, to free resources. This cannot be undone.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG
     "},\"required\":[\"environment\"],\"additionalProperties\":false}",
     destroy_environment},
    {"list_environments", "List environments",
     "List the environments you can use, with their kind, state, image, limits, usage and "
     "network. Use it to find an existing environment instead of creating a new one.",
     "{\"type\":\"object\",\"properties\":{"
     "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
     "\"description\":\"Only environments with all these labels.\"}"
     "},\"additionalProperties\":false}",
     list_environments},
    {"set_network_policy", "Set the network policy",
     "Change what an environment may reach on the network, at once (also while it runs): mode "
     "none (loopback only), open (the internet, never the host or private ranges) or allow (only "
     "the hosts and addresses in allow). Fields left out keep their value; a list given "
     "replaces the old one. links names other environments it may talk to.",
     "{\"type\":\"object\",\"properties\":{" ENV_ARG "," NETWORK_PROPS ","
     "\"links\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":"
     "\"Environments this one may reach and be reached by.\"}"
     "},\"required\":[\"environment\"],\"additionalProperties\":false}",
     set_network_policy},
};

/* The parsed schemas, made once (they are constants; a failure to parse one is a bug that the
 * tests catch, and makes the tool unlisted). */
static json_t *schemas[ELEMENTSOF(tools)];

static const json_t *tool_schema(size_t i)
{
        if (!schemas[i])
                schemas[i] = json_loads(tools[i].schema, 0, NULL);
        return schemas[i];
}

json_t *mcp_tools_list(void)
{
        json_t *list = json_array();
        for (size_t i = 0; list && i < ELEMENTSOF(tools); i++) {
                const json_t *schema = tool_schema(i);
                if (!schema)
                        continue;
                json_t *t = json_pack("{sssssssO}", "name", tools[i].name, "title", tools[i].title,
                                      "description", tools[i].description, "inputSchema", schema);
                if (!t || json_array_append_new(list, t) < 0) {
                        json_decref(list);
                        return NULL;
                }
        }
        return list;
}

int mcp_tool_call(const struct mcp_backend *c, const char *name, const json_t *args,
                  struct tool_result *res, char **ret_why)
{
        for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
                if (strcmp(tools[i].name, name) != 0)
                        continue;
                const json_t *schema = tool_schema(i);
                _cleanup_json_ json_t *empty = json_object();
                if (!schema || !empty)
                        return -ENOMEM;
                char why[512];
                if (mcp_schema_check(schema, args ? args : empty, "", why, sizeof(why)) < 0) {
                        char *w = NULL;
                        if (asprintf(&w, "invalid arguments for %s: %s", name, why) < 0)
                                return -ENOMEM;
                        *ret_why = w;
                        return -EINVAL;
                }
                *res = (struct tool_result){};
                return tools[i].run(c, args ? args : empty, res);
        }
        char *w = NULL;
        if (asprintf(&w, "unknown tool: %s", name) < 0)
                return -ENOMEM;
        *ret_why = w;
        return -EINVAL;
}
