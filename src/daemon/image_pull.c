/* paddock image pull: an image job whose helper fetches an image from an OCI registry
 * (lib/registry.h) and stacks its layers (lib/image.h).
 *
 *   manifest (by tag or digest) -> an index or manifest list picks the manifest of this
 *   machine's platform (linux/amd64 here) -> config and every layer are downloaded into the
 *   partial directory, each checked against its digest and size -> the helper chroots into
 *   rootfs and applies the layers in order, whiteouts included.
 *
 * Nothing is unpacked before every blob has been verified. Limits: manifests 4 MiB, 128 layers,
 * 64 GiB of layers in all.
 *
 * Destinations: public addresses over https only, unless paddockd --allow-registry or
 * --insecure-registry names the host (the registry policy, checked by lib/registry.c on every
 * connection); a pull with insecure (plain http) needs the latter. */
#include "daemon/image_job.h"
#include "lib/image.h"
#include "lib/imageref.h"
#include "lib/registry.h"
#include "lib/util.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#define PULL_MAX_LAYERS 128
#define PULL_MAX_BYTES  (64ull << 30)
#define PULL_MAX_CONFIG (4u << 20)

#define OCI_INDEX       "application/vnd.oci.image.index.v1+json"
#define DOCKER_LIST     "application/vnd.docker.distribution.manifest.list.v2+json"
#define OCI_MANIFEST    "application/vnd.oci.image.manifest.v1+json"
#define DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

struct blob {
        char digest[72];
        uint64_t size;
};

struct manifest {
        struct blob config;
        struct blob layers[PULL_MAX_LAYERS];
        size_t n_layers;
};

static const char *const layer_types[] = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    NULL,
};

/* This machine in Go's words, as registries name platforms. */
static const char *goarch(void)
{
        static struct utsname u;
        if (uname(&u) < 0 || !strcmp(u.machine, "x86_64"))
                return "amd64";
        if (!strcmp(u.machine, "aarch64"))
                return "arm64";
        return u.machine;
}

static bool descriptor(json_t *d, struct blob *ret)
{
        const char *digest = json_string_value(json_object_get(d, "digest"));
        json_t *size = json_object_get(d, "size");
        if (!digest || !image_digest_valid(digest) || !json_is_integer(size) ||
            json_integer_value(size) < 0)
                return false;
        snprintf(ret->digest, sizeof(ret->digest), "%s", digest);
        ret->size = (uint64_t)json_integer_value(size);
        return true;
}

/* Media type: the document's own, else the Content-Type it came with, else its shape. */
static const char *media_type(json_t *j, const char *ctype)
{
        const char *t = json_string_value(json_object_get(j, "mediaType"));
        if (t)
                return t;
        if (ctype && (!strncmp(ctype, OCI_INDEX, strlen(OCI_INDEX)) ||
                      !strncmp(ctype, OCI_MANIFEST, strlen(OCI_MANIFEST))))
                return !strncmp(ctype, OCI_INDEX, strlen(OCI_INDEX)) ? OCI_INDEX : OCI_MANIFEST;
        if (json_is_array(json_object_get(j, "manifests")))
                return OCI_INDEX;
        return OCI_MANIFEST;
}

/* The manifest for this platform in an index / manifest list. */
static int pick_platform(json_t *index, char *digest, size_t len, char *err, size_t errlen)
{
        const char *arch = goarch();
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(index, "manifests"), i, m)
        {
                json_t *p = json_object_get(m, "platform");
                const char *os = json_string_value(json_object_get(p, "os"));
                const char *a = json_string_value(json_object_get(p, "architecture"));
                struct blob b;
                if (os && a && !strcmp(os, "linux") && !strcmp(a, arch) && descriptor(m, &b)) {
                        snprintf(digest, len, "%s", b.digest);
                        return 0;
                }
        }
        snprintf(err, errlen, "the image has no linux/%s variant", arch);
        return -ENOENT;
}

static int parse_manifest(json_t *j, struct manifest *m, char *err, size_t errlen)
{
        if (json_integer_value(json_object_get(j, "schemaVersion")) != 2) {
                snprintf(err, errlen, "unsupported manifest (schema 1 or unknown)");
                return -EPROTO;
        }
        if (!descriptor(json_object_get(j, "config"), &m->config)) {
                snprintf(err, errlen, "manifest has no valid config");
                return -EPROTO;
        }
        json_t *layers = json_object_get(j, "layers");
        if (!json_is_array(layers) || json_array_size(layers) > PULL_MAX_LAYERS) {
                snprintf(err, errlen, "manifest needs a list of at most %d layers",
                         PULL_MAX_LAYERS);
                return -EPROTO;
        }
        uint64_t total = 0;
        size_t i;
        json_t *l;
        json_array_foreach(layers, i, l)
        {
                const char *type = json_string_value(json_object_get(l, "mediaType"));
                bool known = false;
                for (size_t k = 0; type && layer_types[k]; k++)
                        known |= !strcmp(type, layer_types[k]);
                if (!known) {
                        snprintf(err, errlen, "layer %zu: unsupported media type %.100s", i + 1,
                                 type ? type : "(none)");
                        return -EPROTO;
                }
                if (!descriptor(l, &m->layers[i])) {
                        snprintf(err, errlen, "layer %zu: invalid digest or size", i + 1);
                        return -EPROTO;
                }
                if (total <= PULL_MAX_BYTES) /* once over, stays over: the sum cannot wrap */
                        total += m->layers[i].size;
        }
        m->n_layers = json_array_size(layers);
        if (total > PULL_MAX_BYTES) {
                snprintf(err, errlen, "layers too large (%llu bytes; limit %llu)",
                         (unsigned long long)total, (unsigned long long)PULL_MAX_BYTES);
                return -EFBIG;
        }
        return 0;
}

/* A manifest by reference; one fetched by digest must hash to it. */
static json_t *fetch_manifest(struct registry *reg, const char *reference, const char **ret_type,
                              char *err, size_t errlen, int *ret)
{
        char *body = NULL, *ctype = NULL;
        size_t len = 0;
        *ret = registry_get_manifest(reg, reference, &body, &len, &ctype, err, errlen);
        if (*ret < 0)
                return NULL;
        char got[72];
        image_digest_of(body, len, got);
        json_t *j = NULL;
        if (image_digest_valid(reference) && strcmp(got, reference) != 0) {
                snprintf(err, errlen, "manifest %.19s: content does not match its digest",
                         reference);
                *ret = -EBADMSG;
        } else if (!(j = json_loadb(body, len, 0, NULL)) || !json_is_object(j)) {
                snprintf(err, errlen, "manifest %.40s: not a JSON object", reference);
                *ret = -EPROTO;
                json_decref(j);
                j = NULL;
        } else {
                const char *t = media_type(j, ctype);
                *ret_type = !strcmp(t, OCI_INDEX) || !strcmp(t, DOCKER_LIST)          ? OCI_INDEX
                            : !strcmp(t, OCI_MANIFEST) || !strcmp(t, DOCKER_MANIFEST) ? OCI_MANIFEST
                                                                                      : NULL;
                if (!*ret_type) {
                        snprintf(err, errlen, "unsupported manifest type %.100s", t);
                        *ret = -EPROTO;
                        json_decref(j);
                        j = NULL;
                }
        }
        free(body);
        free(ctype);
        return j;
}

static int resolve(struct registry *reg, const struct image_ref *ref, struct manifest *m, char *err,
                   size_t errlen)
{
        int r;
        const char *type = NULL;
        json_t *j = fetch_manifest(reg, image_ref_reference(ref), &type, err, errlen, &r);
        if (!j)
                return r;
        if (type && !strcmp(type, OCI_INDEX)) {
                char digest[72];
                r = pick_platform(j, digest, sizeof(digest), err, errlen);
                json_decref(j);
                if (r < 0)
                        return r;
                image_progress("platform linux/%s: %s", goarch(), digest);
                if (!(j = fetch_manifest(reg, digest, &type, err, errlen, &r)))
                        return r;
                if (!type || strcmp(type, OCI_MANIFEST) != 0) {
                        json_decref(j);
                        snprintf(err, errlen, "index entry %.19s is not an image manifest", digest);
                        return -EPROTO;
                }
        }
        r = parse_manifest(j, m, err, errlen);
        json_decref(j);
        return r;
}

struct layer_progress {
        size_t index, count;
};

static void on_layer_progress(uint64_t done, uint64_t total, void *data)
{
        struct layer_progress *p = data;
        image_progress("layer %zu/%zu: %.1f/%.1f MiB", p->index, p->count, done / 1048576.0,
                       total / 1048576.0);
}

static int download(struct registry *reg, const char *partial, const char *file,
                    const struct blob *b, struct layer_progress *p, int *ret_fd, char *err,
                    size_t errlen)
{
        _cleanup_free_ char *path = path_join(partial, file);
        if (!path) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                snprintf(err, errlen, "%s: %s", path, strerror(errno));
                return -errno;
        }
        int r = registry_get_blob(reg, b->digest, b->size, fd, p ? on_layer_progress : NULL, p, err,
                                  errlen);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Set once at startup; the forked helpers read their copy of it. */
static struct registry_policy registry_policy;

int engine_allow_registry(const char *hostport, bool insecure)
{
        return registry_policy_add(&registry_policy, hostport, insecure);
}

struct pull_arg {
        char ref[512];
        bool insecure;
};

static int fill_from_registry(const char *partial, const char *rootfs, void *arg, char *err,
                              size_t errlen)
{
        const struct pull_arg *a = arg;
        struct image_ref ref;
        int r = image_ref_parse(a->ref, &ref, err, errlen);
        if (r < 0)
                return r;
        struct registry *reg = NULL;
        if ((r = registry_open(&ref, a->insecure, &registry_policy, &reg)) < 0) {
                if (r == -ELIBACC)
                        snprintf(err, errlen, "libcurl cannot be loaded (install libcurl4)");
                return r;
        }
        static struct manifest m; /* the helper's own copy: big, so not on the stack */
        int fds[PULL_MAX_LAYERS];
        size_t opened = 0;
        image_progress("pulling %s/%s:%s", ref.registry, ref.repository, image_ref_reference(&ref));
        if ((r = resolve(reg, &ref, &m, err, errlen)) < 0)
                goto out;
        int cfd = -1;
        if (m.config.size > PULL_MAX_CONFIG) {
                snprintf(err, errlen, "image config too large");
                r = -EFBIG;
                goto out;
        }
        if ((r = download(reg, partial, "config.json", &m.config, NULL, &cfd, err, errlen)) < 0)
                goto out;
        close(cfd);
        for (; opened < m.n_layers; opened++) {
                struct layer_progress p = {opened + 1, m.n_layers};
                char file[32];
                snprintf(file, sizeof(file), "layer-%zu", opened);
                image_progress("layer %zu/%zu: %s (%.1f MiB)", p.index, p.count,
                               m.layers[opened].digest, m.layers[opened].size / 1048576.0);
                if ((r = download(reg, partial, file, &m.layers[opened], &p, &fds[opened], err,
                                  errlen)) < 0)
                        goto out;
        }
        registry_close(reg);
        reg = NULL;
        /* Every blob is verified; from here on the helper lives inside rootfs. */
        if ((r = image_enter_root(rootfs, err, errlen)) < 0)
                goto out;
        uint64_t bytes = 0;
        for (size_t i = 0; i < m.n_layers; i++) {
                image_progress("unpacking layer %zu/%zu", i + 1, m.n_layers);
                if (lseek(fds[i], 0, SEEK_SET) < 0 ||
                    (r = image_apply_layer(fds[i], true, &bytes, err, errlen)) < 0) {
                        r = r < 0 ? r : -errno;
                        goto out;
                }
        }
        if ((r = image_finish_root(err, errlen)) < 0)
                goto out;
        image_report_size(image_tree_bytes());
out:
        registry_close(reg);
        for (size_t i = 0; i < opened; i++)
                close(fds[i]);
        return r;
}

int engine_image_pull(struct engine *e, const struct image_pull_spec *spec,
                      const struct image_callbacks *cb, struct image_job **ret_job, char *err,
                      size_t errlen)
{
        struct pull_arg a = {.insecure = spec->insecure};
        snprintf(a.ref, sizeof(a.ref), "%s", spec->ref);
        struct image_ref ref;
        int r = image_ref_parse(spec->ref, &ref, err, errlen);
        if (r < 0)
                return r;
        if (spec->insecure && !registry_policy_insecure(&registry_policy, ref.registry)) {
                snprintf(err, errlen,
                         "insecure: plain http only to a registry named by paddockd "
                         "--insecure-registry, not %s",
                         ref.registry);
                return -EINVAL;
        }
        return image_job_start(e, spec->name, "pull", fill_from_registry, &a, -1, NULL, cb, ret_job, err,
                               errlen);
}
