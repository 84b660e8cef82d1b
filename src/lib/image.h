/* Image trees: unpack a tar (plain, gzip, zstd, xz) or a stack of OCI layers into a directory
 * that becomes an image's rootfs, and pack an image back into a tar. All of it runs in forked
 * helpers: the caller forks, the child calls these and exits (they chroot).
 *
 * Archives are hostile input. The unpacking process chroots into the destination first, so
 * no path, symlink or hardlink in an archive can reach anything outside it; on top of that
 * libarchive's secure-extraction flags refuse "..", absolute paths and writing through
 * symlinks; device nodes are skipped; owners outside 0..65535 become 65534 (files on disk stay
 * in 0..65535, the range every environment maps); a hard link is only a second name (no data,
 * mode or owner of its own). OCI whiteouts remove only what they name, each
 * parent resolved without following any symlink (RESOLVE_NO_SYMLINKS), below the new root. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* dest_dir must exist and be empty. Reports the unpacked size of regular files. */
int image_unpack(int archive_fd, const char *dest_dir, uint64_t *ret_bytes, char *errbuf,
                 size_t errlen);

/* The steps image_unpack is made of, for layered sources (OCI pulls):
 * chroot into dest_dir (irreversible: helpers only) ... */
int image_enter_root(const char *dest_dir, char *errbuf, size_t errlen);
/* ... apply one layer to the working directory (the root, after image_enter_root; every path,
 * whiteouts included, stays beneath it). With whiteouts, the layer is read twice (archive_fd
 * must be a regular file): first its whiteout entries (.wh.NAME removes NAME, .wh..wh..opq
 * empties its directory) act on the lower layers, then everything else is extracted. Adds the
 * size of its regular files to *bytes ... */
int image_apply_layer(int archive_fd, bool whiteouts, uint64_t *bytes, char *errbuf, size_t errlen);
/* ... and make the mount points every image needs. */
int image_finish_root(char *errbuf, size_t errlen);

/* Size of the regular files below the current root ("/"), hardlinks counted once. */
uint64_t image_tree_bytes(void);

enum image_compression { IMAGE_TAR, IMAGE_TAR_GZIP, IMAGE_TAR_ZSTD };
/* "none"/"tar", "gzip"/"gz", "zstd"/"zst"; -EINVAL otherwise. */
int image_compression_from_string(const char *s, enum image_compression *ret);

/* Write the tree at src_dir as a tar (numeric owners, no xattrs, nothing from other
 * mounts) to out_fd. Chroots into src_dir first, so nothing outside it can be reached. */
int image_pack(const char *src_dir, int out_fd, enum image_compression c, char *errbuf,
               size_t errlen);
