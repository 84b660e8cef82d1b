/* Host-side interface names of environments: "pdk" + 11 hex digits, the first 44 bits of an
 * HMAC-SHA256 of the environment's name under a random key kept in the state directory
 * (network.key, 32 bytes, mode 0600). A client cannot foresee the name another's environment
 * gets, so it cannot pick a name of its own whose link would take that one's place; and the
 * daemon refuses a name whose link name is already another environment's (engine.c).
 *
 * Daemons before the key named links "pdk" + 8 hex digits, an FNV-1a of the name seeded with the
 * state directory: anybody can compute those. The links of running environments outlive a
 * daemon restart, and a restarted daemon must find them by name, so a state directory without
 * a key keeps that naming while any link of that shape is up; the first start that finds none
 * makes the key. An environment's ifb (its ingress shaping) is its veth's name with an "i". */
#pragma once
#include <nettle/hmac.h>
#include <stdbool.h>
#include <stdint.h>

#define IFNAME_PREFIX   "pdk"
#define IFNAME_KEY_FILE "network.key"
#define IFNAME_KEY_LEN  32

struct ifnamer {
        bool keyed;
        uint32_t seed;              /* unkeyed: FNV-1a of the state directory's path */
        struct hmac_sha256_ctx key; /* keyed: the key's inner and outer states */
};

enum ifnamer_source {
        IFNAMER_KEY_READ,     /* the state directory's key */
        IFNAMER_KEY_MADE,     /* a new key, written to the state directory */
        IFNAMER_UNKEYED_KEPT, /* no key, and links of an earlier daemon's naming are up */
};

/* The naming of the state directory root (an absolute, resolved path), from its key file, a new
 * key, or (without a key while links of the unkeyed shape exist in the caller's network
 * namespace) the unkeyed one. A key file is never replaced (the running environments' links
 * carry names made with it): -EBADMSG when it is not a regular file of IFNAME_KEY_LEN bytes,
 * -EPERM when it is not the caller's uid's or others may read it; other -errno from the file
 * system or netlink. */
int ifnamer_open(const char *root, struct ifnamer *ret, enum ifnamer_source *source);
/* env's host-side veth name (NUL-terminated, at most 15 characters). */
void ifnamer_name(const struct ifnamer *n, const char *env, char out[16]);
/* Is link one of the two shapes of an environment's veth or ifb ("pdk" + 8 or 11 lowercase
 * hex digits, then an optional "i")? base gets the veth's name. */
bool ifname_base(const char *link, char base[16]);
