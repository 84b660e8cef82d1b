#include "cli/procout.h"
#include "lib/base64.h"
#include "lib/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The longest NDJSON line accepted from the daemon (its chunks are far smaller). */
#define LINE_MAX_BYTES (64u << 20)

void procout_init(struct procout *o, const char *verb)
{
        *o = (struct procout){.verb = verb, .lines = {.max = LINE_MAX_BYTES}};
}

void procout_done(struct procout *o)
{
        lines_done(&o->lines);
}

/* Write one output chunk to fd, decoding base64 first when the line said so. */
static int emit(struct procout *o, int fd, const json_t *chunk, bool base64)
{
        const char *s = json_string_value(chunk);
        size_t len = json_string_length(chunk);
        if (!s || len == 0)
                return 0;
        unsigned char *decoded = NULL;
        if (base64) {
                decoded = malloc(len / 4 * 3 + 3);
                if (!decoded)
                        return -ENOMEM;
                long n = base64_decode(s, len, decoded);
                if (n < 0) {
                        free(decoded);
                        fprintf(stderr, "paddock: %s: bad base64 output from paddockd\n", o->verb);
                        o->failed = true;
                        return -EPROTO;
                }
                s = (const char *)decoded;
                len = (size_t)n;
        }
        int r = write_all(fd, s, len);
        free(decoded);
        if (r == -EPIPE) {
                o->broken_pipe = true;
                return r;
        }
        if (r < 0) {
                fprintf(stderr, "paddock: %s: cannot write output: %s\n", o->verb, strerror(-r));
                o->failed = true;
        }
        return r;
}

static int on_line(char *line, size_t len, void *userdata)
{
        struct procout *o = userdata;
        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
                len--;
        if (len == 0)
                return 0;
        json_error_t err;
        json_t *j = json_loadb(line, len, JSON_ALLOW_NUL, &err);
        if (!json_is_object(j)) {
                fprintf(stderr, "paddock: %s: unreadable output line from paddockd: %s\n", o->verb,
                        j ? "not an object" : err.text);
                json_decref(j);
                o->failed = true;
                return -EPROTO;
        }
        int r = 0;
        const json_t *error = json_object_get(j, "error");
        if (error) {
                const char *msg = json_string_value(json_object_get(error, "message"));
                if (msg)
                        fprintf(stderr, "paddock: %.*s\n", (int)strcspn(msg, "\r\n"), msg);
                else
                        fprintf(stderr, "paddock: %s failed\n", o->verb);
                o->failed = true;
                r = -EPROTO;
                goto out;
        }
        const char *enc = json_string_value(json_object_get(j, "encoding"));
        bool b64 = enc && strcmp(enc, "base64") == 0;
        r = emit(o, STDOUT_FILENO, json_object_get(j, "stdout"), b64);
        if (r >= 0)
                r = emit(o, STDERR_FILENO, json_object_get(j, "stderr"), b64);
        if (r < 0)
                goto out;
        const json_t *code = json_object_get(j, "exit_code");
        if (json_is_integer(code)) {
                o->have_exit = true;
                json_int_t c = json_integer_value(code);
                o->exit_code = c < 0 || c > 255 ? 255 : (int)c;
                o->timed_out = json_is_true(json_object_get(j, "timed_out"));
                o->truncated = json_is_true(json_object_get(j, "truncated"));
                o->duration_ms = (long long)json_integer_value(json_object_get(j, "duration_ms"));
        }
out:
        json_decref(j);
        return r;
}

static bool on_data(const char *data, size_t len, void *userdata)
{
        struct procout *o = userdata;
        int r = lines_feed(&o->lines, data, len, on_line, o);
        if (r == -E2BIG || r == -ENOMEM) {
                fprintf(stderr, "paddock: %s: %s\n", o->verb,
                        r == -E2BIG ? "output line from paddockd is too long" : "out of memory");
                o->failed = true;
        }
        return r >= 0;
}

int procout_perform(struct client *c, struct request *req, struct procout *o)
{
        struct response resp = {};
        int r = -1;
        req->sink = on_data;
        req->sink_data = o;
        if (client_perform(c, req, &resp) < 0)
                goto out;
        if (resp.status < 200 || resp.status >= 300) {
                client_print_error(&resp);
                goto out;
        }
        if (lines_finish(&o->lines, on_line, o) < 0)
                goto out;
        r = 0;
out:
        response_done(&resp);
        return r;
}
