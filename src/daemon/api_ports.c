/* Published ports: host port -> environment port, by DNAT in Paddock's firewall table. */
#include "daemon/api.h"
#include "lib/jsonutil.h"
#include "lib/util.h"

static bool parse_port(const char *s, uint16_t *ret)
{
        if (!s || !*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s))
                return false;
        unsigned long v = strtoul(s, NULL, 10);
        if (v == 0 || v > 65535)
                return false;
        *ret = (uint16_t)v;
        return true;
}

static bool json_port(json_t *j, uint16_t *ret)
{
        if (json_is_integer(j) && json_integer_value(j) > 0 && json_integer_value(j) <= 65535) {
                *ret = (uint16_t)json_integer_value(j);
                return true;
        }
        return json_is_string(j) && parse_port(json_string_value(j), ret);
}

static bool proto_valid(const char *p)
{
        return p && (!strcmp(p, "tcp") || !strcmp(p, "udp"));
}

void api_env_ports(struct request *r, struct engine *e, struct env *v, const char *host_port)
{
        const char *m = req_method(r);
        if (!strcmp(m, "GET")) {
                http_reply_json(r, 200, json_pack("{s:o}", "ports", engine_ports_json(e, v)));
                return;
        }
        if (!strcmp(m, "DELETE")) {
                uint16_t hp;
                const char *proto = req_query(r, "proto") ? req_query(r, "proto") : "tcp";
                if (!parse_port(host_port, &hp) || !proto_valid(proto)) {
                        http_reply_error(r, 400, "invalid_argument",
                                         "host_port: 1-65535; proto: tcp or udp");
                        return;
                }
                int rc = engine_port_remove(e, v, proto, hp);
                if (rc < 0)
                        http_reply_errno(r, rc, "port %u/%s of %s: %s", hp, proto, env_name(v),
                                         rc == -ENOENT ? "not published" : strerror(-rc));
                else
                        http_reply_json(r, 200, json_pack("{s:i,s:s}", "deleted", hp, "proto", proto));
                return;
        }
        _cleanup_json_ json_t *body = req_json_object(r);
        if (!body)
                return;
        uint16_t hp, port;
        json_t *pj = json_object_get(body, "proto");
        const char *proto = pj ? json_string_value(pj) : "tcp";
        if (!json_port(json_object_get(body, "host_port"), &hp) ||
            !json_port(json_object_get(body, "port"), &port)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "host_port and port: required, 1-65535");
                return;
        }
        if (!proto_valid(proto)) {
                http_reply_error(r, 400, "invalid_argument", "proto: tcp or udp");
                return;
        }
        char err[512] = "";
        int rc = engine_port_add(e, v, proto, hp, port, err, sizeof(err));
        if (rc < 0)
                http_reply_errno(r, rc, "%s", err);
        else
                http_reply_json(r, 201, json_pack("{s:s,s:i,s:i}", "proto", proto, "host_port",
                                                  hp, "port", port));
}
