/* Under systemd on a pure cgroup-v2 host, environments live in a delegated scope of their own
 * (paddock.slice/<subtree>.scope), not in the daemon's service: systemd 252 refuses to start a
 * service's new main process in a group that hands controllers down (status=219/CGROUP), so
 * environments in the service's group would make every restart fail. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Pick the group environments go below, for cgroup_manager_new_delegated: on a pure v2 host
 * booted with systemd, the scope <slice>/<subtree>.scope (made through systemd-run, or found
 * from an earlier start), written to own as "/paddock.slice/paddock-1234abcd.scope". Returns 1
 * with own set, 0 where the daemon's own group is the place (no systemd, v1 or hybrid, or
 * environments of an earlier version still there), or a negative errno when the scope could
 * not be made (the caller falls back to its own group, logging why). holder_exe is the path
 * of paddockd, run in the scope as `paddockd --cgroup-holder DIR` to keep it alive. */
int sdscope_prepare(const char *subtree, const char *holder_exe, char *own, size_t size,
                    char *err, size_t errlen);

/* `paddockd --cgroup-holder DIR`: move into DIR/holder and sleep until killed. */
int sdscope_holder_main(const char *dir);
