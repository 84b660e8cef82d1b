/* A client of the OCI distribution API (Docker registry v2), blocking, for a forked helper.
 *
 * Authentication follows Docker Hub: a 401 with `WWW-Authenticate: Bearer realm=...,
 * service=...,scope=...` sends us to the realm for an anonymous token, and the request is
 * repeated once with `Authorization: Bearer`. curl drops that header when a redirect (blob
 * downloads go to a CDN) leaves the host.
 *
 * https with certificate checks always; plain http only to hosts the policy marks insecure.
 *
 * Destinations are restricted (docs/security.md): every connection -- to the registry, to its
 * token realm, to each redirect target (followed here, hop by hop, not by curl) -- must go to a
 * public address (lib/netaddr.h), checked on the address actually connected to (curl's
 * open-socket callback, so DNS rebinding cannot slip past a check of the name), unless the
 * policy names that host: then any address is fine. No proxy from the environment is used (a
 * proxy would resolve names itself). A refusal is -EACCES with a message naming the host, the
 * address and the paddockd flag that allows it.
 *
 * Every blob is checked against its digest and size while it streams to disk, so nothing
 * unverified is ever unpacked. */
#pragma once
#include "lib/imageref.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REGISTRY_MAX_MANIFEST (4u << 20)

struct registry;

/* Hosts an admin allowed: paddockd --allow-registry HOST[:PORT] (any address) and
 * --insecure-registry HOST[:PORT] (any address, and plain http). Without a port an entry
 * covers every port of the host. Hosts are compared as written in URLs (a name, an IPv4
 * address, or an IPv6 one in brackets), without case. */
#define REGISTRY_POLICY_MAX 64
struct registry_allow {
        char host[256]; /* lowercase */
        unsigned port;  /* 0: any */
        bool insecure;
};
struct registry_policy {
        struct registry_allow allow[REGISTRY_POLICY_MAX];
        size_t n;
};
/* -EINVAL for a malformed HOST[:PORT], -E2BIG past REGISTRY_POLICY_MAX entries. */
int registry_policy_add(struct registry_policy *p, const char *hostport, bool insecure);
/* The entry that covers host (as in a URL: IPv6 in brackets) and port, or NULL. */
const struct registry_allow *registry_policy_find(const struct registry_policy *p, const char *host,
                                                  unsigned port);
/* Plain http may go to host[:port], a reference's registry (no port: 80). */
bool registry_policy_insecure(const struct registry_policy *p, const char *hostport);

/* Progress of a download: bytes so far and expected. */
typedef void (*registry_progress_fn)(uint64_t done, uint64_t total, void *data);

/* insecure: speak plain http to the registry (the policy must mark it insecure). policy must
 * outlive the registry; NULL is the empty policy. */
int registry_open(const struct image_ref *ref, bool insecure, const struct registry_policy *policy,
                  struct registry **ret);
void registry_close(struct registry *r);

/* GET /v2/<repo>/manifests/<reference>. *ret_body (malloc'd, NUL-terminated) and its media
 * type (Content-Type, or NULL). A 404 gives -ENOENT. */
int registry_get_manifest(struct registry *r, const char *reference, char **ret_body,
                          size_t *ret_len, char **ret_type, char *err, size_t errlen);

/* GET /v2/<repo>/blobs/<digest> into fd: exactly size bytes whose sha256 is digest, or
 * -EBADMSG (digest mismatch), -EFBIG (longer than size), -EIO. */
int registry_get_blob(struct registry *r, const char *digest, uint64_t size, int fd,
                      registry_progress_fn progress, void *data, char *err, size_t errlen);
