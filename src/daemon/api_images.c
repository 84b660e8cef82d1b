/* /v1/images and /v1/system. */
#include "daemon/api.h"
#include "lib/parse.h"

#include <errno.h>
#include <string.h>

struct import_ctx {
        struct request *req;
};

static void on_import_request_gone(void *data)
{
        struct import_ctx *c = data;
        c->req = NULL;
}

static void on_imported(int r, const char *msg, json_t *image, void *data)
{
        struct import_ctx *c = data;
        if (c->req) {
                req_on_free(c->req, NULL, NULL);
                if (r < 0)
                        http_reply_errno(c->req, r, "image import: %s", msg ? msg : strerror(-r));
                else
                        http_reply_json(c->req, 201, json_incref(image));
        }
        free(c);
}

void api_images_import(struct request *r, struct engine *e)
{
        const char *name = req_query(r, "name");
        if (!name || !name_is_valid(name)) {
                http_reply_error(r, 400, "invalid_argument",
                                 "name: required query parameter; letters, digits, '-', '_', '.'");
                return;
        }
        if (req_spool_fd(r) < 0) {
                http_reply_error(r, 503, "unavailable", "cannot store the upload");
                return;
        }
        struct import_ctx *c = calloc(1, sizeof(*c));
        if (!c) {
                http_reply_errno(r, -ENOMEM, "out of memory");
                return;
        }
        c->req = r;
        req_on_free(r, on_import_request_gone, c);
        http_defer(r);
        engine_image_import(e, name, req_spool_fd(r), on_imported, c);
}

void api_images_list(struct request *r, struct engine *e)
{
        http_reply_json(r, 200, json_pack("{s:o}", "images", engine_image_list(e)));
}

void api_image_delete(struct request *r, struct engine *e, const char *name)
{
        char err[512] = "";
        int rc = engine_image_delete(e, name, err, sizeof(err));
        if (rc < 0)
                http_reply_errno(r, rc, "%s", err);
        else
                http_reply_json(r, 200, json_pack("{s:s}", "deleted", name));
}

void api_system(struct request *r, struct engine *e)
{
        http_reply_json(r, 200, engine_system_json(e));
}
