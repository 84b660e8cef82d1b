/* GET /v1/events[?env=NAME&type=a,b]: an NDJSON stream of what happens to environments the
 * caller may see (events.h), until the client goes away or falls too far behind. */
#include "daemon/api.h"
#include "daemon/events.h"
#include "lib/parse.h"
#include "lib/util.h"

void api_events_get(struct request *r, struct engine *e)
{
        struct caller c;
        api_caller(r, &c);
        const char *env = req_query(r, "env");
        if (env && *env && !name_is_valid(env)) {
                http_reply_error(r, 400, "invalid_argument", "env: not a valid environment name");
                return;
        }
        uint32_t types = 0;
        const char *list = req_query(r, "type");
        for (const char *p = list; p && *p;) {
                size_t n = strcspn(p, ",");
                char name[32];
                int bit = -1;
                if (n > 0 && n < sizeof(name)) {
                        memcpy(name, p, n);
                        name[n] = 0;
                        bit = events_type_bit(name);
                }
                if (n > 0 && bit < 0) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "type: unknown event type \"%.*s\"",
                                         (int)(n < 32 ? n : 32), p);
                        return;
                }
                if (bit >= 0)
                        types |= 1u << bit;
                p += n + (p[n] == ',');
        }
        events_subscribe(r, c.admin, c.token, env && *env ? env : NULL, types);
}
