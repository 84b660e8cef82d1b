/* Thin wrappers around the btrfs ioctls Paddock uses: subvolumes, snapshots, quotas.
 * Every call works on fds; names are single path components inside a directory fd. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/* Is the open directory fd the root of a btrfs subvolume? */
bool btrfs_is_subvolume(int fd);
/* Is fd on a btrfs filesystem? */
bool btrfs_is_btrfs(int fd);
/* A new empty subvolume dirfd/name. */
int btrfs_subvol_create(int dirfd, const char *name);
/* A snapshot of the subvolume src_fd as dirfd/name; read-only when rdonly. Atomic: after a
 * crash the snapshot either exists completely or not at all. */
int btrfs_snapshot(int src_fd, int dirfd, const char *name, bool rdonly);
/* Delete the subvolume dirfd/name with everything in it (read-only ones too); -ENOTEMPTY when
 * it holds other subvolumes. */
int btrfs_subvol_delete(int dirfd, const char *name);
int btrfs_subvol_set_readonly(int fd, bool rdonly);
/* The subvolume (tree) id of the subvolume holding fd. */
int btrfs_subvol_id(int fd, uint64_t *ret_id);
/* Enable quota accounting on the filesystem of fd: simple quotas (Linux 6.7+) when simple,
 * else full qgroups. Enabling what is already enabled succeeds. */
int btrfs_quota_enable(int fd, bool simple);
/* Limit the referenced and exclusive size of the level-0 qgroup of subvolume id (bytes 0 =
 * remove the limit). */
int btrfs_qgroup_limit(int fd, uint64_t subvol_id, uint64_t bytes);
/* Referenced bytes counted for subvolume id (its level-0 qgroup), -ENOENT without quotas. */
int btrfs_qgroup_usage(int fd, uint64_t subvol_id, uint64_t *ret_bytes);
/* When the subvolume holding fd was created (a snapshot's own time, not its root's). */
int btrfs_subvol_otime(int fd, int64_t *ret_sec);
/* Commit the filesystem and wake its cleaner, which frees deleted subvolumes (and gives their
 * space back to quota groups) in the background. */
int btrfs_sync(int fd);
