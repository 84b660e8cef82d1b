/* The part of JSON Schema the MCP tools' input schemas use, checked before any request is
 * made, so a malformed call is refused with a message naming the field instead of reaching the
 * daemon half-built. Not a general validator: keywords our schemas do not use are ignored. */
#include "lib/mcp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bool type_is(const char *type, const json_t *v)
{
        if (strcmp(type, "string") == 0)
                return json_is_string(v);
        if (strcmp(type, "integer") == 0)
                return json_is_integer(v) ||
                       (json_is_real(v) &&
                        json_real_value(v) == (double)(long long)json_real_value(v));
        if (strcmp(type, "number") == 0)
                return json_is_number(v);
        if (strcmp(type, "boolean") == 0)
                return json_is_boolean(v);
        if (strcmp(type, "object") == 0)
                return json_is_object(v);
        if (strcmp(type, "array") == 0)
                return json_is_array(v);
        if (strcmp(type, "null") == 0)
                return json_is_null(v);
        return false;
}

static int schema_fail(char *why, size_t why_len, const char *where, const char *what)
{
        snprintf(why, why_len, "%s%s%s", where && *where ? where : "", where && *where ? ": " : "",
                 what);
        return -EINVAL;
}

static int check_type(const json_t *type, const json_t *v, const char *where, char *why,
                      size_t why_len)
{
        if (!type)
                return 0;
        char expected[128] = "";
        if (json_is_string(type)) {
                if (type_is(json_string_value(type), v))
                        return 0;
                snprintf(expected, sizeof(expected), "expected %s", json_string_value(type));
        } else {
                size_t i;
                const json_t *t;
                size_t off = (size_t)snprintf(expected, sizeof(expected), "expected");
                json_array_foreach(type, i, t)
                {
                        if (type_is(json_string_value(t), v))
                                return 0;
                        if (off < sizeof(expected))
                                off +=
                                    (size_t)snprintf(expected + off, sizeof(expected) - off, "%s%s",
                                                     i ? " or " : " ", json_string_value(t));
                }
        }
        return schema_fail(why, why_len, where, expected);
}

static int check_object(const json_t *schema, const json_t *v, const char *where, char *why,
                        size_t why_len)
{
        const json_t *props = json_object_get(schema, "properties");
        const json_t *req = json_object_get(schema, "required");
        char sub[256];
        size_t i;
        const json_t *name;
        json_array_foreach(req, i, name)
        {
                if (!json_object_get(v, json_string_value(name))) {
                        snprintf(sub, sizeof(sub), "missing required property \"%s\"",
                                 json_string_value(name));
                        return schema_fail(why, why_len, where, sub);
                }
        }
        const json_t *extra = json_object_get(schema, "additionalProperties");
        const char *key;
        const json_t *value;
        json_object_foreach((json_t *)v, key, value)
        {
                const json_t *ps = json_object_get(props, key);
                snprintf(sub, sizeof(sub), "%s%s%s", where && *where ? where : "",
                         where && *where ? "." : "", key);
                if (!ps) {
                        if (json_is_false(extra))
                                return schema_fail(why, why_len, sub, "unknown property");
                        if (json_is_object(extra))
                                ps = extra;
                        else
                                continue;
                }
                int r = mcp_schema_check(ps, value, sub, why, why_len);
                if (r < 0)
                        return r;
        }
        return 0;
}

int mcp_schema_check(const json_t *schema, const json_t *v, const char *where, char *why,
                     size_t why_len)
{
        const char *w = where && *where ? where : "arguments";
        int r = check_type(json_object_get(schema, "type"), v, w, why, why_len);
        if (r < 0)
                return r;
        const json_t *allowed = json_object_get(schema, "enum");
        if (allowed) {
                size_t i;
                const json_t *a;
                bool found = false;
                json_array_foreach(allowed, i, a) found =
                    found || json_equal((json_t *)a, (json_t *)v);
                if (!found) {
                        char list[200] = "";
                        size_t off = 0;
                        json_array_foreach(allowed, i, a)
                        {
                                if (off < sizeof(list))
                                        off +=
                                            (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
                                                             i ? ", " : "", json_string_value(a));
                        }
                        char msg[256];
                        snprintf(msg, sizeof(msg), "must be one of %s", list);
                        return schema_fail(why, why_len, w, msg);
                }
        }
        const json_t *min = json_object_get(schema, "minimum");
        if (min && json_is_number(v) && json_number_value(v) < json_number_value(min)) {
                char msg[64];
                snprintf(msg, sizeof(msg), "must be at least %g", json_number_value(min));
                return schema_fail(why, why_len, w, msg);
        }
        const json_t *min_len = json_object_get(schema, "minLength");
        if (min_len && json_is_string(v) &&
            json_string_length(v) < (size_t)json_integer_value(min_len))
                return schema_fail(why, why_len, w, "too short");
        if (json_is_array(v)) {
                const json_t *min_items = json_object_get(schema, "minItems");
                if (min_items && json_array_size(v) < (size_t)json_integer_value(min_items))
                        return schema_fail(why, why_len, w, "too few items");
                const json_t *items = json_object_get(schema, "items");
                size_t i;
                const json_t *item;
                json_array_foreach(v, i, item)
                {
                        char sub[256];
                        snprintf(sub, sizeof(sub), "%s[%zu]", w, i);
                        if (items && (r = mcp_schema_check(items, item, sub, why, why_len)) < 0)
                                return r;
                }
        }
        if (json_is_object(v))
                return check_object(schema, v, where, why, why_len);
        return 0;
}
