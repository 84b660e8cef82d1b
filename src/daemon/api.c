#include "daemon/api.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <math.h>

/* PUT /v1/envs/{name}/files and /archive: file uploads of any size (api_files.c). */
static bool is_files_upload(const char *path)
{
        static const char prefix[] = "/v1/envs/";
        if (strncmp(path, prefix, sizeof(prefix) - 1) != 0)
                return false;
        const char *name = path + sizeof(prefix) - 1, *slash = strchr(name, '/');
        if (!slash || slash == name)
                return false;
        return !strcmp(slash, "/files") || !strcmp(slash, "/files/") ||
               !strcmp(slash, "/archive") || !strcmp(slash, "/archive/");
}

/* exec with a raw body: the body is the command's stdin (any size), the request is in ?spec= */
static bool is_exec_with_stdin(const char *path, const char *content_type)
{
        size_t n = strlen(path);
        return content_type && !strncmp(content_type, "application/octet-stream", 24) &&
               !strncmp(path, "/v1/envs/", 9) && n > 14 && !strcmp(path + n - 5, "/exec");
}

bool api_wants_spool(const char *method, const char *path, const char *content_type)
{
        if (strcmp(method, "PUT") == 0 && is_files_upload(path))
                return true;
        if (strcmp(method, "POST") == 0 && is_exec_with_stdin(path, content_type))
                return true;
        /* Image uploads are tars; a JSON body there is a pull or build request. */
        return strcmp(method, "POST") == 0 && strcmp(path, "/v1/images") == 0 &&
               !(content_type && !strncmp(content_type, "application/json", 16));
}

static bool value_text(json_t *j, char *buf, size_t len)
{
        if (json_is_string(j)) {
                snprintf(buf, len, "%s", json_string_value(j));
                return true;
        }
        if (json_is_integer(j) && json_integer_value(j) >= 0) {
                snprintf(buf, len, "%lld", (long long)json_integer_value(j));
                return true;
        }
        if (json_is_real(j) && json_real_value(j) >= 0 && isfinite(json_real_value(j))) {
                snprintf(buf, len, "%.6f", json_real_value(j));
                return true;
        }
        return false;
}

bool api_known_fields(struct request *r, json_t *obj, const char *const *allowed)
{
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v)
        {
                bool ok = false;
                for (size_t i = 0; allowed[i] && !ok; i++)
                        ok = strcmp(k, allowed[i]) == 0;
                if (!ok) {
                        http_reply_error(r, 400, "invalid_argument", "unknown field \"%.64s\"", k);
                        return false;
                }
        }
        return true;
}

bool api_size(struct request *r, json_t *j, const char *field, uint64_t *ret)
{
        char text[64];
        if (!value_text(j, text, sizeof(text)) || parse_size(text, ret) < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: invalid size (use bytes or a unit: 512M, 2G)", field);
                return false;
        }
        return true;
}

bool api_duration(struct request *r, json_t *j, const char *field, uint64_t *ret_s)
{
        char text[64];
        if (!value_text(j, text, sizeof(text)) || parse_duration_s(text, ret_s) < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: invalid duration (use seconds or a unit: 90s, 30m, 24h)",
                                 field);
                return false;
        }
        return true;
}

bool api_cpus(struct request *r, json_t *j, const char *field, uint64_t *ret)
{
        char text[64];
        if (!value_text(j, text, sizeof(text)) || parse_cpus(text, ret) < 0) {
                http_reply_error(r, 400, "invalid_argument",
                                 "%s: invalid CPU count (a number from 0.01, e.g. 0.5 or 2)", field);
                return false;
        }
        return true;
}

bool api_count(struct request *r, json_t *j, const char *field, uint64_t min, uint64_t max,
               uint64_t *ret)
{
        uint64_t v = 0;
        bool ok = false;
        if (json_is_integer(j) && json_integer_value(j) >= 0) {
                v = (uint64_t)json_integer_value(j);
                ok = true;
        } else if (json_is_string(j)) {
                const char *s = json_string_value(j);
                size_t len = strlen(s);
                ok = len > 0 && len < 19 && strspn(s, "0123456789") == len;
                if (ok)
                        v = strtoull(s, NULL, 10);
        }
        if (!ok) {
                http_reply_error(r, 400, "invalid_argument", "%s: must be a whole number", field);
                return false;
        }
        if (v < min || v > max) {
                http_reply_error(r, 400, "invalid_argument", "%s: must be between %llu and %llu",
                                 field, (unsigned long long)min, (unsigned long long)max);
                return false;
        }
        *ret = v;
        return true;
}

/* Split "/v1/envs/NAME/processes/ID/ACTION" into at most 6 segments. */
#define MAX_SEGMENTS 6
static size_t split_path(const char *path, char seg[MAX_SEGMENTS][128])
{
        size_t n = 0;
        const char *p = path;
        while (*p == '/')
                p++;
        while (*p && n < MAX_SEGMENTS) {
                const char *end = strchr(p, '/');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len >= 128)
                        return 99;
                memcpy(seg[n], p, len);
                seg[n][len] = 0;
                n++;
                if (!end) {
                        p += len;
                        break;
                }
                p = end + 1;
                if (!*p)
                        break;
        }
        return *p && n == MAX_SEGMENTS ? 99 : n;
}

static void method_not_allowed(struct request *r)
{
        http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s", req_method(r),
                         req_path(r));
}

static struct env *find_env(struct request *r, struct engine *e, const char *name)
{
        struct env *v = name_is_valid(name) ? engine_find(e, name) : NULL;
        if (!v)
                http_reply_error(r, 404, "not_found", "no such environment: %s", name);
        return v;
}

void api_handle(struct request *r, void *ctx)
{
        struct engine *e = ctx;
        char seg[MAX_SEGMENTS][128];
        size_t n = split_path(req_path(r), seg);
        const char *m = req_method(r);
        bool get = !strcmp(m, "GET"), post = !strcmp(m, "POST");

        if (n < 2 || n > MAX_SEGMENTS || strcmp(seg[0], "v1") != 0) {
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                return;
        }
        if (!strcmp(seg[1], "system") && n == 2) {
                if (get)
                        api_system(r, e);
                else
                        method_not_allowed(r);
                return;
        }
        if (!strcmp(seg[1], "images")) {
                if (n == 2 && get)
                        api_images_list(r, e);
                else if (n == 2 && post)
                        api_images_import(r, e);
                else if (n == 3 && !strcmp(m, "DELETE"))
                        api_image_delete(r, e, seg[2]);
                else if (n == 4 && get)
                        api_image_get(r, e, seg[2], seg[3]);
                else if (n <= 3)
                        method_not_allowed(r);
                else
                        http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                return;
        }
        if (strcmp(seg[1], "envs") != 0) {
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                return;
        }
        if (n == 2) {
                if (get)
                        api_envs_list(r, e);
                else if (post)
                        api_envs_create(r, e);
                else
                        method_not_allowed(r);
                return;
        }
        /* Background processes: /v1/envs/NAME/processes[/ID[/output|wait|signal]] */
        if (n >= 4 && !strcmp(seg[3], "processes")) {
                struct env *v = find_env(r, e, seg[2]);
                if (v)
                        api_env_processes(r, e, v, n >= 5 ? seg[4] : NULL, n >= 6 ? seg[5] : NULL);
                return;
        }
        if (n == 6) {
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                return;
        }
        /* A stream of changes below a directory (api_watch.c): files/watch. */
        if (n == 5 && !strcmp(seg[3], "files") && !strcmp(seg[4], "watch")) {
                struct env *v = find_env(r, e, seg[2]);
                if (v)
                        api_env_watch(r, e, v);
                return;
        }
        /* Interactive terminal sessions (api_exec_ws.c). */
        if (n == 5 && !strcmp(seg[3], "exec") && !strcmp(seg[4], "ws")) {
                struct env *v = find_env(r, e, seg[2]);
                if (v)
                        api_env_exec_ws(r, e, v);
                return;
        }
        /* Files API (api_files.c): files, files/{list,stat,mkdir,move}, archive. */
        if (n >= 4 && (!strcmp(seg[3], "files") || !strcmp(seg[3], "archive"))) {
                struct env *v = find_env(r, e, seg[2]);
                if (v)
                        api_env_files(r, e, v, seg[3], n == 5 ? seg[4] : NULL);
                return;
        }
        if (n >= 4 && !strcmp(seg[3], "ports")) {
                struct env *v = find_env(r, e, seg[2]);
                if (!v)
                        return;
                if (n == 4 && (get || post))
                        api_env_ports(r, e, v, NULL);
                else if (n == 5 && !strcmp(m, "DELETE"))
                        api_env_ports(r, e, v, seg[4]);
                else
                        method_not_allowed(r);
                return;
        }
        /* Storage (api_storage.c): snapshots[/SNAP], restore, fork, commit. */
        if ((n == 4 || n == 5) && !strcmp(seg[3], "snapshots")) {
                struct env *v = find_env(r, e, seg[2]);
                if (v)
                        api_env_snapshots(r, e, v, n == 5 ? seg[4] : NULL);
                return;
        }
        if (n == 4 && (!strcmp(seg[3], "restore") || !strcmp(seg[3], "fork") ||
                       !strcmp(seg[3], "commit"))) {
                struct env *v = find_env(r, e, seg[2]);
                if (v)
                        api_env_storage_action(r, e, v, seg[3]);
                return;
        }
        if (n == 5) {
                http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                return;
        }
        static const char *const actions[] = {"start", "stop",  "restart", "exec",
                                              "pause", "resume", NULL};
        if (n == 4) {
                bool known = false;
                for (size_t i = 0; actions[i]; i++)
                        known |= !strcmp(seg[3], actions[i]);
                if (!known) {
                        http_reply_error(r, 404, "not_found", "no such route: %s", req_path(r));
                        return;
                }
        }
        if (n == 4 && !post) {
                method_not_allowed(r);
                return;
        }
        if (n == 3 && !get && strcmp(m, "PATCH") && strcmp(m, "DELETE")) {
                method_not_allowed(r);
                return;
        }
        struct env *v = find_env(r, e, seg[2]);
        if (!v)
                return;
        if (n == 3) {
                if (get)
                        api_env_get(r, e, v);
                else if (!strcmp(m, "PATCH"))
                        api_env_patch(r, e, v);
                else
                        api_env_delete(r, e, v);
        } else if (!strcmp(seg[3], "exec")) {
                api_env_exec(r, e, v);
        } else {
                api_env_action(r, e, v, seg[3]);
        }
}
