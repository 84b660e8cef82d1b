/* The daemon's side of the network gateway: see gateway.h for the split and the protocol. */
#include "daemon/gateway.h"
#include "daemon/log.h"
#include "daemon/supervise.h"
#include "lib/userns.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <grp.h>
#include <linux/securebits.h>
#include <pwd.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

_Static_assert(GATEWAY_FALLBACK_ID >= UID_RANGE_FIRST + (uint64_t)UID_RANGE_SLOTS * UID_RANGE_SIZE,
               "the gateway's fallback id must lie above every environment's id range");
_Static_assert(GATEWAY_FALLBACK_ID < 0x80000000u, "ids from 2^31 up read as negative to some tools");

#define RESTART_MIN_MS 1000u
#define RESTART_MAX_MS 30000u
#define STABLE_MS 60000u           /* a gateway that ran this long restarts after the minimum again */
#define CONTROL_MAX_MSG 4096       /* a connect message is ~60 bytes */
#define CONTROL_MAX_FDS 8          /* room to see (and close) a message carrying too many */
#define CONTROL_BATCH 64           /* messages taken per wake-up: the loop has other clients */
#define CONTROL_SNDBUF (4u << 20)  /* the token table is one datagram */

struct gateway {
        struct loop *loop;
        struct http_server *http;
        int exe_fd;
        uid_t uid;
        gid_t gid;
        struct gateway_listen listen[GATEWAY_MAX_LISTEN];
        size_t n_listen;
        char *cert_path, *key_path, *fingerprint;

        struct supervise *sup;   /* the running gateway, or NULL */
        int ctl;                 /* the engine's end of its control socket, or -EBADF */
        struct loop_source *ctl_src;
        struct loop_timer *restart;
        unsigned backoff_ms;
        uint64_t started_ms;
        char child_err[256];     /* the failing step, from the child's status pipe */
        char *tokens_msg;        /* the whole table as one datagram */
        bool tokens_pending;     /* not yet sent on the current control socket */
        bool stopping;
        void (*ingress)(void *ctx, unsigned epoch, json_t *msg);
        void *ingress_ctx;
        unsigned epoch; /* one per start of the gateway: ingress answers go to the one that asked */
};

/* The one gateway of this daemon, for GET /v1/system. */
static struct gateway *current;

/* ------------------------------------------------------------------ listen addresses */

static bool parse_port(const char *s, uint16_t *ret)
{
        if (!*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s))
                return false;
        unsigned long p = strtoul(s, NULL, 10);
        if (p < 1 || p > 65535)
                return false;
        *ret = (uint16_t)p;
        return true;
}

int gateway_parse_listen(const char *s, bool tls, struct gateway_listen *ret, char *err,
                         size_t errlen)
{
        struct gateway_listen l = {.tls = tls, .fd = -EBADF};
        char host[INET6_ADDRSTRLEN + 2];
        const char *port;
        bool v6 = s[0] == '[';
        if (v6) {
                const char *close = strchr(s, ']');
                if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof(host)) {
                        snprintf(err, errlen, "%s: write an IPv6 address as [ADDR]:PORT, like [::]:8443", s);
                        return -EINVAL;
                }
                memcpy(host, s + 1, (size_t)(close - s - 1));
                host[close - s - 1] = 0;
                port = close + 2;
        } else {
                const char *colon = strrchr(s, ':');
                if (!colon || strchr(s, ':') != colon || (size_t)(colon - s) >= sizeof(host)) {
                        snprintf(err, errlen, "%s: use ADDR:PORT, like 0.0.0.0:8443 or [::]:8443", s);
                        return -EINVAL;
                }
                memcpy(host, s, (size_t)(colon - s));
                host[colon - s] = 0;
                port = colon + 1;
        }
        uint16_t p;
        if (!parse_port(port, &p)) {
                snprintf(err, errlen, "%s: the port must be a number from 1 to 65535", s);
                return -EINVAL;
        }
        bool loopback;
        if (v6) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&l.sa;
                if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
                        snprintf(err, errlen, "%s: %s is not an IPv6 address", s, host);
                        return -EINVAL;
                }
                a->sin6_family = AF_INET6;
                a->sin6_port = htons(p);
                l.sa_len = sizeof(*a);
                loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
                inet_ntop(AF_INET6, &a->sin6_addr, l.ip, sizeof(l.ip));
                snprintf(l.text, sizeof(l.text), "[%s]:%u", l.ip, p);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)&l.sa;
                if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
                        snprintf(err, errlen, "%s: %s is not an IPv4 address (IPv6: [ADDR]:PORT)",
                                 s, host);
                        return -EINVAL;
                }
                a->sin_family = AF_INET;
                a->sin_port = htons(p);
                l.sa_len = sizeof(*a);
                loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
                inet_ntop(AF_INET, &a->sin_addr, l.ip, sizeof(l.ip));
                snprintf(l.text, sizeof(l.text), "%s:%u", l.ip, p);
        }
        if (!tls && !loopback) {
                snprintf(err, errlen,
                         "%s: plain HTTP only on a loopback address (127.0.0.0/8 or [::1]); "
                         "use --listen for TLS",
                         s);
                return -EPERM;
        }
        *ret = l;
        return 0;
}

int gateway_bind(struct gateway_listen *l)
{
        int family = l->sa.ss_family;
        _cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
                return -errno;
        /* [::] means IPv6 only: IPv4 is its own --listen, never a mapped surprise. */
        if (family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *)&l->sa, l->sa_len) < 0 || listen(fd, 511) < 0)
                return -errno;
        l->fd = TAKE_FD(fd);
        return 0;
}

/* ------------------------------------------------------------------ the gateway's user */

int gateway_resolve_user(const char *spec, uid_t *ret_uid, gid_t *ret_gid, char *err,
                         size_t errlen)
{
        uid_t uid;
        gid_t gid;
        if (spec) {
                struct passwd *pw = NULL;
                if (*spec && strspn(spec, "0123456789") == strlen(spec) && strlen(spec) <= 10) {
                        unsigned long long v = strtoull(spec, NULL, 10);
                        if (v >= UINT32_MAX) {
                                snprintf(err, errlen, "--gateway-user %s: not a valid uid", spec);
                                return -EINVAL;
                        }
                        uid = (uid_t)v;
                        pw = getpwuid(uid);
                        gid = pw ? pw->pw_gid : (gid_t)uid;
                } else if ((pw = getpwnam(spec))) {
                        uid = pw->pw_uid;
                        gid = pw->pw_gid;
                } else {
                        snprintf(err, errlen, "--gateway-user %s: no such user", spec);
                        return -ENOENT;
                }
        } else {
                struct passwd *pw = getpwnam("paddock-gateway");
                uid = pw ? pw->pw_uid : GATEWAY_FALLBACK_ID;
                gid = pw ? pw->pw_gid : GATEWAY_FALLBACK_ID;
        }
        if (uid == 0 || gid == 0) {
                snprintf(err, errlen, "the gateway must not run as root (uid %u, gid %u)", uid, gid);
                return -EPERM;
        }
        *ret_uid = uid;
        *ret_gid = gid;
        return 0;
}

/* ------------------------------------------------------------------ the child */

struct child_args {
        const struct gateway *g;
        int ctl, cert_fd, key_fd;
        char *const *argv;
};

/* Report the failing step on the status pipe (close-on-exec: a successful exec closes it
 * with nothing written) and die. */
static _Noreturn void child_fail(int status_fd, const char *step, int e)
{
        char msg[256];
        int n = snprintf(msg, sizeof(msg), "%s: %s", step, strerror(e));
        if (n > 0)
                (void)!write(status_fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
        _exit(127);
}

/* Every capability gone, for good: the bounding set (what an exec could regain) and the
 * securebits need CAP_SETPCAP, so they go while still root; setresuid() away from uid 0 then
 * clears the permitted and effective sets (KEEP_CAPS off and locked), and capset() makes sure
 * of it, inheritable included. */
static int drop_privileges(uid_t uid, gid_t gid, const char **ret_step)
{
        *ret_step = "bounding set";
        for (cap_value_t c = 0; c < cap_max_bits(); c++)
                if (cap_drop_bound(c) < 0 && errno != EINVAL)
                        return -errno;
        *ret_step = "ambient capabilities";
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        *ret_step = "securebits";
        if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                             SECBIT_NO_CAP_AMBIENT_RAISE |
                                             SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                  0, 0, 0) < 0)
                return -errno;
        *ret_step = "setgroups";
        if (setgroups(0, NULL) < 0)
                return -errno;
        *ret_step = "setresgid";
        if (setresgid(gid, gid, gid) < 0)
                return -errno;
        *ret_step = "setresuid";
        if (setresuid(uid, uid, uid) < 0)
                return -errno;
        *ret_step = "capset";
        cap_t none = cap_init(); /* all clear */
        int r = none && cap_set_proc(none) == 0 ? 0 : negative_errno();
        if (none)
                cap_free(none);
        if (r < 0)
                return r;
        *ret_step = "no_new_privs";
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

/* Runs in the forked child (supervise_fork): every fd of the daemon is still open here. */
static void child_main(void *arg, pid_t daemon_pid, int status_fd, int data_fd)
{
        const struct child_args *a = arg;
        const struct gateway *g = a->g;
        int keep[GATEWAY_MAX_LISTEN + 5];
        size_t n = 0;
        keep[n++] = status_fd;
        keep[n++] = a->ctl;
        keep[n++] = a->cert_fd;
        keep[n++] = a->key_fd;
        keep[n++] = g->exe_fd;
        for (size_t i = 0; i < g->n_listen; i++)
                keep[n++] = g->listen[i].fd;
        /* close_fds_from wants them sorted. */
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
                        int t = keep[j];
                        keep[j] = keep[j - 1];
                        keep[j - 1] = t;
                }
        int r = close_fds_from(3, keep, n);
        if (r < 0)
                child_fail(status_fd, "closing fds", -r);
        reset_signals();
        /* stdout and stderr stay (its log lines join the daemon's); stdin may be the
         * administrator's terminal, which is none of its business. */
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0 || (null == STDIN_FILENO ? fcntl(null, F_SETFD, 0) : dup2(null, STDIN_FILENO)) < 0)
                child_fail(status_fd, "/dev/null", errno);
        if (setsid() < 0)
                child_fail(status_fd, "setsid", errno);
        if (chdir("/") < 0)
                child_fail(status_fd, "chdir", errno);
        /* The fds the gateway gets by number survive the exec; nothing else does. */
        int pass[GATEWAY_MAX_LISTEN + 3];
        size_t np = 0;
        pass[np++] = a->ctl;
        pass[np++] = a->cert_fd;
        pass[np++] = a->key_fd;
        for (size_t i = 0; i < g->n_listen; i++)
                pass[np++] = g->listen[i].fd;
        for (size_t i = 0; i < np; i++)
                if (fcntl(pass[i], F_SETFD, 0) < 0)
                        child_fail(status_fd, "clearing close-on-exec", errno);
        const char *step;
        if ((r = drop_privileges(g->uid, g->gid, &step)) < 0)
                child_fail(status_fd, step, -r);
        /* After the credential change, which clears it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                child_fail(status_fd, "PR_SET_PDEATHSIG", errno);
        if (getppid() != daemon_pid)
                _exit(0);
        static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        syscall(SYS_execveat, g->exe_fd, "", a->argv, envp, AT_EMPTY_PATH);
        child_fail(status_fd, "exec paddock-gateway", errno);
}

/* ------------------------------------------------------------------ control socket */

static void send_tokens(struct gateway *g)
{
        if (!g->tokens_pending || g->ctl < 0 || !g->tokens_msg)
                return;
        ssize_t n = send(g->ctl, g->tokens_msg, strlen(g->tokens_msg), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
                g->tokens_pending = false;
                loop_set_events(g->ctl_src, EPOLLIN);
                return;
        }
        if (errno == EAGAIN || errno == ENOBUFS) {
                loop_set_events(g->ctl_src, EPOLLIN | EPOLLOUT); /* again when there is room */
                return;
        }
        log_warn("gateway: sending the token table: %m");
}

static void close_fds(const int *fds, size_t n)
{
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
}

/* A client connection the gateway accepted: must be one connected AF_UNIX stream socket (the
 * gateway's socketpair). Anything else, a TCP socket in particular, would let the engine speak
 * plain HTTP to the network. */
static const char *check_conn_fd(int fd)
{
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
                return "not a socket";
        int v = 0;
        socklen_t len = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX)
                return "not a unix socket";
        len = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0 || v != SOCK_STREAM)
                return "not a stream socket";
        len = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || v)
                return "a listening socket";
        return NULL;
}

static bool peer_valid(const char *p)
{
        size_t n = strlen(p);
        return n > 0 && n < 64 && strspn(p, "0123456789abcdefABCDEF.:[]") == n;
}

static void handle_message(struct gateway *g, const char *buf, size_t len, const int *fds,
                           size_t nfds)
{
        json_error_t jerr;
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        const char *op = json_string_value(json_object_get(j, "op"));
        if (json_is_object(j) && op && strcmp(op, "ingress") == 0 && nfds == 0) {
                /* A preview URL's request (ingress.h). */
                json_int_t id = json_integer_value(json_object_get(j, "id"));
                if (g->ingress)
                        g->ingress(g->ingress_ctx, g->epoch, j);
                else if (id > 0)
                        gateway_ingress_answer(g->epoch, (uint64_t)id, 502, "bad_gateway",
                                               "preview URLs are not served here", -1);
                json_decref(j);
                return;
        }
        const char *peer = json_string_value(json_object_get(j, "peer"));
        const char *why = NULL;
        if (!j || !json_is_object(j))
                why = "not a JSON object";
        else if (!op || strcmp(op, "connect"))
                why = "unknown op";
        else if (!peer || !peer_valid(peer))
                why = "bad peer";
        else if (nfds != 1)
                why = nfds ? "more than one fd" : "no fd";
        else
                why = check_conn_fd(fds[0]);
        if (why) {
                log_warn("gateway: dropping a control message (%s, %zu fds)", why, nfds);
                close_fds(fds, nfds);
                json_decref(j);
                return;
        }
        log_debug("gateway: connection from %s", peer);
        http_server_add_connection(g->http, fds[0], peer);
        json_decref(j);
}

/* One datagram: its bytes and the fds that came with it (close-on-exec from birth). 1 done,
 * 0 nothing more now, -errno the end (EOF or error). */
static int receive_one(struct gateway *g)
{
        char buf[CONTROL_MAX_MSG];
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int) * CONTROL_MAX_FDS)];
        } cbuf;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
                           .msg_controllen = sizeof(cbuf.b)};
        ssize_t n = recvmsg(g->ctl, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        int fds[CONTROL_MAX_FDS];
        size_t nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                const unsigned char *data = CMSG_DATA(c);
                for (size_t i = 0; i < k && nfds < CONTROL_MAX_FDS; i++)
                        memcpy(&fds[nfds++], data + i * sizeof(int), sizeof(int));
        }
        if (n == 0 && nfds == 0)
                return -EPIPE;
        if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                log_warn("gateway: dropping an oversized control message");
                close_fds(fds, nfds);
                return 1;
        }
        buf[n] = 0;
        handle_message(g, buf, (size_t)n, fds, nfds);
        return 1;
}

static void close_control(struct gateway *g)
{
        loop_remove(g->ctl_src);
        g->ctl_src = NULL;
        closep(&g->ctl);
        g->ctl = -EBADF;
}

static void on_control(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct gateway *g = data;
        if (events & EPOLLOUT)
                send_tokens(g);
        for (int i = 0; i < CONTROL_BATCH; i++) {
                int r = receive_one(g);
                if (r == 0)
                        return;
                if (r < 0) {
                        /* The gateway closed its end: its exit follows on the pidfd. */
                        if (r != -EPIPE)
                                log_warn("gateway: control socket: %s", strerror(-r));
                        close_control(g);
                        return;
                }
        }
}

/* ------------------------------------------------------------------ supervision */

static void spawn(struct gateway *g);

static void on_restart(struct loop_timer *t, void *data)
{
        struct gateway *g = data;
        g->restart = NULL;
        spawn(g);
}

static void schedule_restart(struct gateway *g)
{
        if (now_ms() - g->started_ms > STABLE_MS)
                g->backoff_ms = RESTART_MIN_MS;
        log_warn("gateway: restarting in %u ms", g->backoff_ms);
        g->restart = loop_add_timer(g->loop, g->backoff_ms, on_restart, g);
        g->backoff_ms = g->backoff_ms * 2 > RESTART_MAX_MS ? RESTART_MAX_MS : g->backoff_ms * 2;
}

static bool on_child_status(void *data, int fd)
{
        struct gateway *g = data;
        size_t have = strlen(g->child_err);
        ssize_t n = read(fd, g->child_err + have, sizeof(g->child_err) - 1 - have);
        if (n > 0) {
                g->child_err[have + (size_t)n] = 0;
                return true;
        }
        return n < 0 && errno == EAGAIN;
}

static void on_child_exit(void *data, const struct supervise_exit *x)
{
        struct gateway *g = data;
        supervise_abandon(g->sup, false);
        g->sup = NULL;
        close_control(g);
        if (g->child_err[0])
                log_error("gateway: could not start: %s", g->child_err);
        else if (x->signaled)
                log_warn("gateway: killed by signal %d", x->status);
        else
                log_warn("gateway: exited with status %d", x->status);
        if (!g->stopping)
                schedule_restart(g);
}

static const struct supervise_ops child_ops = {.status = on_child_status, .exit = on_child_exit};

static int open_ro(const char *path)
{
        int fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int build_argv(const struct gateway *g, int ctl, int cert_fd, int key_fd, char ***ret)
{
        size_t argc = 11 + 2 * g->n_listen;
        char **argv = calloc(argc + 1, sizeof(char *));
        if (!argv)
                return -ENOMEM;
        size_t i = 0;
        bool ok = (argv[i++] = strdup("paddock-gateway"));
        ok = ok && (argv[i++] = strdup("--control")) && asprintf(&argv[i++], "%d", ctl) >= 0;
        for (size_t k = 0; ok && k < g->n_listen; k++)
                ok = (argv[i++] = strdup("--listen")) &&
                     asprintf(&argv[i++], "%d:%s", g->listen[k].fd,
                              g->listen[k].tls ? "tls" : "plain") >= 0;
        ok = ok && (argv[i++] = strdup("--cert-fd")) && asprintf(&argv[i++], "%d", cert_fd) >= 0;
        ok = ok && (argv[i++] = strdup("--key-fd")) && asprintf(&argv[i++], "%d", key_fd) >= 0;
        if (ok && gateway_domain())
                ok = (argv[i++] = strdup("--domain")) && (argv[i++] = strdup(gateway_domain()));
        if (!ok) {
                for (size_t k = 0; k < argc; k++)
                        free(argv[k]);
                free(argv);
                return -ENOMEM;
        }
        *ret = argv;
        return 0;
}

static void free_argv(char **argv)
{
        for (size_t i = 0; argv && argv[i]; i++)
                free(argv[i]);
        free(argv);
}

static int spawn_once(struct gateway *g)
{
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -errno;
        _cleanup_close_ int ours = sp[0], theirs = sp[1];
        int size = CONTROL_SNDBUF;
        if (setsockopt(ours, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
                (void)setsockopt(ours, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        if (fcntl(ours, F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        _cleanup_close_ int cert_fd = open_ro(g->cert_path);
        _cleanup_close_ int key_fd = open_ro(g->key_path);
        if (cert_fd < 0 || key_fd < 0) {
                log_error("gateway: opening %s: %s", cert_fd < 0 ? g->cert_path : g->key_path,
                          strerror(-(cert_fd < 0 ? cert_fd : key_fd)));
                return cert_fd < 0 ? cert_fd : key_fd;
        }
        char **argv = NULL;
        int r = build_argv(g, theirs, cert_fd, key_fd, &argv);
        if (r < 0)
                return r;
        struct child_args a = {.g = g, .ctl = theirs, .cert_fd = cert_fd, .key_fd = key_fd,
                               .argv = argv};
        struct supervise_spec spec = {.loop = g->loop, .label = "gateway", .ops = &child_ops,
                                      .data = g};
        g->child_err[0] = 0;
        r = supervise_fork(&spec, true, false, child_main, &a, &g->sup);
        free_argv(argv);
        if (r < 0)
                return r;
        r = loop_add_fd(g->loop, ours, EPOLLIN, on_control, g, &g->ctl_src);
        if (r < 0) {
                supervise_kill(g->sup); /* its exit schedules the next try */
                return 0;
        }
        g->ctl = TAKE_FD(ours);
        g->epoch++;
        g->started_ms = now_ms();
        g->tokens_pending = true; /* a new gateway knows no tokens yet */
        send_tokens(g);
        return 0;
}

static void spawn(struct gateway *g)
{
        int r = spawn_once(g);
        if (r < 0) {
                log_error("gateway: cannot start: %s", strerror(-r));
                schedule_restart(g);
        }
}

/* ------------------------------------------------------------------ the interface */

int gateway_start(const struct gateway_config *cfg, struct gateway **ret)
{
        if (cfg->n_listen == 0 || cfg->n_listen > GATEWAY_MAX_LISTEN)
                return -EINVAL;
        struct gateway *g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->loop = cfg->loop;
        g->http = cfg->http;
        g->exe_fd = cfg->exe_fd;
        g->uid = cfg->uid;
        g->gid = cfg->gid;
        memcpy(g->listen, cfg->listen, cfg->n_listen * sizeof(*cfg->listen));
        g->n_listen = cfg->n_listen;
        g->ctl = -EBADF;
        g->backoff_ms = RESTART_MIN_MS;
        g->ingress = cfg->ingress;
        g->ingress_ctx = cfg->ingress_ctx;
        g->cert_path = strdup(cfg->cert_path);
        g->key_path = strdup(cfg->key_path);
        g->fingerprint = strdup(cfg->fingerprint);
        g->tokens_msg = strdup("{\"op\":\"tokens\",\"tokens\":[]}");
        if (!g->cert_path || !g->key_path || !g->fingerprint || !g->tokens_msg) {
                gateway_stop(g);
                return -ENOMEM;
        }
        int r = spawn_once(g);
        if (r < 0) {
                gateway_stop(g);
                return r;
        }
        current = g;
        *ret = g;
        return 0;
}

void gateway_stop(struct gateway *g)
{
        if (!g)
                return;
        if (current == g)
                current = NULL;
        g->stopping = true;
        loop_cancel_timer(g->restart);
        close_control(g); /* the gateway exits at EOF on its control socket */
        if (g->sup) {
                if (!supervise_reap_now(g->sup, 2000)) {
                        log_warn("gateway: still running 2 s after its control socket closed: killing it");
                        supervise_kill(g->sup);
                        supervise_reap_now(g->sup, 5000);
                }
                supervise_abandon(g->sup, true);
        }
        free(g->cert_path);
        free(g->key_path);
        free(g->fingerprint);
        free(g->tokens_msg);
        free(g);
}

void gateway_set_tokens(struct gateway *g, const struct gateway_token *t, size_t n)
{
        if (!g)
                return;
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
                json_t *o = json_pack("{s:s,s:s,s:b,s:f,s:I}", "name", t[i].name, "hash",
                                      t[i].hash_hex, "admin", t[i].admin, "rate", t[i].rate,
                                      "expires_at", (json_int_t)t[i].expires_at);
                if (!o || json_array_append_new(arr, o) < 0) {
                        json_decref(arr);
                        arr = NULL;
                }
        }
        json_t *msg = arr ? json_pack("{s:s,s:o}", "op", "tokens", "tokens", arr) : NULL;
        char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        json_decref(msg);
        if (!text) {
                log_error("gateway: out of memory building the token table");
                return;
        }
        free(g->tokens_msg);
        g->tokens_msg = text;
        g->tokens_pending = true;
        send_tokens(g);
}

json_t *gateway_system_json(void)
{
        struct gateway *g = current;
        if (!g)
                return json_null();
        json_t *tls = json_array(), *plain = json_array();
        for (size_t i = 0; i < g->n_listen; i++)
                json_array_append_new(g->listen[i].tls ? tls : plain,
                                      json_string(g->listen[i].text));
        return json_pack("{s:o,s:o,s:s,s:o}", "listen", tls, "listen_plain", plain,
                         "tls_fingerprint", g->fingerprint, "domain",
                         gateway_domain() ? json_string(gateway_domain()) : json_null());
}

void gateway_ingress_answer(unsigned epoch, uint64_t id, int status, const char *code,
                            const char *message, int fd)
{
        struct gateway *g = current;
        if (!g || g->epoch != epoch || g->ctl < 0)
                return; /* the gateway that asked is gone, and its client with it */
        /* "op" first: the gateway looks for the prefix {"op":"ingress" before parsing. */
        json_t *m = json_pack("{s:s,s:I,s:i}", "op", "ingress", "id", (json_int_t)id, "status",
                              status);
        if (m && status) {
                json_object_set_new(m, "code", json_string(code ? code : "bad_gateway"));
                json_object_set_new(m, "message", json_string(message ? message : ""));
        }
        char *text = m ? json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(m);
        if (!text) {
                log_error("gateway: out of memory answering a preview request");
                return;
        }
        union {
                struct cmsghdr h;
                char b[CMSG_SPACE(sizeof(int))];
        } u = {0};
        struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fd >= 0) {
                mh.msg_control = u.b;
                mh.msg_controllen = sizeof(u.b);
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        }
        /* The gateway's receive queue holds many datagrams; when it is full the client's
         * connection is dropped by the gateway's head timeout instead. */
        if (sendmsg(g->ctl, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                log_warn("gateway: answering a preview request: %m");
        free(text);
}

/* ---------------------------------------------------------------- preview URL domain */

static char preview_domain[254];

int gateway_set_domain(const char *domain)
{
        size_t n = strlen(domain);
        if (n == 0 || n >= sizeof(preview_domain) || domain[0] == '.' || domain[n - 1] == '.')
                return -EINVAL;
        for (const char *p = domain; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '.') ||
                    (*p == '.' && p[1] == '.'))
                        return -EINVAL;
        for (size_t i = 0; i < n; i++)
                preview_domain[i] = (char)tolower((unsigned char)domain[i]);
        preview_domain[n] = '\0';
        return 0;
}

const char *gateway_domain(void)
{
        return preview_domain[0] ? preview_domain : NULL;
}
