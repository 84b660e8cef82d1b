/* Snapshots, restore, fork and commit:
 *   GET    /v1/envs/{name}/snapshots               list
 *   POST   /v1/envs/{name}/snapshots   {name?}     take one (a running env is frozen meanwhile)
 *   DELETE /v1/envs/{name}/snapshots/{snap}
 *   POST   /v1/envs/{name}/restore     {snapshot}  stopped environments only
 *   POST   /v1/envs/{name}/fork        {name, snapshot?}  -> the new environment
 *   POST   /v1/envs/{name}/commit      {image}     -> the new image */
#include "daemon/api.h"
#include "lib/jsonutil.h"

#include <string.h>

/* body's string field (NULL when absent); false after replying 400 when it is not a string. */
static bool string_field(struct request *r, json_t *body, const char *field, bool required,
                         const char **ret)
{
        json_t *j = json_object_get(body, field);
        *ret = NULL;
        if (!j || json_is_null(j)) {
                if (required)
                        http_reply_error(r, 400, "invalid_argument", "%s: required", field);
                return !required;
        }
        if (!json_is_string(j)) {
                http_reply_error(r, 400, "invalid_argument", "%s: must be a string", field);
                return false;
        }
        *ret = json_string_value(j);
        return true;
}

void api_env_snapshots(struct request *r, struct engine *e, struct env *v, const char *snap)
{
        const char *m = req_method(r);
        char err[512] = "";
        if (snap) {
                if (strcmp(m, "DELETE") != 0) {
                        http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s", m,
                                         req_path(r));
                        return;
                }
                int rc = engine_snapshot_delete(e, v, snap, err, sizeof(err));
                if (rc < 0)
                        http_reply_errno(r, rc, "%s", err);
                else
                        http_reply_json(r, 200, json_pack("{s:s}", "deleted", snap));
                return;
        }
        if (!strcmp(m, "GET")) {
                http_reply_json(r, 200, json_pack("{s:o}", "snapshots", engine_snapshot_list(e, v)));
                return;
        }
        if (strcmp(m, "POST") != 0) {
                http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s", m,
                                 req_path(r));
                return;
        }
        static const char *const fields[] = {"name", NULL};
        _cleanup_json_ json_t *body = req_json_object(r);
        const char *name;
        if (!body || !api_known_fields(r, body, fields) ||
            !string_field(r, body, "name", false, &name))
                return;
        json_t *out = NULL;
        int rc = engine_snapshot(e, v, name, &out, err, sizeof(err));
        if (rc < 0)
                http_reply_errno(r, rc, "%s", err);
        else
                http_reply_json(r, 201, out);
}

struct fork_args {
        struct engine *e;
        struct env *v;
        const char *name, *snap, *owner;
};

static int start_fork(void *data, engine_created_fn done, void *done_data,
                      struct env_creating **ret, char *err, size_t errlen)
{
        const struct fork_args *a = data;
        return engine_fork(a->e, a->v, a->name, a->snap, a->owner, done, done_data, ret, err,
                           errlen);
}

void api_env_storage_action(struct request *r, struct engine *e, struct env *v, const char *action)
{
        if (strcmp(req_method(r), "POST") != 0) {
                http_reply_error(r, 405, "method_not_allowed", "%s is not allowed on %s",
                                 req_method(r), req_path(r));
                return;
        }
        _cleanup_json_ json_t *body = req_json_object(r);
        if (!body)
                return;
        char err[512] = "";
        const char *a, *b;
        int rc;
        if (!strcmp(action, "restore")) {
                static const char *const fields[] = {"snapshot", NULL};
                if (api_known_fields(r, body, fields) && string_field(r, body, "snapshot", true, &a)) {
                        rc = engine_restore(e, v, a, err, sizeof(err));
                        if (rc < 0)
                                http_reply_errno(r, rc, "%s", err);
                        else
                                http_reply_json(r, 200, engine_env_json(e, v));
                }
        } else if (!strcmp(action, "fork")) {
                static const char *const fields[] = {"name", "snapshot", NULL};
                if (api_known_fields(r, body, fields) && string_field(r, body, "name", true, &a) &&
                    string_field(r, body, "snapshot", false, &b)) {
                        /* The copy is the caller's, and counts against its quotas. */
                        struct caller c;
                        api_caller(r, &c);
                        struct quota_ask q = {.new_env = true,
                                              .running = true,
                                              .computer = env_kind(v) == KIND_COMPUTER,
                                              .limits = *env_limits(v),
                                              .disk = env_disk_bytes(v)};
                        if (!api_quota_ok(r, e, &q))
                                return;
                        struct fork_args fa = {e, v, a, b, c.token};
                        rc = api_answer_when_created(r, a, start_fork, &fa, err, sizeof(err));
                        if (rc < 0)
                                http_reply_errno(r, rc, "%s", err);
                }
        } else {
                static const char *const fields[] = {"image", NULL};
                json_t *out = NULL;
                if (api_known_fields(r, body, fields) && string_field(r, body, "image", true, &a)) {
                        rc = engine_commit(e, v, a, &out, err, sizeof(err));
                        if (rc < 0)
                                http_reply_errno(r, rc, "%s", err);
                        else
                                http_reply_json(r, 201, out);
                }
        }
}
