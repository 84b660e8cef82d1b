#include "daemon/api_io.h"
#include "lib/util.h"

/* Below one 4 KiB block per second a single write could wait for minutes. */
#define IO_MIN_BPS 4096u
#define IO_MAX_IOPS 1000000000u

bool api_io_limits(struct request *r, json_t *j, bool has[4], uint64_t val[4])
{
        static const char *const fields[] = {"read_bps", "write_bps", "read_iops", "write_iops",
                                             NULL};
        if (!json_is_object(j)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "io: must be an object {\"read_bps\", \"write_bps\", "
                                 "\"read_iops\", \"write_iops\"}");
                return false;
        }
        if (!api_known_fields(r, j, fields))
                return false;
        for (size_t i = 0; i < 4; i++) {
                json_t *v = json_object_get(j, fields[i]);
                char name[32];
                snprintf(name, sizeof(name), "io.%s", fields[i]);
                has[i] = v != NULL;
                val[i] = 0;
                if (!v || json_is_null(v))
                        continue;
                if (json_is_integer(v) && json_integer_value(v) < 0) {
                        http_reply_error(r, 400, "invalid_argument", "%s: must not be negative",
                                         name);
                        return false;
                }
                bool bps = i == IO_READ_BPS || i == IO_WRITE_BPS;
                if (bps ? !api_size(r, v, name, &val[i])
                        : !api_count(r, v, name, 0, IO_MAX_IOPS, &val[i]))
                        return false;
                if (bps && val[i] && val[i] < IO_MIN_BPS) {
                        http_reply_error(r, 400, "invalid_argument", "%s: at least 4K per second",
                                         name);
                        return false;
                }
                if (val[i] > (uint64_t)INT64_MAX) {
                        http_reply_error(r, 400, "invalid_argument", "%s: too large", name);
                        return false;
                }
        }
        return true;
}
