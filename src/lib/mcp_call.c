/* What the MCP tools share: API requests whose failures become tool errors, and command output
 * made into text an agent can take in. */
#include "lib/mcp.h"
#include "lib/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tool_result_done(struct tool_result *res)
{
        free(res->text);
        json_decref(res->structured);
        *res = (struct tool_result){};
}

static void tool_vtext(struct tool_result *res, const char *fmt, va_list ap)
{
        free(res->text);
        if (vasprintf(&res->text, fmt, ap) < 0)
                res->text = NULL;
}

void tool_text(struct tool_result *res, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        tool_vtext(res, fmt, ap);
        va_end(ap);
}

void tool_fail(struct tool_result *res, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        tool_vtext(res, fmt, ap);
        va_end(ap);
        res->is_error = true;
}

void tool_json(struct tool_result *res, json_t *j)
{
        if (!j) {
                tool_fail(res, "paddockd's answer is not JSON");
                return;
        }
        free(res->text);
        res->text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(res->structured);
        res->structured = json_incref(j);
}

void mcp_response_done(struct mcp_response *r)
{
        free(r->body);
        json_decref(r->json);
        *r = (struct mcp_response){};
}

/* The daemon's message of an error answer, one line. */
static void fail_from_response(const struct mcp_response *r, struct tool_result *res)
{
        const json_t *err = json_object_get(r->json, "error");
        const char *msg = json_string_value(json_object_get(err, "message"));
        const char *code = json_string_value(json_object_get(err, "code"));
        if (msg && *msg) {
                tool_fail(res, "%.*s (HTTP %ld%s%s)", (int)strcspn(msg, "\r\n"), msg, r->status,
                          code ? " " : "", code ? code : "");
                return;
        }
        const char *body = r->body ? r->body : "";
        int n = (int)strcspn(body, "\r\n");
        tool_fail(res, "paddockd answered HTTP %ld%s%.*s", r->status, n ? ": " : "",
                  n > 200 ? 200 : n, body);
}

int mcp_api(const struct mcp_backend *b, const struct mcp_request *req, struct mcp_response *ret,
            struct tool_result *res)
{
        struct mcp_response resp = {};
        _cleanup_free_ char *why = NULL;
        if (b->perform(b->data, req, &resp, &why) < 0) {
                tool_fail(res, "%s", why && *why ? why : "request to paddockd failed");
                return -1;
        }
        if (resp.status < 200 || resp.status > 299) {
                fail_from_response(&resp, res);
                mcp_response_done(&resp);
                return -1;
        }
        *ret = resp;
        return 0;
}

int mcp_api_json(const struct mcp_backend *b, const char *method, const char *path,
                 const json_t *body, struct mcp_response *ret, struct tool_result *res)
{
        if (!path) {
                tool_fail(res, "out of memory");
                return -1;
        }
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        if (body && !text) {
                tool_fail(res, "out of memory");
                return -1;
        }
        struct mcp_request req = {
            .method = method,
            .path = path,
            .body = text,
            .body_len = text ? strlen(text) : 0,
        };
        return mcp_api(b, &req, ret, res);
}

char *mcp_escape(const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        char *out = malloc(strlen(s) * 3 + 1), *o = out;
        if (!out)
                return NULL;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
                        *o++ = (char)*p;
                } else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = 0;
        return out;
}

char *mcp_env_path(const char *name, const char *suffix_fmt, ...)
{
        _cleanup_free_ char *esc = mcp_escape(name);
        _cleanup_free_ char *suffix = NULL;
        va_list ap;
        va_start(ap, suffix_fmt);
        int k = vasprintf(&suffix, suffix_fmt, ap);
        va_end(ap);
        char *path = NULL;
        if (!esc || k < 0 || asprintf(&path, "/v1/envs/%s%s", esc, suffix) < 0)
                return NULL;
        return path;
}

/* Bytes of the UTF-8 sequence a lead byte starts; 0 for a byte no sequence starts with. */
static size_t seq_len(unsigned char b)
{
        if (b == 0)
                return 0; /* NUL: text that goes through C strings cannot hold it */
        if (b < 0x80)
                return 1;
        if ((b & 0xe0) == 0xc0)
                return 2;
        if ((b & 0xf0) == 0xe0)
                return 3;
        if ((b & 0xf8) == 0xf0)
                return 4;
        return 0;
}

/* Append s[0..len) to out as valid UTF-8 (each bad byte becomes U+FFFD). out has room for
 * 3 * len bytes. */
static size_t put_text(char *out, const char *s, size_t len)
{
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                size_t n = seq_len((unsigned char)s[i]);
                if (n && i + n <= len && utf8_valid(s + i, n)) {
                        memcpy(out + o, s + i, n);
                        o += n;
                        i += n;
                } else {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        return o;
}

char *mcp_clip_output(const char *data, size_t len, const char *stream, size_t *ret_cut)
{
        size_t head = len, tail_at = len, cut = 0;
        if (len > MCP_STREAM_MAX) {
                head = MCP_STREAM_HEAD;
                tail_at = len - (MCP_STREAM_MAX - MCP_STREAM_HEAD);
                /* Start the tail at a character, not inside one. */
                for (int k = 0; k < 3 && ((unsigned char)data[tail_at] & 0xc0) == 0x80; k++)
                        tail_at++;
                head = utf8_whole_prefix(data, head);
                cut = tail_at - head;
        }
        char note[160] = "";
        if (cut)
                snprintf(note, sizeof(note),
                         "\n[... %zu bytes of %s cut here: it had %zu bytes; the first %zu and "
                         "the last %zu are shown ...]\n",
                         cut, stream, len, head, len - tail_at);
        size_t kept = head + (len - tail_at);
        char *out = malloc(kept * 3 + strlen(note) + 1);
        if (!out)
                return NULL;
        size_t o = put_text(out, data, head);
        memcpy(out + o, note, strlen(note));
        o += strlen(note);
        o += put_text(out + o, data + tail_at, len - tail_at);
        out[o] = 0;
        *ret_cut = cut;
        return out;
}
