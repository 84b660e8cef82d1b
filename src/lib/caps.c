/* Capability sets and securebits for the two confinement profiles.
 *
 * Runs as uid 0 of the environment's user namespace holding a full capability set; every
 * capability here is namespaced, so "keeping" one only ever acts inside that namespace.
 * Order inside caps_apply(): bounding set and securebits need CAP_SETPCAP in the effective
 * set, so both happen before capset() removes it (sandbox); ambient is cleared before capset()
 * because the kernel would otherwise drop ambient bits implicitly, hiding a mistake. */
#include "lib/confine.h"
#include "lib/util.h"

#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

/* Docker's default capability set: enough for package managers, daemons dropping to their
 * own user, ping and binding low ports; nothing that reaches the kernel's global state. */
static const cap_value_t computer_caps[] = {
        CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FSETID,           CAP_FOWNER,      CAP_MKNOD,
        CAP_NET_RAW, CAP_SETGID,      CAP_SETUID,           CAP_SETFCAP,     CAP_SETPCAP,
        CAP_KILL,   CAP_AUDIT_WRITE,  CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
};

/* Sandbox securebits: uid 0 gets no capabilities from exec (NOROOT), setuid() never
 * recomputes capabilities (NO_SETUID_FIXUP), capabilities are not kept across setuid
 * (KEEP_CAPS off) and ambient ones cannot be raised; all locked so nothing below can undo it. */
#define SANDBOX_SECUREBITS                                                                         \
        (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |                           \
         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |   \
         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

static bool profile_keeps(enum confine_profile p, cap_value_t c)
{
        if (p != PROFILE_COMPUTER)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(computer_caps); i++)
                if (computer_caps[i] == c)
                        return true;
        return false;
}

/* The bounding set is what an exec can ever regain (uid 0 execs get all of it), so it is
 * the limit that matters for every later process in the environment. */
static int drop_bounding(enum confine_profile p)
{
        cap_value_t n = cap_max_bits();
        for (cap_value_t c = 0; c < n; c++) {
                if (profile_keeps(p, c))
                        continue;
                if (cap_drop_bound(c) < 0)
                        return negative_errno();
        }
        return 0;
}

/* capget and capset themselves, not libcap's cap_t: this also runs in an exec slot's command
 * before its execve, on memory it shares with the slot, where nothing may be allocated. */
static int set_process_caps(enum confine_profile p)
{
        struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
        if (capget(&head, data) < 0)
                return -errno;
        /* Keep only what the profile lists and the process already has: capset() can never
         * add a permitted capability, so asking for one we lack would fail with EPERM. */
        uint32_t keep[_LINUX_CAPABILITY_U32S_3] = {0};
        for (size_t i = 0; i < ELEMENTSOF(computer_caps); i++)
                if (profile_keeps(p, computer_caps[i]))
                        keep[CAP_TO_INDEX(computer_caps[i])] |= CAP_TO_MASK(computer_caps[i]);
        for (size_t i = 0; i < ELEMENTSOF(data); i++) {
                data[i].effective &= keep[i];
                data[i].permitted &= keep[i];
                data[i].inheritable = 0; /* nothing is inherited through exec by file caps */
        }
        if (capset(&head, data) < 0)
                return -errno;
        return 0;
}

int caps_apply_bounding(enum confine_profile p)
{
        if (p != PROFILE_COMPUTER && p != PROFILE_SANDBOX)
                return -EINVAL;
        return drop_bounding(p);
}

int caps_apply(enum confine_profile p)
{
        int r = caps_apply_bounding(p);
        return r < 0 ? r : caps_apply_process(p);
}

int caps_apply_process(enum confine_profile p)
{
        if (p != PROFILE_COMPUTER && p != PROFILE_SANDBOX)
                return -EINVAL;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        if (p == PROFILE_SANDBOX && prctl(PR_SET_SECUREBITS, SANDBOX_SECUREBITS, 0, 0, 0) < 0)
                return -errno;
        return set_process_caps(p);
}
