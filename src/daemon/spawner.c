/* The spawn process (spawner.h): the loop's side keeps the requests in the order they were
 * sent; the process clones one PID 1 (with its first exec slot, if asked) or exec slot per
 * request and answers with their fds. */
#include "daemon/spawner.h"
#include "daemon/log.h"
#include "daemon/loop.h"
#include "lib/util.h"

#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

/* A request's strings (paths, the environment of PID 1) travel in one datagram. */
#define SPAWN_MSG_MAX (256 * 1024)
#define SPAWN_ENVP_MAX 4096
/* How long a request may wait for its answer (a clone: milliseconds) before the process is
 * taken for stuck (stopped, or hung in the kernel), killed, and the request cloned in place;
 * and how long spawner_cancel, which holds the loop, waits for one. */
#define SPAWN_ANSWER_MS 5000
#define SPAWN_CANCEL_MS 1000
#define SPAWNER_COMM "paddockd-spawn"

enum { STR_HOSTNAME, STR_IMAGE, STR_ENV_DIR, STR_TREE, STR_OVERLAY, STR_RESOLV, STR_LXCFS,
       STR_CPU_ONLINE, STR_CGROUP, STR_SLOT_SUB, N_STRS };

enum spawn_kind { SPAWN_PID1 = 1, SPAWN_SLOT = 2 };

struct spawn_head {
        uint32_t kind; /* SPAWN_PID1 */
        uint32_t profile, uid_base, n_envp;
        uint8_t writable, shifted, net, sysfs_shared, make_cgroup;
        uint64_t tmp_bytes, shm_bytes;
        struct cgroup_limits limits; /* with make_cgroup */
};

/* The limits of the request being served (decode points its make_cgroup here). */
static struct cgroup_limits msg_limits;

struct spawn_answer {
        int32_t r;
        int32_t pid;
        int32_t slot_pid; /* a PID 1's exec slot, if one was asked for and made (else 0) */
        char err[256];
};

struct spawner_req {
        struct spawner *owner;
        spawner_fn fn;
        void *data;
        bool cancelled;
        bool waiting_answer; /* sent, its answer not read yet */
        uint64_t seq;
        enum spawn_kind kind;
        bool want_slot; /* a PID 1 whose first exec slot was asked for */
        /* its answer, once read: p for a PID 1, slot for an exec slot */
        int r;
        struct spawn_pending p;
        struct join_slot slot;
        char err[256];
        struct spawner_req *next;
};

struct spawner {
        struct loop *loop;
        pid_t pid; /* 0 once gone */
        int pidfd, sock;
        struct loop_source *sock_src, *exit_src;
        struct spawner_req *head, **tail;   /* sent, not answered; in order */
        struct spawner_req *ready, **ready_tail; /* answered, not handed out yet */
        struct loop_timer *ready_timer;
        struct loop_timer *watchdog; /* while requests wait: for the one numbered `watched` */
        uint64_t watched, sent;      /* requests are numbered from 1 as they are sent */
};

/* ---- the wire ----------------------------------------------------------------------------- */

/* A string as a presence byte and its bytes with their NUL. */
static bool put_str(char *buf, size_t *off, const char *s)
{
        size_t k = s ? strlen(s) + 1 : 0;
        if (*off + 1 + k > SPAWN_MSG_MAX)
                return false;
        buf[(*off)++] = s ? 1 : 0;
        memcpy(buf + *off, s, k);
        *off += k;
        return true;
}

static bool get_str(char *buf, size_t len, size_t *off, const char **ret)
{
        if (*off >= len)
                return false;
        bool present = buf[(*off)++];
        *ret = NULL;
        if (!present)
                return true;
        char *end = memchr(buf + *off, 0, len - *off);
        if (!end)
                return false;
        *ret = buf + *off;
        *off = (size_t)(end - buf) + 1;
        return true;
}

static int encode(const struct spawn_config *c, const char *slot_sub, char *buf, size_t *len)
{
        const struct rootfs_config *f = &c->rootfs;
        struct spawn_head h = {.kind = SPAWN_PID1, .profile = (uint32_t)c->profile,
                               .uid_base = f->uid_base,
                               .writable = f->writable, .shifted = f->shifted,
                               .sysfs_shared = f->sysfs_shared,
                               .make_cgroup = c->make_cgroup != NULL,
                               .net = (uint8_t)c->net, .tmp_bytes = f->tmp_bytes, .shm_bytes = f->shm_bytes};
        if (c->make_cgroup)
                h.limits = *c->make_cgroup;
        while (c->init_envp && c->init_envp[h.n_envp])
                if (++h.n_envp > SPAWN_ENVP_MAX)
                        return -E2BIG;
        size_t off = sizeof(h);
        const char *strs[N_STRS] = {
                [STR_HOSTNAME] = c->hostname,  [STR_IMAGE] = f->image_rootfs,
                [STR_ENV_DIR] = f->env_dir,    [STR_TREE] = f->tree,
                [STR_OVERLAY] = f->overlay_dir, [STR_RESOLV] = f->resolv_conf,
                [STR_LXCFS] = f->lxcfs_dir,    [STR_CPU_ONLINE] = f->cpu_online,
                [STR_CGROUP] = c->cgroup_name, [STR_SLOT_SUB] = slot_sub};
        for (size_t i = 0; i < N_STRS; i++)
                if (!put_str(buf, &off, strs[i]))
                        return -E2BIG;
        for (uint32_t i = 0; i < h.n_envp; i++)
                if (!put_str(buf, &off, c->init_envp[i]))
                        return -E2BIG;
        memcpy(buf, &h, sizeof(h));
        *len = off;
        return 0;
}

/* Fills c from buf (pointers into it), envp and *slot_sub (NULL: no exec slot asked for); the
 * process's own side. */
static int decode(char *buf, size_t len, struct spawn_config *c, char **envp,
                  const char **slot_sub)
{
        struct spawn_head h;
        if (len < sizeof(h))
                return -EBADMSG;
        memcpy(&h, buf, sizeof(h));
        if (h.kind != SPAWN_PID1 || h.n_envp > SPAWN_ENVP_MAX || h.net > SPAWN_NET_V6)
                return -EBADMSG;
        size_t off = sizeof(h);
        const char *strs[N_STRS];
        for (size_t i = 0; i < N_STRS; i++)
                if (!get_str(buf, len, &off, &strs[i]))
                        return -EBADMSG;
        for (uint32_t i = 0; i < h.n_envp; i++)
                if (!get_str(buf, len, &off, (const char **)&envp[i]) || !envp[i])
                        return -EBADMSG;
        envp[h.n_envp] = NULL;
        if (!strs[STR_HOSTNAME] || !strs[STR_IMAGE] || !strs[STR_ENV_DIR] || !strs[STR_CGROUP])
                return -EBADMSG;
        *slot_sub = strs[STR_SLOT_SUB];
        c->hostname = strs[STR_HOSTNAME];
        c->profile = (enum confine_profile)h.profile;
        c->cgroup_name = strs[STR_CGROUP];
        c->init_envp = envp;
        c->net = (enum spawn_net)h.net;
        msg_limits = h.limits;
        c->make_cgroup = h.make_cgroup ? &msg_limits : NULL;
        c->rootfs = (struct rootfs_config){.image_rootfs = strs[STR_IMAGE],
                                           .env_dir = strs[STR_ENV_DIR],
                                           .writable = h.writable,
                                           .tree = strs[STR_TREE],
                                           .shifted = h.shifted,
                                           .overlay_dir = strs[STR_OVERLAY],
                                           .uid_base = h.uid_base,
                                           .tmp_bytes = h.tmp_bytes,
                                           .shm_bytes = h.shm_bytes,
                                           .resolv_conf = strs[STR_RESOLV],
                                           .lxcfs_dir = strs[STR_LXCFS],
                                           .cpu_online = strs[STR_CPU_ONLINE],
                                           .sysfs_shared = h.sysfs_shared};
        return 0;
}

/* An exec slot (join.h): its profile, group and whether it waits for its go; the environment's
 * pidfd comes with it. */
struct slot_head {
        uint32_t kind; /* SPAWN_SLOT */
        int32_t profile;
        uint8_t wait_go;
};

static int encode_slot(const struct join_config *c, bool wait_go, char *buf, size_t *len)
{
        struct slot_head h = {.kind = SPAWN_SLOT, .profile = (int32_t)c->profile,
                              .wait_go = wait_go};
        size_t off = sizeof(h);
        if (!put_str(buf, &off, c->cgroup_name) || !put_str(buf, &off, c->cgroup_sub))
                return -E2BIG;
        memcpy(buf, &h, sizeof(h));
        *len = off;
        return 0;
}

static int decode_slot(char *buf, size_t len, struct join_config *c, bool *wait_go)
{
        struct slot_head h;
        if (len < sizeof(h))
                return -EBADMSG;
        memcpy(&h, buf, sizeof(h));
        size_t off = sizeof(h);
        const char *name, *sub;
        if (h.kind != SPAWN_SLOT || !get_str(buf, len, &off, &name) ||
            !get_str(buf, len, &off, &sub) || !name || !sub)
                return -EBADMSG;
        *c = (struct join_config){.profile = (enum confine_profile)h.profile, .cgroup_name = name,
                                  .cgroup_sub = sub};
        *wait_go = h.wait_go;
        return 0;
}

/* ---- the process -------------------------------------------------------------------------- */

/* Its buffers are static: a process forked from the daemon allocates nothing it need not. */
static char msg_buf[SPAWN_MSG_MAX];
static char *msg_envp[SPAWN_ENVP_MAX + 1];
/* PADDOCK_TEST_SLOT_DELAY_MS: every exec slot is made this much later, so that a test can see
 * the loop go on meanwhile (test_spawner.py). */
static unsigned long slot_test_delay_ms;

static void slot_test_delay(void)
{
        if (slot_test_delay_ms)
                nanosleep(&(struct timespec){.tv_sec = (time_t)(slot_test_delay_ms / 1000),
                                             .tv_nsec = (long)(slot_test_delay_ms % 1000) * 1000000L},
                          NULL);
}

static void answer_fds(int sock, const struct spawn_answer *a, const int *fds, size_t n_fds)
{
        union {
                char buf[CMSG_SPACE(3 * sizeof(int))];
                struct cmsghdr align;
        } u = {0};
        struct iovec iov = {.iov_base = (void *)a, .iov_len = sizeof(*a)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        if (n_fds) {
                m.msg_control = u.buf;
                m.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
                memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
        }
        while (sendmsg(sock, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
                ;
}

/* The exec slot that comes with a new PID 1 (pidfd), waiting for its go (join.h); none if it
 * cannot be made (the first exec makes one then). */
static struct join_slot pid1_slot(struct cgroup_manager *cg, const struct spawn_config *c,
                                  int pidfd, const char *sub)
{
        struct join_slot js = {.sock = -EBADF};
        slot_test_delay();
        struct join_config jc = {.env_pidfd = pidfd, .profile = c->profile, .cgroups = cg,
                                 .cgroup_name = c->cgroup_name, .cgroup_sub = sub,
                                 .clone_parent = true};
        if (join_slot_start(&jc, true, &js) < 0)
                js = (struct join_slot){.sock = -EBADF};
        return js;
}

/* A PID 1, and its exec slot if asked for (the loop then need not wait for a second request);
 * the user namespace's fd comes with it. */
static void serve_pid1(int sock, struct cgroup_manager *cg, int init_fd, size_t n, int userns)
{
        struct spawn_answer a = {0};
        struct spawn_config c = {0};
        const char *slot_sub = NULL;
        int r = decode(msg_buf, n, &c, msg_envp, &slot_sub);
        if (r < 0 || userns < 0) {
                a.r = r < 0 ? r : -EBADMSG;
                snprintf(a.err, sizeof(a.err), "spawner: a request it cannot read");
                answer_fds(sock, &a, NULL, 0);
                return;
        }
        c.rootfs.userns_fd = userns;
        c.cgroups = cg;
        c.init_fd = init_fd;
        c.clone_parent = true;
        struct spawn_pending p;
        /* The child takes its name from here: "paddockd" until its exec, as when the daemon
         * cloned it itself (what `ps` and the tests look for). */
        prctl(PR_SET_NAME, "paddockd");
        a.r = env_spawn_start(&c, &p, a.err, sizeof(a.err));
        struct join_slot js = {.sock = -EBADF};
        if (a.r >= 0 && slot_sub)
                js = pid1_slot(cg, &c, p.pidfd, slot_sub);
        prctl(PR_SET_NAME, SPAWNER_COMM);
        if (a.r < 0) {
                answer_fds(sock, &a, NULL, 0);
                return;
        }
        a.pid = p.pid;
        a.slot_pid = js.pid;
        int fds[3] = {p.pidfd, p.report_fd, js.sock};
        answer_fds(sock, &a, fds, js.pid > 0 ? 3 : 2);
        close(p.pidfd);
        close(p.report_fd);
        if (js.pid > 0)
                close(js.sock); /* the slot itself is the daemon's child (CLONE_PARENT) */
}

/* An exec slot; the environment's PID 1 pidfd comes with it. */
static void serve_slot(int sock, struct cgroup_manager *cg, size_t n, int env_pidfd)
{
        struct spawn_answer a = {0};
        struct join_config c;
        bool wait_go;
        int r = decode_slot(msg_buf, n, &c, &wait_go);
        if (r < 0 || env_pidfd < 0) {
                a.r = r < 0 ? r : -EBADMSG;
                snprintf(a.err, sizeof(a.err), "spawner: a request it cannot read");
                answer_fds(sock, &a, NULL, 0);
                return;
        }
        c.env_pidfd = env_pidfd;
        c.cgroups = cg;
        c.clone_parent = true;
        slot_test_delay();
        struct join_slot js;
        prctl(PR_SET_NAME, "paddockd"); /* the slot's name, as above */
        a.r = join_slot_start(&c, wait_go, &js);
        prctl(PR_SET_NAME, SPAWNER_COMM);
        if (a.r < 0) {
                snprintf(a.err, sizeof(a.err), "exec slot: %s", strerror(-a.r));
                answer_fds(sock, &a, NULL, 0);
                return;
        }
        a.pid = js.pid;
        answer_fds(sock, &a, &js.sock, 1);
        close(js.sock);
}

static void serve_one(int sock, struct cgroup_manager *cg, int init_fd, ssize_t n, int fd)
{
        uint32_t kind = 0;
        if (n >= (ssize_t)sizeof(kind))
                memcpy(&kind, msg_buf, sizeof(kind));
        if (kind == SPAWN_SLOT) {
                serve_slot(sock, cg, (size_t)n, fd);
                return;
        }
        if (kind == SPAWN_PID1) {
                serve_pid1(sock, cg, init_fd, (size_t)n, fd);
                return;
        }
        struct spawn_answer a = {.r = -EBADMSG};
        snprintf(a.err, sizeof(a.err), "spawner: a request it cannot read");
        answer_fds(sock, &a, NULL, 0);
}

static _Noreturn void spawner_main(int sock, struct cgroup_manager *cg, int init_fd,
                                   pid_t daemon)
{
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL); /* the daemon's signals are the daemon's */
        prctl(PR_SET_NAME, SPAWNER_COMM);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != daemon)
                _exit(0); /* the daemon died before the line above */
        const char *delay = getenv("PADDOCK_TEST_SLOT_DELAY_MS");
        if (delay)
                slot_test_delay_ms = strtoul(delay, NULL, 10);
        for (;;) {
                union {
                        char buf[CMSG_SPACE(sizeof(int))];
                        struct cmsghdr align;
                } u;
                struct iovec iov = {.iov_base = msg_buf, .iov_len = sizeof(msg_buf)};
                struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                                   .msg_controllen = sizeof(u.buf)};
                ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        _exit(0); /* the daemon closed its end */
                int fd = -EBADF; /* the user namespace's, or PID 1's pidfd for a slot */
                struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
                if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
                    cm->cmsg_len == CMSG_LEN(sizeof(int)))
                        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
                serve_one(sock, cg, init_fd, (m.msg_flags & MSG_TRUNC) ? -1 : n, fd);
                if (fd >= 0)
                        close(fd);
        }
}

/* ---- the loop's side ---------------------------------------------------------------------- */

static struct spawner_req *pop(struct spawner_req **head, struct spawner_req ***tail)
{
        struct spawner_req *q = *head;
        if (q) {
                *head = q->next;
                if (!*head)
                        *tail = head;
                q->next = NULL;
        }
        return q;
}

static void push(struct spawner_req ***tail, struct spawner_req *q)
{
        q->next = NULL;
        **tail = q;
        *tail = &q->next;
}

/* Reads one answer into the oldest request and moves it to the ready list: 1, or 0 when none
 * is there yet, or -errno when the socket is gone. */
/* A slot that came with an answer the loop cannot use (its fds cut short, e.g. the daemon out
 * of fds): killed and reaped, if it is the daemon's child as a slot is (CLONE_PARENT); the
 * check keeps a bad pid from naming someone else. */
static void discard_stray_slot(pid_t pid)
{
        if (child_state(pid) == CHILD_NONE)
                return;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}

static int read_answer(struct spawner *s)
{
        struct spawn_answer a = {0};
        union {
                char buf[CMSG_SPACE(3 * sizeof(int))];
                struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = &a, .iov_len = sizeof(a)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                           .msg_controllen = sizeof(u.buf)};
        ssize_t n;
        while ((n = recvmsg(s->sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
                ;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
        if (n <= 0)
                return n < 0 ? -errno : -EPIPE;
        int fds[3] = {-EBADF, -EBADF, -EBADF};
        size_t n_fds = 0;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                for (size_t k = 1; k <= 3; k++)
                        if (cm->cmsg_len == CMSG_LEN(k * sizeof(int))) {
                                memcpy(fds, CMSG_DATA(cm), k * sizeof(int));
                                n_fds = k;
                        }
        a.err[sizeof(a.err) - 1] = 0;
        struct spawner_req *q = pop(&s->head, &s->tail);
        bool pid1 = q && q->kind == SPAWN_PID1;
        bool with_slot = pid1 && a.slot_pid > 0;
        size_t want = !pid1 ? 1 : with_slot ? 3 : 2;
        bool ok = q && n == (ssize_t)sizeof(a) && (!with_slot || q->want_slot) &&
                  (a.r < 0 || (n_fds == want && a.pid > 0));
        if (!ok || a.r < 0) {
                /* A PID 1 it made still dies with its setup: its pidfd, if any, says which. */
                if (!ok && pid1 && fds[0] >= 0)
                        sys_pidfd_send_signal(fds[0], SIGKILL, 0);
                if (!ok && with_slot && n == (ssize_t)sizeof(a))
                        discard_stray_slot(a.slot_pid);
                for (size_t i = 0; i < 3; i++)
                        closep(&fds[i]);
                if (!q)
                        return 1; /* an answer to nothing */
                q->r = ok ? a.r : -EBADMSG;
                snprintf(q->err, sizeof(q->err), "%s", ok ? a.err : "spawner: a malformed answer");
        } else if (q->kind == SPAWN_SLOT) {
                q->slot = (struct join_slot){.pid = a.pid, .sock = fds[0]};
        } else {
                q->p = (struct spawn_pending){.pid = a.pid, .pidfd = fds[0], .report_fd = fds[1]};
                if (a.slot_pid > 0)
                        q->slot = (struct join_slot){.pid = a.slot_pid, .sock = fds[2]};
        }
        q->waiting_answer = false;
        push(&s->ready_tail, q);
        return 1;
}

/* Hands q's answer to its caller, or kills and reaps the child nobody waits for any more. */
static void deliver(struct spawner_req *q)
{
        if (q->cancelled) {
                env_spawn_abandon(&q->p);
                join_slot_discard(&q->slot);
                free(q);
                return;
        }
        spawner_fn fn = q->fn;
        void *data = q->data;
        struct spawn_pending p = q->p;
        struct join_slot slot = q->slot;
        int r = q->r;
        char err[sizeof(q->err)];
        memcpy(err, q->err, sizeof(err));
        free(q);
        fn(r, &p, &slot, err, data);
}

static void deliver_ready(struct spawner *s)
{
        struct spawner_req *q;
        while ((q = pop(&s->ready, &s->ready_tail)))
                deliver(q);
}

static void on_ready_turn(struct loop_timer *t, void *data)
{
        (void)t;
        struct spawner *s = data;
        s->ready_timer = NULL;
        deliver_ready(s);
}

/* The process is gone: every request still waiting fails (its caller gives the create up). */
static void fail_all(struct spawner *s)
{
        struct spawner_req *q;
        while ((q = pop(&s->head, &s->tail))) {
                q->waiting_answer = false;
                q->r = -ESRCH;
                snprintf(q->err, sizeof(q->err), "the spawn process is gone");
                push(&s->ready_tail, q);
        }
}

static void gone(struct spawner *s)
{
        if (!s->pid)
                return;
        /* Its socket may close a moment before it is a zombie: reaped, not left behind. */
        struct pollfd pf = {.fd = s->pidfd, .events = POLLIN};
        (void)poll(&pf, 1, SPAWN_CANCEL_MS);
        siginfo_t si = {0};
        waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG);
        log_error("the spawn process (pid %d) is gone: PID 1s are cloned in the loop now",
                  (int)s->pid);
        /* What it answered before it went is still in the socket (a PID 1 and a slot that
         * run): taken as answers, not failed and left behind. */
        while (read_answer(s) > 0)
                ;
        s->pid = 0;
        loop_remove(s->exit_src);
        s->exit_src = NULL;
        loop_remove(s->sock_src);
        s->sock_src = NULL;
        loop_cancel_timer(s->watchdog);
        s->watchdog = NULL;
        fail_all(s);
}

/* Stuck: killed and reaped, and everything waiting fails over to the loop (gone). */
static void kill_stuck(struct spawner *s, int waited_ms)
{
        log_error("the spawn process (pid %d) did not answer in %d ms: killed", (int)s->pid,
                  waited_ms);
        sys_pidfd_send_signal(s->pidfd, SIGKILL, 0);
        while (waitid(P_PIDFD, (id_t)s->pidfd, &(siginfo_t){0}, WEXITED | WNOWAIT) < 0 &&
               errno == EINTR)
                ;
        gone(s);
}

static void on_watchdog(struct loop_timer *t, void *data);

/* Arms the watchdog for the oldest request, if any waits and none is armed. */
static void watch(struct spawner *s)
{
        if (s->watchdog || !s->head || !s->pid)
                return;
        s->watched = s->head->seq;
        s->watchdog = loop_add_timer(s->loop, SPAWN_ANSWER_MS, on_watchdog, s);
}

static void on_watchdog(struct loop_timer *t, void *data)
{
        (void)t;
        struct spawner *s = data;
        s->watchdog = NULL;
        if (s->pid && s->head && s->head->seq == s->watched) {
                kill_stuck(s, SPAWN_ANSWER_MS);
                deliver_ready(s);
                return;
        }
        watch(s); /* the next one, from now */
}

static void on_answer(struct loop_source *src, int fd, uint32_t events, void *data)
{
        (void)src;
        (void)fd;
        (void)events;
        struct spawner *s = data;
        int r;
        while ((r = read_answer(s)) > 0)
                ;
        if (r < 0)
                gone(s);
        watch(s);
        deliver_ready(s);
}

static void on_exit_ev(struct loop_source *src, int fd, uint32_t events, void *data)
{
        (void)src;
        (void)fd;
        (void)events;
        struct spawner *s = data;
        gone(s);
        deliver_ready(s);
}

int spawner_new(struct loop *loop, struct cgroup_manager *cg, int init_fd, struct spawner **ret)
{
        struct spawner *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (struct spawner){.loop = loop, .pidfd = -EBADF, .sock = -EBADF};
        s->tail = &s->head;
        s->ready_tail = &s->ready;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                int r = -errno;
                free(s);
                return r;
        }
        pid_t daemon = getpid();
        int pidfd = -EBADF;
        struct clone_args args = {.flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd,
                                  .exit_signal = SIGCHLD};
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0) {
                close(sv[0]);
                spawner_main(sv[1], cg, init_fd, daemon);
        }
        close(sv[1]);
        if (pid < 0) {
                int r = -errno;
                close(sv[0]);
                free(s);
                return r;
        }
        s->pid = pid;
        s->pidfd = pidfd;
        s->sock = sv[0];
        int r;
        if ((r = loop_add_fd(loop, s->sock, EPOLLIN, on_answer, s, &s->sock_src)) < 0 ||
            (r = loop_add_fd(loop, s->pidfd, EPOLLIN, on_exit_ev, s, &s->exit_src)) < 0) {
                spawner_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

/* Reads answers here until q's (NULL: every one) has come, or the process is gone, or
 * SPAWN_CANCEL_MS passed (then it is killed: a request taken off must never be answered
 * later). Answers go to the ready list; nobody's function runs here. */
static void wait_for(struct spawner *s, struct spawner_req *q)
{
        uint64_t end = now_ms() + SPAWN_CANCEL_MS;
        while (s->pid && s->head && (!q || q->waiting_answer)) {
                int r = read_answer(s);
                if (r < 0) {
                        gone(s);
                        return;
                }
                if (r > 0)
                        continue;
                uint64_t now = now_ms();
                if (now >= end) {
                        kill_stuck(s, SPAWN_CANCEL_MS);
                        return;
                }
                struct pollfd pf = {.fd = s->sock, .events = POLLIN};
                (void)poll(&pf, 1, (int)(end - now));
        }
}

/* Takes q (answered by wait_for) off the ready list; the others' answers there go to their
 * callers on the next turn. */
static bool take_ready(struct spawner *s, struct spawner_req *q)
{
        bool found = false;
        for (struct spawner_req **pp = &s->ready; *pp; pp = &(*pp)->next)
                if (*pp == q) {
                        *pp = q->next;
                        if (!*pp)
                                s->ready_tail = pp;
                        found = true;
                        break;
                }
        if (s->ready && !s->ready_timer)
                s->ready_timer = loop_add_next_turn(s->loop, on_ready_turn, s);
        return found;
}

void spawner_cancel(struct spawner_req *q)
{
        if (!q)
                return;
        struct spawner *s = q->owner;
        q->cancelled = true;
        wait_for(s, q);
        /* Its child (if it was made) is killed and reaped now; any others' answers that came on
         * the way go to their callers on the next turn. */
        if (take_ready(s, q))
                deliver(q);
        watch(s);
}

/* Sends buf with fd and queues q (freed on failure): 0, -E2BIG (too big for the socket's
 * buffer) or -ESRCH (the socket is broken: the process is gone, its exit event follows). */
static int send_request(struct spawner *s, struct spawner_req *q, const char *buf, size_t len,
                        int fd)
{
        union {
                char cbuf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } u = {0};
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.cbuf,
                           .msg_controllen = sizeof(u.cbuf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        ssize_t n;
        while ((n = sendmsg(s->sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
                ;
        if (n != (ssize_t)len) {
                int r = n < 0 ? -errno : -EIO;
                free(q);
                return r == -EMSGSIZE || r == -ENOBUFS ? -E2BIG : -ESRCH;
        }
        q->seq = ++s->sent;
        push(&s->tail, q);
        watch(s);
        return 0;
}

static struct spawner_req *new_request(struct spawner *s, enum spawn_kind kind)
{
        struct spawner_req *q = calloc(1, sizeof(*q));
        if (q)
                *q = (struct spawner_req){.owner = s, .kind = kind, .waiting_answer = true,
                                          .p = {.pidfd = -EBADF, .report_fd = -EBADF},
                                          .slot = {.sock = -EBADF}};
        return q;
}

static char request_buf[SPAWN_MSG_MAX];

int spawner_spawn(struct spawner *s, const struct spawn_config *c, const char *slot_sub,
                  spawner_fn fn, void *data, struct spawner_req **ret)
{
        if (!s || !s->pid || !fn)
                return -ESRCH;
        size_t len;
        int r = encode(c, slot_sub, request_buf, &len);
        if (r < 0)
                return r;
        struct spawner_req *q = new_request(s, SPAWN_PID1);
        if (!q)
                return -ENOMEM;
        q->want_slot = slot_sub != NULL;
        q->fn = fn;
        q->data = data;
        r = send_request(s, q, request_buf, len, c->rootfs.userns_fd);
        if (r == 0 && ret)
                *ret = q;
        return r;
}

int spawner_slot(struct spawner *s, const struct join_config *c, bool wait_go,
                 struct join_slot *ret)
{
        if (!s || !s->pid)
                return -ESRCH;
        if (s->head)
                return -EAGAIN; /* busy with earlier requests: not waited for behind them */
        size_t len;
        int r = encode_slot(c, wait_go, request_buf, &len);
        if (r < 0)
                return r;
        struct spawner_req *q = new_request(s, SPAWN_SLOT);
        if (!q)
                return -ENOMEM;
        if ((r = send_request(s, q, request_buf, len, c->env_pidfd)) < 0)
                return r;
        wait_for(s, q); /* earlier answers go to the ready list, handed out on the next turn */
        take_ready(s, q);
        r = q->r;
        if (r == 0)
                *ret = q->slot;
        else if (r != -ESRCH)
                log_debug("exec slot from the spawn process: %s", q->err);
        free(q);
        return r;
}

void spawner_free(struct spawner *s)
{
        if (!s)
                return;
        /* Nobody is called any more: answers in flight only have their children reaped. */
        for (struct spawner_req *q = s->head; q; q = q->next)
                q->cancelled = true;
        for (struct spawner_req *q = s->ready; q; q = q->next)
                q->cancelled = true;
        wait_for(s, NULL);
        fail_all(s);
        deliver_ready(s);
        loop_cancel_timer(s->ready_timer);
        loop_cancel_timer(s->watchdog);
        loop_remove(s->sock_src);
        loop_remove(s->exit_src);
        closep(&s->sock); /* its recvmsg sees the end */
        if (s->pid) {
                struct pollfd p = {.fd = s->pidfd, .events = POLLIN};
                while (poll(&p, 1, SPAWN_ANSWER_MS) < 0 && errno == EINTR)
                        ;
                if (!(p.revents & POLLIN))
                        sys_pidfd_send_signal(s->pidfd, SIGKILL, 0);
                while (waitid(P_PIDFD, (id_t)s->pidfd, &(siginfo_t){0}, WEXITED) < 0 &&
                       errno == EINTR)
                        ;
        }
        closep(&s->pidfd);
        free(s);
}
