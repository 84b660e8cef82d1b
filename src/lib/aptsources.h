/* The Debian archive the host's apt already uses, so `image build` fetches from the mirror an
 * admin chose (and through the proxy they set) without naming any archive in our code. */
#pragma once
#include <stddef.h>

/* The URI of the first enabled "deb" source whose components include main and whose suites
 * include a release (a suite without a "-pocket" or "/": bookworm, not bookworm-security), in
 * apt's own order: APT_DIR/sources.list, then APT_DIR/sources.list.d/ *.list and *.sources in
 * name order (one-line and deb822 formats). Only http:// and https:// URIs count. from names
 * the file it came from. 0, -ENOENT when no source qualifies, -ENAMETOOLONG when the URI does
 * not fit, or another -errno. */
int apt_host_mirror(const char *apt_dir, char *uri, size_t uri_size, char *from,
                    size_t from_size);

/* The same for text already read: one file's content, deb822 when is_deb822. */
int apt_mirror_in_text(const char *text, int is_deb822, char *uri, size_t uri_size);
