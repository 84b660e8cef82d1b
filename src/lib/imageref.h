/* Image references as Docker reads them, and sha256 content digests:
 *   debian                      registry-1.docker.io  library/debian  latest
 *   debian:bookworm             registry-1.docker.io  library/debian  bookworm
 *   user/app@sha256:<64 hex>    registry-1.docker.io  user/app        (digest)
 *   ghcr.io/o/r:v1              ghcr.io               o/r             v1
 *   127.0.0.1:5000/t/busybox    127.0.0.1:5000        t/busybox       latest
 * The first path component is a registry when it has a '.' or a ':' or is "localhost". */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct image_ref {
        char registry[256]; /* host[:port] to connect to */
        char repository[256];
        char tag[129];   /* "latest" when neither tag nor digest is given */
        char digest[72]; /* "sha256:<64 hex>" or "" */
        bool loopback;   /* localhost, 127.0.0.0/8 or [::1] */
};

/* -EINVAL with the reason in why for anything Docker would refuse. */
int image_ref_parse(const char *s, struct image_ref *ret, char *why, size_t whylen);
/* The image name a pull makes by default: "debian-bookworm", "busybox-latest",
 * "app-0123456789ab" (digest). -EINVAL when no valid name comes out. */
int image_ref_default_name(const struct image_ref *r, char *buf, size_t len);
/* The manifest reference: the digest when there is one, else the tag. */
const char *image_ref_reference(const struct image_ref *r);
/* host[:port] is localhost, 127.0.0.0/8 or [::1]. */
bool image_host_is_loopback(const char *hostport);
/* sha256 of a buffer as "sha256:<64 hex>" (buf of at least 72 bytes). */
void image_digest_of(const void *data, size_t len, char *buf);
/* "sha256:" followed by exactly 64 lowercase hex digits. */
bool image_digest_valid(const char *d);
