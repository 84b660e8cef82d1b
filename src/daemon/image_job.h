/* An image job: how every image comes to be (import, pull, build).
 *
 *   prepare   <root>/images/.partial-NAME/rootfs is made (image_partial_prepare)
 *   fill      a forked helper fills rootfs (one fill function per source); it dies with the
 *             daemon (PR_SET_PDEATHSIG), and reports progress lines, an error or the size on
 *             its status pipe; the supervisor (supervise.h) watches it
 *   finish    .partial-NAME becomes NAME and the image is recorded (image_partial_finish)
 *
 * How the trees are stored is known to three small functions in images.c only:
 * image_partial_prepare, image_partial_finish and image_dir_remove.
 *
 * A crash at any point leaves at most a .partial-NAME directory, which the next start removes.
 * The helper's scratch space (downloaded layers, build output) lives in .partial-NAME too, next
 * to rootfs, so it goes away with it. */
#pragma once
#include "daemon/engine.h"
#include "lib/image.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Runs in the helper: fill rootfs (scratch space: the directory partial). 0, or -errno with a
 * message in err. The helper may chroot: nothing after fill needs the host's root. */
typedef int (*image_fill_fn)(const char *partial, const char *rootfs, void *arg, char *err,
                             size_t errlen);

/* The helper runs as root of a user namespace mapped to the image helpers' id range, with
 * the partial directory at IMAGE_HELPER_DIR "/work" (the path fill gets), through an idmapped
 * mount; the host's own paths are reached as an unprivileged uid. */
#define IMAGE_HELPER_DIR "/run/paddock-image-helper"
struct image_helper_opts {
        const char *mirror;  /* a host directory the helper reads at IMAGE_HELPER_DIR/mirror */
        const char *apt;     /* the same at IMAGE_HELPER_DIR/apt */
        bool own_namespaces; /* the fill runs a program that makes namespaces: no seccomp */
};

/* what names the job in logs ("import", "pull", "build"). arg stays the caller's: the helper
 * has its own copy. */
/* keep_fd: a descriptor the fill function needs (the archive of an import), or -1; the
 * helper closes every other one it inherited from the daemon. */
int image_job_start(struct engine *e, const char *name, const char *what, image_fill_fn fill,
                    void *arg, int keep_fd, const struct image_helper_opts *opts,
                    const struct image_callbacks *cb,
                    struct image_job **ret_job, char *err, size_t errlen);

/* In the helper: one progress line for the client ("layer 2/3: 12.0 MiB"), and the image's
 * size once known. */
void image_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void image_report_size(uint64_t bytes);

/* In a forked helper (image jobs, export): die with the daemon, default signals. */
void image_helper_init(pid_t daemon_pid, const int *keep, size_t n_keep);

/* Export: a tar of image name, written by a host helper into the supervisor's data pipe (pull
 * it with supervise_read; ops->wake says when). It is whole only when the helper exits 0.
 * count: as in supervise_spec. */
struct supervise;
struct supervise_ops;
int image_export_start(struct engine *e, const char *name, enum image_compression compression,
                       const struct supervise_ops *ops, void *data, unsigned *count,
                       struct supervise **ret, char *err, size_t errlen);
