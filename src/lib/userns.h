/* User namespaces and host id ranges.
 * Every environment owns one 65536-id range on the host. Ranges are claimed in a host-wide
 * registry directory (one file per slot, created O_EXCL) so that several daemons running side
 * by side never hand out overlapping ranges. */
#pragma once
#include <stdint.h>
#include <sys/types.h>

#define UID_RANGE_SIZE  65536u
#define UID_RANGE_FIRST 0x100000u /* 1048576: far above /etc/subuid's usual 100000.. ranges */
#define UID_RANGE_SLOTS 16000u

/* Claim the lowest free slot this process knows of (its view of the registry is read once and
 * kept: other daemons' releases are seen when every other slot is taken); owner is a
 * free-form note stored in the claim file. */
int idrange_claim(const char *registry_dir, const char *owner, uint32_t *ret_base);
/* Re-claim a known base (after reboot the file is still there: ok if it is ours). */
int idrange_reclaim(const char *registry_dir, const char *owner, uint32_t base);
int idrange_release(const char *registry_dir, uint32_t base);
/* The same, only if the range is still claimed by owner: a release repeated after a crash
 * (a delete whose record was not yet on disk is finished again at the next start) must not
 * free a range another environment or daemon has claimed since. 0 if it is not (any more). */
int idrange_release_owned(const char *registry_dir, const char *owner, uint32_t base);

/* Create a user namespace mapping 0..count-1 to base..base+count-1 for uids and gids and
 * return an fd to it. Costs one short-lived clone, waited for. */
int userns_create(uint32_t base, uint32_t count, int *ret_fd);

/* The throw-away child that held a new user namespace: killed, perhaps not gone yet. */
struct userns_holder {
        pid_t pid;
        int pidfd; /* readable once it has exited */
        void *stack;
};
/* userns_create without waiting for the child's end (on a busy host it must first be
 * scheduled to die, milliseconds): the caller reaps it with userns_holder_reap, best once
 * its pidfd is readable. On failure nothing is left to reap. */
int userns_create_nowait(uint32_t base, uint32_t count, int *ret_fd, struct userns_holder *ret);
/* Waits for the child's end if need be, reaps it and frees what it used. */
void userns_holder_reap(struct userns_holder *h);
