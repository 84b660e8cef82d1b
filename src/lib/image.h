/* Image import: unpack a tar (plain, gzip, zstd, xz) into a directory that becomes an image's
 * rootfs. Runs in a forked helper: the caller forks, the child calls image_unpack and exits.
 *
 * The archive is hostile input. The unpacking process chroots into the destination first, so
 * no path, symlink or hardlink in the archive can reach anything outside it; on top of that
 * libarchive's secure-extraction flags refuse "..", absolute paths and writing through
 * symlinks; device nodes are skipped; owners above 65535 become 65534 (files on disk stay in
 * 0..65535, the range every environment maps). */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* dest_dir must exist and be empty. Reports the unpacked size of regular files. */
int image_unpack(int archive_fd, const char *dest_dir, uint64_t *ret_bytes, char *errbuf,
                 size_t errlen);
