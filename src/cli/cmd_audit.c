/* paddock audit [--env NAME] [--token NAME] [--since DUR] [--limit N] [--json]: the daemon's
 * audit log (GET /v1/audit), oldest first, as a table or as the daemon's JSON. */
#include "cli/calls.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char audit_help[] =
    "Usage: paddock audit [--env NAME] [--token NAME] [--since DUR|TIME] [--limit N] [--json]\n"
    "\n"
    "Print the audit log: every change made through the API and every command run in an\n"
    "environment, oldest first: time, token ('-' for the local administrator), environment,\n"
    "action (method and route), status, and details (command and exit code, file path and\n"
    "size, the fields of the request).\n"
    "\n"
    "  --env NAME      only records about environment NAME\n"
    "  --token NAME    only records of token NAME ('' for the local administrator)\n"
    "  --since DUR     only records of the last DUR (90s, 30m, 24h) or since an RFC 3339 time\n"
    "                  (2026-12-02T02:00:00Z)\n"
    "  --limit N       at most the newest N records (default 1000, at most 10000)\n"
    "  --json          print the daemon's answer as JSON\n";

enum { OPT_ENV = OPT_FIRST_VERB_OPTION, OPT_TOKEN, OPT_SINCE, OPT_LIMIT };

static const struct option audit_options[] = {
    {"env", required_argument, NULL, OPT_ENV},
    {"token", required_argument, NULL, OPT_TOKEN},
    {"since", required_argument, NULL, OPT_SINCE},
    {"limit", required_argument, NULL, OPT_LIMIT},
    CLI_COMMON_OPTIONS,
    {},
};

struct audit_args {
        const char *env, *token, *since, *limit;
};

static int audit_option(void *userdata, int c, const char *verb)
{
        struct audit_args *a = userdata;
        switch (c) {
        case OPT_ENV:
                a->env = optarg;
                return -1;
        case OPT_TOKEN:
                a->token = optarg;
                return -1;
        case OPT_SINCE:
                a->since = optarg;
                return -1;
        case OPT_LIMIT:
                a->limit = optarg;
                return -1;
        default:
                return 0;
        }
}

static const struct verb_syntax audit_syntax = {
    .verb = "audit",
    .help = audit_help,
    .options = audit_options,
    .own = audit_option,
};

/* Fields every record has; the rest is the DETAIL column. */
static bool is_head_field(const char *k)
{
        static const char *const head[] = {"time", "token", "action", "env", "status", NULL};
        for (size_t i = 0; head[i]; i++)
                if (!strcmp(k, head[i]))
                        return true;
        return false;
}

static void append(char **buf, size_t *len, const char *s)
{
        size_t n = strlen(s);
        char *nb = realloc(*buf, *len + n + 1);
        if (!nb)
                return;
        memcpy(nb + *len, s, n + 1);
        *buf = nb;
        *len += n;
}

/* "sh -c 'exit 3' -> exit 3  path=/x size=12 ..." */
static char *detail_of(const json_t *rec)
{
        char *buf = NULL;
        size_t len = 0;
        append(&buf, &len, "");
        const json_t *argv = json_object_get(rec, "argv");
        size_t i;
        const json_t *a;
        json_array_foreach(argv, i, a)
        {
                if (i)
                        append(&buf, &len, " ");
                const char *s = json_string_value(a);
                bool quote = s && (!*s || strpbrk(s, " \t'\"\\$;&|<>()*?"));
                if (quote)
                        append(&buf, &len, "'");
                append(&buf, &len, s ? s : "");
                if (quote)
                        append(&buf, &len, "'");
        }
        if (json_object_get(rec, "argv_truncated"))
                append(&buf, &len, " ...");
        const json_t *code = json_object_get(rec, "exit_code");
        if (json_is_integer(code)) {
                char t[48];
                snprintf(t, sizeof(t), " -> exit %lld", (long long)json_integer_value(code));
                append(&buf, &len, t);
        }
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)rec, k, v)
        {
                if (is_head_field(k) || !strcmp(k, "argv") || !strcmp(k, "argv_truncated") ||
                    !strcmp(k, "exit_code") || !strcmp(k, "duration_ms"))
                        continue;
                if (len)
                        append(&buf, &len, "  ");
                append(&buf, &len, k);
                append(&buf, &len, "=");
                if (json_is_string(v)) {
                        append(&buf, &len, json_string_value(v));
                } else {
                        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                        append(&buf, &len, t ? t : "?");
                        free(t);
                }
        }
        return buf;
}

static int audit_row(struct table *t, const json_t *rec, time_t now)
{
        char status[16];
        snprintf(status, sizeof(status), "%lld",
                 (long long)json_integer_value(json_object_get(rec, "status")));
        const char *token = json_string_value(json_object_get(rec, "token"));
        const char *env = json_string_value(json_object_get(rec, "env"));
        char *detail = detail_of(rec);
        const char *cells[] = {json_string_value(json_object_get(rec, "time")),
                               token && *token ? token : NULL,
                               env && *env ? env : NULL,
                               json_string_value(json_object_get(rec, "action")),
                               status,
                               detail && *detail ? detail : NULL};
        int r = table_add(t, cells);
        free(detail);
        return r;
}

static int add_query(struct client *client, char **q, const char *key, const char *value)
{
        if (!value)
                return 0;
        char *esc = client_escape(client, value), *n = NULL;
        if (!esc || asprintf(&n, "%s%s%s=%s", *q, **q ? "&" : "?", key, esc) < 0)
                n = NULL;
        free(esc);
        free(*q);
        *q = n;
        return n ? 0 : -ENOMEM;
}

int cmd_audit(struct cli *cli, int argc, char **argv)
{
        struct audit_args a = {};
        int r = opts_parse(cli, argc, argv, &audit_syntax, &a);
        if (r >= 0)
                return r;
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        char *q = strdup(""), *path = NULL;
        if (!q || add_query(client, &q, "env", a.env) < 0 ||
            add_query(client, &q, "token", a.token) < 0 ||
            add_query(client, &q, "since", a.since) < 0 ||
            add_query(client, &q, "limit", a.limit) < 0 || asprintf(&path, "/v1/audit%s", q) < 0) {
                free(q);
                fprintf(stderr, "paddock: out of memory\n");
                return EXIT_FAIL;
        }
        free(q);
        static const char *const headers[] = {"TIME", "TOKEN", "ENV", "ACTION", "STATUS", "DETAIL"};
        r = call_print_list(cli, path, "records", headers, ELEMENTSOF(headers), audit_row);
        free(path);
        return r;
}
