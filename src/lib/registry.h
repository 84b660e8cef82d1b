/* A client of the OCI distribution API (Docker registry v2), blocking, for a forked helper.
 *
 * Authentication follows Docker Hub: a 401 with `WWW-Authenticate: Bearer realm=...,
 * service=...,scope=...` sends us to the realm for an anonymous token, and the request is
 * repeated once with `Authorization: Bearer`. curl drops that header when a redirect (blob
 * downloads go to a CDN) leaves the host.
 *
 * https with certificate checks always; plain http only with insecure, which the caller allows
 * for loopback registries alone. Every blob is checked against its digest and size while it
 * streams to disk, so nothing unverified is ever unpacked. */
#pragma once
#include "lib/imageref.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REGISTRY_MAX_MANIFEST (4u << 20)

struct registry;

/* Progress of a download: bytes so far and expected. */
typedef void (*registry_progress_fn)(uint64_t done, uint64_t total, void *data);

int registry_open(const struct image_ref *ref, bool insecure, struct registry **ret);
void registry_close(struct registry *r);

/* GET /v2/<repo>/manifests/<reference>. *ret_body (malloc'd, NUL-terminated) and its media
 * type (Content-Type, or NULL). A 404 gives -ENOENT. */
int registry_get_manifest(struct registry *r, const char *reference, char **ret_body,
                          size_t *ret_len, char **ret_type, char *err, size_t errlen);

/* GET /v2/<repo>/blobs/<digest> into fd: exactly size bytes whose sha256 is digest, or
 * -EBADMSG (digest mismatch), -EFBIG (longer than size), -EIO. */
int registry_get_blob(struct registry *r, const char *digest, uint64_t size, int fd,
                      registry_progress_fn progress, void *data, char *err, size_t errlen);
