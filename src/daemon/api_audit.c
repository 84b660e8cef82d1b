/* GET /v1/audit?env=NAME&token=NAME&since=DUR|RFC3339&limit=N: records of the audit log
 * (audit.h), oldest first, the newest `limit` of those that match. An agent token sees only
 * its own records. */
#include "daemon/api.h"
#include "daemon/audit.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <time.h>

/* since: a duration back from now ("90s", "24h") or an RFC 3339 UTC time
 * ("2026-12-02T02:00:00Z", with or without .mmm), into the records' own format. */
static bool parse_since(const char *s, char out[static AUDIT_TIME_SIZE])
{
        uint64_t secs;
        time_t t;
        unsigned ms = 0;
        if (parse_duration_s(s, &secs) >= 0) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                if (secs > (uint64_t)now.tv_sec)
                        secs = (uint64_t)now.tv_sec;
                t = now.tv_sec - (time_t)secs;
                ms = (unsigned)(now.tv_nsec / 1000000);
        } else {
                struct tm tm = {0};
                const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
                if (!end)
                        return false;
                if (*end == '.') {
                        unsigned frac = 0, digits = 0;
                        for (end++; *end >= '0' && *end <= '9'; end++, digits++)
                                if (digits < 3)
                                        frac = frac * 10 + (unsigned)(*end - '0');
                        if (digits == 0)
                                return false;
                        for (; digits < 3; digits++)
                                frac *= 10;
                        ms = frac;
                }
                if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
                        return false;
                t = timegm(&tm);
        }
        audit_format_time(t, ms, out);
        return true;
}

void api_audit_get(struct request *r, struct engine *e)
{
        struct caller c;
        api_caller(r, &c);
        struct audit_filter f = {.limit = AUDIT_QUERY_DEFAULT_LIMIT};
        const char *env = req_query(r, "env"), *token = req_query(r, "token");
        const char *since = req_query(r, "since"), *limit = req_query(r, "limit");
        if (env && *env) {
                if (!name_is_valid(env)) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "env: not a valid environment name");
                        return;
                }
                f.env = env;
        }
        if (token) /* "" = the local administrator */
                f.token = token;
        if (!c.admin) {
                if (f.token && strcmp(f.token, c.token) != 0) {
                        http_reply_error(r, 403, "forbidden",
                                         "a token may read only its own audit records");
                        return;
                }
                f.token = c.token;
        }
        if (since && *since && !parse_since(since, f.since)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "since: a duration (90s, 30m, 24h) or an RFC 3339 UTC time "
                                 "(2026-12-02T02:00:00Z)");
                return;
        }
        if (limit) {
                size_t n = strlen(limit);
                unsigned long long v = n > 0 && n < 9 && strspn(limit, "0123456789") == n
                                           ? strtoull(limit, NULL, 10)
                                           : 0;
                if (v < 1 || v > AUDIT_QUERY_MAX_LIMIT) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "limit: a whole number from 1 to %d",
                                         AUDIT_QUERY_MAX_LIMIT);
                        return;
                }
                f.limit = (size_t)v;
        }
        json_t *records = NULL;
        int rc = audit_query(&f, &records);
        if (rc == -ENOENT)
                records = json_array(); /* no log (it could not be opened): nothing recorded */
        else if (rc < 0) {
                http_reply_errno(r, rc, "reading the audit log: %s", strerror(-rc));
                return;
        }
        http_reply_json(r, 200, json_pack("{s:o}", "records", records));
}
