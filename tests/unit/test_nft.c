/* Unit tests of src/lib/nft.c, as root.
 *
 * Every test runs in a child that first unshare(CLONE_NEWNET)s: nftables tables are per network
 * namespace, so the host's firewall is never touched. Behavioural tests build a small topology
 * inside that namespace with iproute2 (tests may shell out; the library may not):
 *
 *   env netns            test netns ("host", holds the table)        internet netns
 *   eth0 10.77.0.2/32 -- pdktest1 10.77.0.1/32                       lo: 198.51.100.1 (allowed)
 *   default via .0.1     uplink0 192.0.2.1/24 ----------------------- eth0 192.0.2.2/24
 *   listens :8080 "env"  routes 198.51.100.1 203.0.113.1                 lo: 203.0.113.1
 *   (env2: 10.77.0.3     169.254.169.254 10.1.2.3 via 192.0.2.2          lo: 169.254.169.254,
 *    behind pdktest2)    listens :53 :9999 "host"                        lo: 10.1.2.3 (private)
 *                                                                    listens :80 :81 "net",
 *                                                                    :82 says the peer address
 *
 * Listeners answer with their tag, so a connection proves which host it reached. Blocked
 * connections are dropped (no RST), so every connect gives up after 500 ms. Listener children
 * die with the test child (PR_SET_PDEATHSIG) and are killed explicitly as well.
 *
 * NFT_TEST_DUMP=1 prints the generated table for an open and an allow environment. */
#include "lib/nft.h"
#include "lib/util.h"
#include "unit.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

static char table[32];

static struct in_addr A(const char *s) {
        struct in_addr a = {0};
        if (inet_pton(AF_INET, s, &a) != 1)
                abort();
        return a;
}

/* ---------------------------------------------------------------- namespaces and processes */

/* Run body in a forked child inside a fresh network namespace; its failures count here. */
static void
in_netns(void (*body)(void))
{
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                unit_failures++;
                return;
        }
        if (pid == 0) {
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                unit_failures = 0; /* this test's own, not those of earlier tests */
                if (unshare(CLONE_NEWNET) < 0) {
                        fprintf(stderr, "  unshare(CLONE_NEWNET): %m\n");
                        _exit(1);
                }
                snprintf(table, sizeof(table), "pdktest_%d", (int)getpid());
                body();
                fflush(stdout);
                fflush(stderr);
                _exit(unit_failures ? 1 : 0);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                unit_failures++;
}

#define NETNS_TEST(name)                                                                           \
        static void name##_body(void);                                                             \
        static void name(void)                                                                     \
        {                                                                                          \
                in_netns(name##_body);                                                             \
        }                                                                                          \
        static void name##_body(void)

static int enter_netns_of(pid_t pid)
{
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)pid);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
                return -errno;
        return 0;
}

/* sh -c in the network namespace of pid (0: ours); returns the exit status. */
static int sh(pid_t ns_pid, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sh(pid_t ns_pid, const char *fmt, ...)
{
        char cmd[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                if (ns_pid > 0 && enter_netns_of(ns_pid) < 0)
                        _exit(126);
                execl("/bin/sh", "sh", "-ec", cmd, (char *)NULL);
                _exit(127);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        if (rc != 0)
                fprintf(stderr, "  command failed (%d): %s\n", rc, cmd);
        return rc;
}

/* A child that (in a new network namespace when asked) listens on TCP ports of every address
 * and greets each connection with tag — on port 82, with the peer's address instead (to see
 * masquerading). Returns once it listens. */
static pid_t spawn_listener(bool new_netns, const char *tag, const uint16_t *ports, size_t n)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(p[0]);
                if (new_netns && unshare(CLONE_NEWNET) < 0)
                        _exit(1);
                struct pollfd pfd[8];
                for (size_t i = 0; i < n && i < ELEMENTSOF(pfd); i++) {
                        /* Dual-stack: IPv4 arrives as ::ffff:a.b.c.d. */
                        int s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
                        int one = 1, zero = 0;
                        struct sockaddr_in6 sa = {.sin6_family = AF_INET6,
                                                  .sin6_port = htons(ports[i])};
                        if (s < 0 ||
                            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
                            setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0 ||
                            bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 64) < 0)
                                _exit(1);
                        pfd[i] = (struct pollfd){.fd = s, .events = POLLIN};
                }
                if (write(p[1], "r", 1) != 1)
                        _exit(1);
                close(p[1]);
                for (;;) {
                        if (poll(pfd, n, -1) < 0)
                                continue;
                        for (size_t i = 0; i < n; i++) {
                                if (!(pfd[i].revents & POLLIN))
                                        continue;
                                struct sockaddr_in6 peer;
                                socklen_t pl = sizeof(peer);
                                int c =
                                    accept4(pfd[i].fd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
                                if (c < 0)
                                        continue;
                                char pa[INET6_ADDRSTRLEN] = "?";
                                if (IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr))
                                        inet_ntop(AF_INET, &peer.sin6_addr.s6_addr[12], pa,
                                                  sizeof(pa));
                                else
                                        inet_ntop(AF_INET6, &peer.sin6_addr, pa, sizeof(pa));
                                const char *say = ports[i] == 82 ? pa : tag;
                                (void)write_all(c, say, strlen(say));
                                close(c);
                        }
                }
        }
        close(p[1]);
        char c;
        ssize_t k = read(p[0], &c, 1);
        close(p[0]);
        if (k != 1) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                return -1;
        }
        return pid;
}

static void reap(pid_t *pid)
{
        if (*pid > 0) {
                kill(*pid, SIGKILL);
                waitpid(*pid, NULL, 0);
                *pid = 0;
        }
}

/* addr (IPv4 or IPv6 text) and port as a socket address; its length, 0 if addr is neither. */
static socklen_t sockaddr_of(const char *addr, uint16_t port, struct sockaddr_storage *ret)
{
        memset(ret, 0, sizeof(*ret));
        struct sockaddr_in *sin = (struct sockaddr_in *)ret;
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ret;
        if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
                sin->sin_family = AF_INET;
                sin->sin_port = htons(port);
                return sizeof(*sin);
        }
        /* "fe80::1%eth0": the scope is looked up in the caller's (current) namespace. */
        char a[INET6_ADDRSTRLEN + IF_NAMESIZE + 1];
        snprintf(a, sizeof(a), "%s", addr);
        char *pct = strchr(a, '%');
        if (pct)
                *pct = 0;
        if (inet_pton(AF_INET6, a, &sin6->sin6_addr) == 1) {
                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons(port);
                if (pct && !(sin6->sin6_scope_id = if_nametoindex(pct + 1)))
                        return 0;
                return sizeof(*sin6);
        }
        return 0;
}

/* From the network namespace of ns_pid (0: ours), connect to addr:port within 500 ms and read
 * the greeting; true if it is want. */
static bool reach(pid_t ns_pid, const char *addr, uint16_t port, const char *want)
{
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0)
                return false;
        if (pid == 0) {
                if (ns_pid > 0 && enter_netns_of(ns_pid) < 0)
                        _exit(2);
                struct sockaddr_storage ss;
                socklen_t sl = sockaddr_of(addr, port, &ss);
                int s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (s < 0 || !sl)
                        _exit(2);
                if (connect(s, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS)
                        _exit(1);
                struct pollfd pfd = {.fd = s, .events = POLLOUT};
                if (poll(&pfd, 1, 500) != 1)
                        _exit(1);
                int err = 0;
                socklen_t l = sizeof(err);
                if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err != 0)
                        _exit(1);
                char buf[48] = {0};
                size_t got = 0;
                while (got < strlen(want)) {
                        pfd = (struct pollfd){.fd = s, .events = POLLIN};
                        if (poll(&pfd, 1, 500) != 1)
                                _exit(1);
                        ssize_t k = read(s, buf + got, sizeof(buf) - 1 - got);
                        if (k <= 0)
                                break;
                        got += (size_t)k;
                }
                _exit(strcmp(buf, want) == 0 ? 0 : 1);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* From the network namespace of ns_pid, send one UDP datagram from src to dst:port. */
static bool send_udp(pid_t ns_pid, const char *src, const char *dst, uint16_t port)
{
        pid_t pid = fork();
        if (pid < 0)
                return false;
        if (pid == 0) {
                if (ns_pid > 0 && enter_netns_of(ns_pid) < 0)
                        _exit(2);
                struct sockaddr_storage from, to;
                socklen_t fl = sockaddr_of(src, 0, &from), tl = sockaddr_of(dst, port, &to);
                int s = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (s < 0 || !fl || !tl || bind(s, (struct sockaddr *)&from, fl) < 0 ||
                    sendto(s, "x", 1, 0, (struct sockaddr *)&to, tl) != 1)
                        _exit(1);
                _exit(0);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---------------------------------------------------------------- topology */

struct topo {
        pid_t env, env2, net, host;
};

static void topo_down(struct topo *t)
{
        reap(&t->env);
        reap(&t->env2);
        reap(&t->net);
        reap(&t->host);
}

static int add_env_netns(struct topo *t, pid_t *slot, const char *tag, const char *veth,
                         const char *addr)
{
        static const uint16_t env_ports[] = {8080};
        *slot = spawn_listener(true, tag, env_ports, ELEMENTSOF(env_ports));
        if (*slot < 0)
                return -1;
        if (sh(0, "ip link add %s type veth peer name eth0 netns %d", veth, (int)*slot) ||
            sh(0, "ip addr add 10.77.0.1/32 dev %s; ip link set %s up; ip route add %s/32 dev %s",
               veth, veth, addr, veth) ||
            sh(*slot,
               "ip link set lo up; ip addr add %s/32 dev eth0; ip link set eth0 up; "
               "ip route add 10.77.0.1/32 dev eth0; ip route add default via 10.77.0.1 dev eth0",
               addr))
                return -1;
        return 0;
}

static int topo_up(struct topo *t, bool env2)
{
        static const uint16_t net_ports[] = {80, 81, 82}, host_ports[] = {53, 9999};
        *t = (struct topo){0};
        if (sh(0, "ip link set lo up") ||
            write_file_at(AT_FDCWD, "/proc/sys/net/ipv4/ip_forward", "1") < 0)
                return -1;
        if (add_env_netns(t, &t->env, "env", "pdktest1", "10.77.0.2") < 0)
                return -1;
        if (env2 && add_env_netns(t, &t->env2, "env2", "pdktest2", "10.77.0.3") < 0)
                return -1;
        t->net = spawn_listener(true, "net", net_ports, ELEMENTSOF(net_ports));
        t->host = spawn_listener(false, "host", host_ports, ELEMENTSOF(host_ports));
        if (t->net < 0 || t->host < 0)
                return -1;
        if (sh(0, "ip link add uplink0 type veth peer name eth0 netns %d", (int)t->net) ||
            sh(0, "ip addr add 192.0.2.1/24 dev uplink0; ip link set uplink0 up") ||
            sh(t->net, "ip link set lo up; ip addr add 192.0.2.2/24 dev eth0; ip link set eth0 up; "
                       "for a in 198.51.100.1 203.0.113.1 169.254.169.254 10.1.2.3; do "
                       "ip addr add $a/32 dev lo; done; ip route add 10.77.0.0/16 via 192.0.2.1") ||
            sh(0, "for a in 198.51.100.1 203.0.113.1 169.254.169.254 10.1.2.3; do "
                  "ip route add $a/32 via 192.0.2.2; done"))
                return -1;
        return 0;
}

/* ---------------------------------------------------------------- reading the table back */

static json_t *nft_json(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *nft_json(const char *fmt, ...)
{
        char cmd[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!c)
                return NULL;
        nft_ctx_buffer_output(c);
        nft_ctx_buffer_error(c);
        nft_ctx_output_set_flags(c, NFT_CTX_OUTPUT_JSON);
        json_t *root = NULL;
        if (nft_run_cmd_from_buffer(c, cmd) == 0)
                root = json_loads(nft_ctx_get_output_buffer(c), JSON_DISABLE_EOF_CHECK, NULL);
        nft_ctx_free(c);
        return root;
}

static void dump_table(const char *what)
{
        if (!getenv("NFT_TEST_DUMP"))
                return;
        struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
        nft_ctx_buffer_output(c);
        nft_ctx_buffer_error(c);
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "list table inet %s", table);
        if (nft_run_cmd_from_buffer(c, cmd) == 0)
                printf("---- %s\n%s", what, nft_ctx_get_output_buffer(c));
        nft_ctx_free(c);
}

/* Object of kind ("chain", "set", "map", "counter") named name in our table, from root. */
static json_t *find_obj(json_t *root, const char *kind, const char *name)
{
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(root, "nftables"), i, it)
        {
                json_t *o = json_object_get(it, kind);
                const char *t = json_string_value(json_object_get(o, "table"));
                const char *nm = json_string_value(json_object_get(o, "name"));
                if (o && t && nm && strcmp(t, table) == 0 && strcmp(nm, name) == 0)
                        return o;
        }
        return NULL;
}

static bool table_has(const char *kind, const char *name)
{
        json_t *root = nft_json("list table inet %s", table);
        bool r = root && find_obj(root, kind, name);
        if (root)
                json_decref(root);
        return r;
}

/* Rules in a listing (which it frees). */
static size_t rules_in(json_t *root)
{
        size_t n = 0, i;
        json_t *it;
        json_array_foreach(json_object_get(root, "nftables"), i, it)
        {
                if (json_object_get(it, "rule"))
                        n++;
        }
        if (root)
                json_decref(root);
        return n;
}

static size_t rules_in_chain(const char *chain)
{
        return rules_in(nft_json("list chain inet %s %s", table, chain));
}

/* Number of elements of a map/set in our table (-1: no such object). */
static long elems(const char *kind, const char *name)
{
        json_t *root = nft_json("list %s inet %s %s", kind, table, name);
        json_t *o = root ? find_obj(root, kind, name) : NULL;
        long n = o ? (long)json_array_size(json_object_get(o, "elem")) : -1;
        if (root)
                json_decref(root);
        return n;
}

/* Number of rules in our table, every chain. */
static size_t rules_in_table(void)
{
        return rules_in(nft_json("list table inet %s", table));
}

static bool table_exists(void)
{
        json_t *root = nft_json("list table inet %s", table);
        if (root)
                json_decref(root);
        return root != NULL;
}

static uint64_t denied(struct nft *n, const char *name)
{
        uint64_t v = UINT64_MAX;
        CHECK_EQ_INT(nft_env_denied(n, name, &v), 0);
        return v;
}

static struct nft *open_test_table(void)
{
        struct nft *n = NULL;
        int r = nft_open(table, A("10.77.0.0"), 16, A("10.77.0.1"), NULL, 0, &n);
        CHECK_EQ_INT(r, 0);
        if (r < 0)
                fprintf(stderr, "  nft: %s\n", n ? nft_last_error(n) : "(no handle)");
        return n;
}

static struct nft_env env_open(const char *name)
{
        return (struct nft_env){
            .name = name, .host_ifname = "pdktest1", .addr = A("10.77.0.2"), .mode = NET_OPEN};
}

/* ---------------------------------------------------------------- tests */

NETNS_TEST(test_nft_open__idempotent_and_confined)
{
        /* Someone else's table: must survive everything we do. */
        struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
        nft_ctx_buffer_error(c);
        CHECK_EQ_INT(nft_run_cmd_from_buffer(c, "add table inet other\n"
                                                "add chain inet other keep\n"),
                     0);
        /* What a daemon before the shared chain open_env left: its template, gone at open. */
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "add table inet %s\nadd chain inet %s tmpl_open\nadd counter inet %s tmpl_denied",
                 table, table, table);
        CHECK_EQ_INT(nft_run_cmd_from_buffer(c, cmd), 0);
        nft_ctx_free(c);

        struct nft *n = open_test_table();
        if (!n)
                return;
        CHECK(table_has("chain", "prerouting"));
        CHECK(table_has("chain", "output"));
        CHECK(table_has("chain", "postrouting"));
        CHECK(table_has("chain", "input"));
        CHECK(table_has("chain", "forward"));
        CHECK(table_has("set", "forbidden4"));
        CHECK(table_has("map", "envs"));
        CHECK(!table_has("chain", "tmpl_open"));
        CHECK(!table_has("counter", "tmpl_denied"));
        CHECK_EQ_INT(rules_in_chain("input"), 6);
        CHECK_EQ_INT(rules_in_chain("forward"), 7);
        CHECK_EQ_INT(rules_in_chain("open_env"), 7);

        struct nft_env e = env_open("keep.me");
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK_EQ_INT(nft_port_add(n, "keep.me", "tcp", 8888, A("10.77.0.2"), 8080), 0);
        nft_close(n);

        /* Daemon restart: re-open keeps environments, ports and the rule counts stay the same. */
        n = open_test_table();
        if (!n)
                return;
        CHECK(table_has("counter", "denied_keep_dme"));
        CHECK_EQ_INT(elems("set", "open_envs"), 1);
        CHECK_EQ_INT(elems("map", "envctr"), 1);
        CHECK_EQ_INT(elems("map", "pub_tcp"), 1);
        CHECK_EQ_INT(rules_in_chain("input"), 6);
        CHECK_EQ_INT(rules_in_chain("spoofed"), 2);
        CHECK_EQ_INT(rules_in_chain("denied"), 2);
        CHECK_EQ_INT(rules_in_chain("forward"), 7);
        CHECK_EQ_INT(rules_in_chain("open_env"), 7);
        CHECK_EQ_INT(rules_in_chain("prerouting"), 2);
        /* Re-applying the same environment is fine too. */
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK_EQ_INT(elems("set", "open_envs"), 1);
        CHECK_EQ_INT(elems("map", "envctr"), 1);

        CHECK_EQ_INT(nft_destroy_table(n), 0);
        CHECK(!table_exists());
        CHECK_EQ_INT(nft_destroy_table(n), 0);
        json_t *other = nft_json("list chain inet other keep");
        CHECK(other != NULL);
        if (other)
                json_decref(other);
        nft_close(n);
}

NETNS_TEST(test_nft_names__validation)
{
        struct nft *n = NULL;
        CHECK_EQ_INT(nft_open("bad;table", A("10.77.0.0"), 16, A("10.77.0.1"), NULL, 0, &n), -EINVAL);
        CHECK_EQ_INT(nft_open("t", A("10.77.0.0"), 33, A("10.77.0.1"), NULL, 0, &n), -EINVAL);
        CHECK(n == NULL);
        n = open_test_table();
        if (!n)
                return;

        static const char *const bad_names[] = {
            "",
            "a b",
            "x;flush ruleset",
            "a\"b",
            "a\nb",
            "a/b",
            "a*",
            "0123456789012345678901234567890123456789012345678901234567890123",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_names); i++) {
                struct nft_env e = env_open(bad_names[i]);
                CHECK_EQ_INT(nft_env_apply(n, &e), -EINVAL);
                CHECK_EQ_INT(nft_env_remove(n, bad_names[i]), -EINVAL);
                CHECK_EQ_INT(nft_env_allow_addr(n, bad_names[i], A("1.2.3.4"), 0, 5), -EINVAL);
        }
        struct nft_env e = env_open("ok");
        e.host_ifname = "eth9"; /* not "pdk*": the base rules would not see it */
        CHECK_EQ_INT(nft_env_apply(n, &e), -EINVAL);
        e.host_ifname = "pdk\"; drop";
        CHECK_EQ_INT(nft_env_apply(n, &e), -EINVAL);
        e = env_open("ok");
        e.addr = A("192.168.1.2"); /* outside the subnet: not masqueraded, not ours */
        CHECK_EQ_INT(nft_env_apply(n, &e), -EINVAL);
        e = env_open("ok");
        struct in_addr link = A("169.254.169.254");
        e.links = &link;
        e.n_links = 1;
        CHECK_EQ_INT(nft_env_apply(n, &e), -EINVAL);
        CHECK_EQ_INT(nft_port_add(n, "ok", "sctp", 1, A("10.77.0.2"), 1), -EINVAL);
        CHECK_EQ_INT(nft_port_add(n, "ok", "tcp", 0, A("10.77.0.2"), 1), -EINVAL);

        /* Missing objects come back as -ENOENT, with libnftables' text kept. */
        uint64_t v;
        CHECK_EQ_INT(nft_env_denied(n, "nobody", &v), -ENOENT);
        CHECK(nft_last_error(n) != NULL);
        CHECK_EQ_INT(nft_env_allow_addr(n, "nobody", A("1.2.3.4"), 0, 5), -ENOENT);
        CHECK_EQ_INT(nft_port_remove(n, "tcp", 4444), -ENOENT);
        CHECK_EQ_INT(nft_env_remove(n, "nobody"), 0);
        CHECK(nft_last_error(n) == NULL);

        /* Names that a '.'/'-' -> '_' mapping would merge stay apart and read back exactly. */
        static const char *const names[] = {"a.b", "a-b", "a_b", "a_db", "A.b-c_d"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                struct nft_env x = env_open(names[i]);
                char ifn[16];
                snprintf(ifn, sizeof(ifn), "pdkn%zu", i);
                x.host_ifname = ifn;
                CHECK_EQ_INT(nft_env_apply(n, &x), 0);
        }
        char **list = NULL;
        size_t cnt = 0;
        CHECK_EQ_INT(nft_env_list(n, &list, &cnt), 0);
        CHECK_EQ_INT(cnt, ELEMENTSOF(names));
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                bool found = false;
                for (size_t k = 0; k < cnt; k++)
                        found |= strcmp(list[k], names[i]) == 0;
                CHECK(found);
        }
        for (size_t k = 0; k < cnt; k++)
                free(list[k]);
        free(list);
        CHECK_EQ_INT(elems("set", "open_envs"), (long)ELEMENTSOF(names));
        CHECK_EQ_INT(elems("map", "envctr"), (long)ELEMENTSOF(names));

        /* One dump reads every environment's counter, names decoded, sorted for lookup; a
         * single get agrees with it. */
        struct nft_denied *all = NULL;
        size_t n_all = 0;
        CHECK_EQ_INT(nft_denied_all(n, &all, &n_all), 0);
        CHECK_EQ_INT(n_all, ELEMENTSOF(names));
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                const struct nft_denied *d = nft_denied_find(all, n_all, names[i]);
                CHECK(d != NULL);
                if (d)
                        CHECK_EQ_INT(d->packets, denied(n, names[i]));
        }
        for (size_t i = 1; i < n_all; i++)
                CHECK(strcmp(all[i - 1].name, all[i].name) < 0);
        CHECK(nft_denied_find(all, n_all, "nobody") == NULL);
        CHECK(nft_denied_find(NULL, 0, "a.b") == NULL);
        free(all);
        nft_destroy_table(n);
        nft_close(n);
}

NETNS_TEST(test_nft_open_mode__behaviour)
{
        struct topo t;
        struct nft *n = open_test_table();
        if (!n || topo_up(&t, false) < 0) {
                CHECK(!"setup");
                goto out;
        }
        /* Without an environment entry, the veth is dropped entirely (fail closed). */
        CHECK(!reach(t.env, "198.51.100.1", 80, "net"));
        CHECK(!reach(t.env, "10.77.0.1", 9999, "host"));

        struct nft_env e = env_open("box");
        size_t rules = rules_in_table();
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        dump_table("open environment \"box\"");
        /* One shared chain for every open environment without links: its create adds a counter
         * and two elements, and no rule (a rule or a jump makes the kernel check the table). */
        CHECK_EQ_INT(rules_in_table(), rules);
        CHECK(!table_has("chain", "env_box"));
        CHECK_EQ_INT(elems("set", "open_envs"), 1);
        CHECK_EQ_INT(elems("map", "envs"), 0);
        CHECK(table_has("counter", "denied_box"));
        CHECK(!table_has("set", "allow4_box")); /* open: nothing to learn, no sets */
        CHECK_EQ_INT(denied(n, "box"), 0);

        CHECK(reach(t.env, "198.51.100.1", 80, "net"));
        CHECK(reach(t.env, "203.0.113.1", 81, "net"));
        CHECK(reach(t.env, "192.0.2.2", 80, "net")); /* the uplink peer: public-ish, allowed */
        uint64_t before = denied(n, "box");
        CHECK(!reach(t.env, "169.254.169.254", 80, "net"));
        CHECK(!reach(t.env, "10.1.2.3", 80, "net"));
        uint64_t after = denied(n, "box");
        CHECK(after > before);
        /* The host: only DNS to the resolver address. */
        CHECK(reach(t.env, "10.77.0.1", 53, "host"));
        before = after;
        CHECK(!reach(t.env, "10.77.0.1", 9999, "host"));
        CHECK(!reach(t.env, "192.0.2.1", 9999, "host"));
        CHECK(!reach(t.env, "192.0.2.1", 53, "host"));
        CHECK(denied(n, "box") > before);
        /* Nothing from outside reaches the environment unless published. */
        CHECK(!reach(t.net, "10.77.0.2", 8080, "env"));
        /* A spoofed source (here another address of the subnet) is dropped and counted, even to an
         * allowed destination. */
        CHECK_EQ_INT(sh(t.env, "ip addr add 10.77.0.50/32 dev eth0"), 0);
        before = denied(n, "box");
        CHECK(send_udp(t.env, "10.77.0.2", "198.51.100.1", 80));
        usleep(100 * 1000);
        CHECK_EQ_INT(denied(n, "box"), before);
        CHECK(send_udp(t.env, "10.77.0.50", "198.51.100.1", 80));
        usleep(100 * 1000);
        CHECK_EQ_INT(denied(n, "box"), before + 1);
        /* ... and so is one outside the subnet, even one that routes back through the host. */
        CHECK_EQ_INT(sh(t.env, "ip addr add 198.51.100.77/32 dev eth0"), 0);
        CHECK(send_udp(t.env, "198.51.100.77", "198.51.100.1", 80));
        usleep(100 * 1000);
        CHECK_EQ_INT(denied(n, "box"), before + 2);
        CHECK_EQ_INT(sh(t.env, "ip addr del 198.51.100.77/32 dev eth0"), 0);
        /* Masqueraded: the internet side sees the host's uplink address. */
        CHECK(reach(t.env, "198.51.100.1", 82, "192.0.2.1"));
        /* The host itself can still reach the environment. */
        CHECK(reach(0, "10.77.0.2", 8080, "env"));
        /* A link forgotten (a new one of that name is coming up) is dropped until its policy
         * is applied again; the environment's counter stays. */
        CHECK_EQ_INT(nft_link_forget(n, "pdktest1"), 0);
        CHECK_EQ_INT(elems("set", "open_envs"), 0);
        CHECK_EQ_INT(elems("map", "envctr"), 0);
        CHECK(table_has("counter", "denied_box"));
        CHECK(!reach(t.env, "198.51.100.1", 80, "net"));
        CHECK_EQ_INT(nft_link_forget(n, "pdktest1"), 0); /* nothing there: fine */
        CHECK_EQ_INT(nft_link_forget(n, "eth0"), -EINVAL); /* never another's link */
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK(reach(t.env, "198.51.100.1", 80, "net"));
        e.mode = NET_ALLOW; /* a chain of its own: its jump goes too */
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK_EQ_INT(elems("map", "envs"), 1);
        CHECK_EQ_INT(nft_link_forget(n, "pdktest1"), 0);
        CHECK_EQ_INT(elems("map", "envs"), 0);
        CHECK_EQ_INT(elems("map", "envctr"), 0);
out:
        topo_down(&t);
        if (n) {
                nft_destroy_table(n);
                nft_close(n);
        }
}

NETNS_TEST(test_nft_allow_mode__behaviour)
{
        struct topo t;
        struct nft *n = open_test_table();
        if (!n || topo_up(&t, false) < 0) {
                CHECK(!"setup");
                goto out;
        }
        struct nft_cidr_rule cidrs[] = {
            {.addr = A("198.51.100.1"), .prefix = 32, .port = 80},
            {.addr = A("10.1.2.0"), .prefix = 24, .port = 0}, /* forbidden wins */
        };
        struct nft_env e = env_open("box");
        e.mode = NET_ALLOW;
        e.cidrs = cidrs;
        e.n_cidrs = ELEMENTSOF(cidrs);
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK_EQ_INT(nft_env_allow_addr(n, "box", A("192.0.2.99"), 443, 600), 0);
        dump_table("allow environment \"box\" (cidrs 198.51.100.1/32:80, 10.1.2.0/24; learned "
                   "192.0.2.99:443)");
        CHECK(table_has("set", "allow4_box"));
        CHECK(table_has("set", "allowp4_box"));

        CHECK(reach(t.env, "198.51.100.1", 80, "net"));
        uint64_t before = denied(n, "box");
        CHECK(!reach(t.env, "198.51.100.1", 81, "net"));
        CHECK(!reach(t.env, "203.0.113.1", 80, "net"));
        CHECK(!reach(t.env, "10.1.2.3", 80, "net"));
        CHECK(denied(n, "box") >= before + 3);

        /* A learned address, any port, for 2 s; then blocked again. */
        CHECK_EQ_INT(nft_env_allow_addr(n, "box", A("203.0.113.1"), 0, 2), 0);
        CHECK_EQ_INT(elems("set", "allow4_box"), 1);
        CHECK(reach(t.env, "203.0.113.1", 80, "net"));
        CHECK(reach(t.env, "203.0.113.1", 81, "net"));
        usleep(3200 * 1000);
        CHECK(!reach(t.env, "203.0.113.1", 80, "net"));

        /* Re-adding refreshes the timeout rather than failing or keeping the old one. */
        CHECK_EQ_INT(nft_env_allow_addr(n, "box", A("203.0.113.1"), 0, 1), 0);
        CHECK_EQ_INT(nft_env_allow_addr(n, "box", A("203.0.113.1"), 0, 600), 0);
        usleep(1500 * 1000);
        CHECK(reach(t.env, "203.0.113.1", 80, "net"));

        /* Address + port. */
        CHECK_EQ_INT(nft_env_allow_addr(n, "box", A("198.51.100.1"), 81, 600), 0);
        CHECK(reach(t.env, "198.51.100.1", 81, "net"));

        /* An allowed name resolving to a metadata or private address stays blocked. */
        CHECK_EQ_INT(nft_env_allow_addr(n, "box", A("169.254.169.254"), 0, 600), 0);
        CHECK_EQ_INT(nft_env_allow_addr(n, "box", A("10.1.2.3"), 80, 600), 0);
        CHECK(!reach(t.env, "169.254.169.254", 80, "net"));
        CHECK(!reach(t.env, "10.1.2.3", 80, "net"));

        /* Re-applying without an allow-list change (restart, bandwidth, links) keeps them. */
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK_EQ_INT(elems("set", "allow4_box"), 2);
        CHECK(reach(t.env, "203.0.113.1", 80, "net"));

        /* Re-applying after an allow-list change revokes learned addresses. */
        e.flush_learned = true;
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        e.flush_learned = false;
        CHECK_EQ_INT(elems("set", "allow4_box"), 0);
        CHECK(!reach(t.env, "203.0.113.1", 80, "net"));
        CHECK(reach(t.env, "198.51.100.1", 80, "net"));

        /* Switching to open in place: an open environment has no learned sets. */
        e.mode = NET_OPEN;
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK(!table_has("set", "allow4_box"));
        CHECK(!table_has("set", "allowp4_box"));
        CHECK(reach(t.env, "203.0.113.1", 80, "net"));
        CHECK(!reach(t.env, "169.254.169.254", 80, "net"));
out:
        topo_down(&t);
        if (n) {
                nft_destroy_table(n);
                nft_close(n);
        }
}

NETNS_TEST(test_nft_ports__behaviour)
{
        struct topo t;
        struct nft *n = open_test_table();
        if (!n || topo_up(&t, false) < 0) {
                CHECK(!"setup");
                goto out;
        }
        struct nft_env e = env_open("box");
        e.mode = NET_ALLOW; /* published ports work whatever the egress policy */
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);

        CHECK(!reach(t.net, "192.0.2.1", 8888, "env"));
        CHECK_EQ_INT(nft_port_add(n, "box", "tcp", 8888, A("10.77.0.2"), 8080), 0);
        CHECK_EQ_INT(nft_port_add(n, "box", "tcp", 8888, A("10.77.0.2"), 8080), 0);
        CHECK_EQ_INT(nft_port_add(n, "box", "tcp", 8888, A("10.77.0.9"), 8080), -EEXIST);
        CHECK_EQ_INT(nft_port_add(n, "box", "udp", 8888, A("10.77.0.2"), 8080), 0);
        /* From outside, to the host's address. */
        CHECK(reach(t.net, "192.0.2.1", 8888, "env"));
        /* From the host itself (output nat), via a non-loopback address. */
        CHECK(reach(0, "192.0.2.1", 8888, "env"));
        /* Only this host's addresses: a connection routed through the host to some other
         * address:8888 is not redirected to the environment. */
        CHECK(!reach(0, "198.51.100.1", 8888, "env"));
        CHECK(!reach(t.net, "10.77.0.99", 8888, "env"));
        /* The direct address still is not reachable from outside. */
        CHECK(!reach(t.net, "10.77.0.2", 8080, "env"));

        CHECK_EQ_INT(nft_port_remove(n, "tcp", 8888), 0);
        CHECK(!reach(t.net, "192.0.2.1", 8888, "env"));
        CHECK_EQ_INT(nft_port_remove(n, "tcp", 8888), -ENOENT);

        /* Ports go away with their environment. */
        CHECK_EQ_INT(nft_port_add(n, "box", "tcp", 8889, A("10.77.0.2"), 8080), 0);
        CHECK_EQ_INT(nft_port_add(n, "other", "tcp", 8890, A("10.77.0.5"), 80), 0);
        CHECK_EQ_INT(elems("map", "pub_tcp"), 2);
        CHECK_EQ_INT(nft_env_remove(n, "box"), 0);
        CHECK_EQ_INT(elems("map", "pub_tcp"), 1);
        CHECK_EQ_INT(elems("map", "pub_udp"), 0);
out:
        topo_down(&t);
        if (n) {
                nft_destroy_table(n);
                nft_close(n);
        }
}

NETNS_TEST(test_nft_links__behaviour)
{
        struct topo t;
        struct nft *n = open_test_table();
        if (!n || topo_up(&t, true) < 0) {
                CHECK(!"setup");
                goto out;
        }
        struct nft_env a = env_open("a"), b = env_open("b");
        b.host_ifname = "pdktest2";
        b.addr = A("10.77.0.3");
        CHECK_EQ_INT(nft_env_apply(n, &a), 0);
        CHECK_EQ_INT(nft_env_apply(n, &b), 0);
        CHECK(!reach(t.env, "10.77.0.3", 8080, "env2"));
        CHECK(!reach(t.env2, "10.77.0.2", 8080, "env"));
        /* Both share chain open_env: one cannot pass for the other (b's address routes out of
         * b's link, not a's). */
        CHECK_EQ_INT(sh(t.env, "ip addr add 10.77.0.3/32 dev eth0"), 0);
        uint64_t before = denied(n, "a"), before_b = denied(n, "b");
        CHECK(send_udp(t.env, "10.77.0.3", "198.51.100.1", 80));
        usleep(100 * 1000);
        CHECK_EQ_INT(denied(n, "a"), before + 1);
        CHECK_EQ_INT(denied(n, "b"), before_b);
        CHECK_EQ_INT(sh(t.env, "ip addr del 10.77.0.3/32 dev eth0"), 0);

        struct in_addr to_b = A("10.77.0.3"), to_a = A("10.77.0.2");
        a.links = &to_b;
        a.n_links = 1;
        b.links = &to_a;
        b.n_links = 1;
        b.mode = NET_ALLOW;
        CHECK_EQ_INT(nft_env_apply(n, &a), 0);
        CHECK_EQ_INT(nft_env_apply(n, &b), 0);
        CHECK(table_has("chain", "env_a")); /* linked: a chain of its own */
        CHECK_EQ_INT(elems("set", "open_envs"), 0);
        CHECK(reach(t.env, "10.77.0.3", 8080, "env2"));
        CHECK(reach(t.env2, "10.77.0.2", 8080, "env"));
        /* Unlinking one side cuts new connections from it. */
        b.links = NULL;
        b.n_links = 0;
        CHECK_EQ_INT(nft_env_apply(n, &b), 0);
        CHECK(!reach(t.env2, "10.77.0.2", 8080, "env"));
        CHECK(reach(t.env, "10.77.0.3", 8080, "env2"));
        /* Unlinked, a is back in the shared chain: its own chain and jump are gone. */
        a.links = NULL;
        a.n_links = 0;
        CHECK_EQ_INT(nft_env_apply(n, &a), 0);
        CHECK(!table_has("chain", "env_a"));
        CHECK_EQ_INT(elems("set", "open_envs"), 1);
        CHECK_EQ_INT(elems("map", "envs"), 1); /* b's */
        CHECK(!reach(t.env, "10.77.0.3", 8080, "env2"));
        CHECK(reach(t.env, "198.51.100.1", 80, "net"));
out:
        topo_down(&t);
        if (n) {
                nft_destroy_table(n);
                nft_close(n);
        }
}

NETNS_TEST(test_nft_none_list_destroy)
{
        struct topo t;
        struct nft *n = open_test_table();
        if (!n || topo_up(&t, false) < 0) {
                CHECK(!"setup");
                goto out;
        }
        struct nft_env e = env_open("web-1.prod");
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        struct nft_env other = env_open("other");
        other.host_ifname = "pdkother";
        other.addr = A("10.77.0.7");
        CHECK_EQ_INT(nft_env_apply(n, &other), 0);
        CHECK_EQ_INT(nft_port_add(n, "web-1.prod", "tcp", 8888, A("10.77.0.2"), 8080), 0);
        CHECK(reach(t.env, "198.51.100.1", 80, "net"));

        char **list = NULL;
        size_t cnt = 0;
        CHECK_EQ_INT(nft_env_list(n, &list, &cnt), 0);
        CHECK_EQ_INT(cnt, 2);
        bool web = false, oth = false;
        for (size_t i = 0; i < cnt; i++) {
                web |= strcmp(list[i], "web-1.prod") == 0;
                oth |= strcmp(list[i], "other") == 0;
                free(list[i]);
        }
        free(list);
        CHECK(web && oth);

        /* Mode none: everything of the environment goes, the other stays. */
        e.mode = NET_NONE;
        e.host_ifname = NULL;
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK(!table_has("chain", "env_web_h1_dprod"));
        CHECK(!table_has("set", "allow4_web_h1_dprod"));
        CHECK(!table_has("set", "allowp4_web_h1_dprod"));
        CHECK(!table_has("counter", "denied_web_h1_dprod"));
        CHECK(table_has("counter", "denied_other"));
        CHECK_EQ_INT(elems("set", "open_envs"), 1);
        CHECK_EQ_INT(elems("map", "envctr"), 1);
        CHECK_EQ_INT(elems("map", "pub_tcp"), 0);
        /* Its veth, if one were left behind, is dropped by the fail-closed rule. */
        CHECK(!reach(t.env, "198.51.100.1", 80, "net"));
        CHECK_EQ_INT(nft_env_apply(n, &e), 0); /* idempotent */

        CHECK_EQ_INT(nft_env_list(n, &list, &cnt), 0);
        CHECK_EQ_INT(cnt, 1);
        if (cnt == 1)
                CHECK_EQ_STR(list[0], "other");
        for (size_t i = 0; i < cnt; i++)
                free(list[i]);
        free(list);

        CHECK_EQ_INT(nft_destroy_table(n), 0);
        CHECK(!table_exists());
        json_t *all = nft_json("list ruleset");
        CHECK(all && json_array_size(json_object_get(all, "nftables")) == 1); /* metainfo only */
        if (all)
                json_decref(all);
        CHECK_EQ_INT(nft_env_list(n, &list, &cnt), 0);
        CHECK_EQ_INT(cnt, 0);
        free(list);
out:
        topo_down(&t);
        if (n)
                nft_close(n);
}


static struct in6_addr A6(const char *s)
{
        struct in6_addr a;
        if (inet_pton(AF_INET6, s, &a) != 1)
                abort();
        return a;
}

/* IPv6 next to the IPv4 topology: env fd77:a4d::2/128 behind pdktest1 (fe80::1), the uplink
 * 2001:db8:1::1/64 -- 2001:db8:1::2/64 of the internet namespace, which holds 2001:db8:2::1
 * (public), fd00:ec2::254 (metadata) and fd12::9 (ULA) on lo. */
static int topo6_up(struct topo *t)
{
        if (write_file_at(AT_FDCWD, "/proc/sys/net/ipv6/conf/all/forwarding", "1") < 0)
                return -1;
        if (sh(0, "ip -6 addr add fe80::1/64 dev pdktest1 nodad; "
                  "ip -6 route add fd77:a4d::2/128 dev pdktest1; "
                  "ip -6 addr add 2001:db8:1::1/64 dev uplink0 nodad; "
                  "for a in 2001:db8:2::1 fd00:ec2::254 fd12::9; do "
                  "ip -6 route add $a/128 via 2001:db8:1::2; done") ||
            sh(t->env, "ip -6 addr add fd77:a4d::2/128 dev eth0 nodad; "
                       "ip -6 route add default via fe80::1 dev eth0") ||
            sh(t->net, "ip -6 addr add 2001:db8:1::2/64 dev eth0 nodad; "
                       "for a in 2001:db8:2::1 fd00:ec2::254 fd12::9; do "
                       "ip -6 addr add $a/128 dev lo; done"))
                return -1;
        return 0;
}

NETNS_TEST(test_nft_ipv6__behaviour)
{
        struct topo t;
        struct nft *n = NULL;
        struct in6_addr sub6 = A6("fd77:a4d::");
        CHECK_EQ_INT(nft_open(table, A("10.77.0.0"), 16, A("10.77.0.1"), &sub6, 64, &n), 0);
        if (!n || topo_up(&t, false) < 0 || topo6_up(&t) < 0) {
                CHECK(!"setup");
                goto out;
        }
        /* No entry for the veth yet: nothing, v6 included. */
        CHECK(!reach(t.env, "2001:db8:2::1", 80, "net"));

        struct nft_env e = env_open("box");
        e.addr6 = A6("fd77:a4d::2");
        /* Its v6 address must be in the v6 subnet. */
        struct nft_env bad = e;
        bad.addr6 = A6("fd77:a4e::2");
        CHECK_EQ_INT(nft_env_apply(n, &bad), -EINVAL);
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        dump_table("open environment \"box\" with IPv6");
        CHECK(table_has("set", "forbidden6"));

        CHECK(reach(t.env, "2001:db8:2::1", 80, "net"));
        /* NAT66: the internet sees the host's uplink address. */
        CHECK(reach(t.env, "2001:db8:2::1", 82, "2001:db8:1::1"));
        uint64_t before = denied(n, "box");
        CHECK(!reach(t.env, "fd00:ec2::254", 80, "net"));
        CHECK(!reach(t.env, "fd12::9", 80, "net"));
        CHECK(denied(n, "box") >= before + 2);
        /* The host over v6: nothing (its listener is on every address, port 9999 and 53). */
        CHECK(!reach(t.env, "2001:db8:1::1", 9999, "host"));
        CHECK(!reach(t.env, "2001:db8:1::1", 53, "host"));
        /* nor the gateway's link-local address: neighbour discovery only */
        CHECK(reach(0, "fe80::1%pdktest1", 9999, "host")); /* (it listens there) */
        CHECK(!reach(t.env, "fe80::1%eth0", 9999, "host"));
        CHECK(!reach(t.env, "fe80::1%eth0", 53, "host"));
        /* Nothing from outside reaches the environment. */
        CHECK(!reach(t.net, "fd77:a4d::2", 8080, "env"));

        /* Spoofed v6 sources are dropped and counted; the real one is not. Neighbour
         * discovery and MLD (the kernel sends MLD reports when the address is added) are
         * never counted. */
        CHECK_EQ_INT(sh(t.env, "ip -6 addr add fd77:a4d::50/128 dev eth0 nodad"), 0);
        usleep(300 * 1000);
        before = denied(n, "box");
        CHECK(send_udp(t.env, "fd77:a4d::2", "2001:db8:2::1", 80));
        usleep(100 * 1000);
        CHECK_EQ_INT(denied(n, "box"), before);
        CHECK(send_udp(t.env, "fd77:a4d::50", "2001:db8:2::1", 80));
        usleep(100 * 1000);
        CHECK_EQ_INT(denied(n, "box"), before + 1);
        /* ... as is another environment's address, routed out of another link */
        CHECK_EQ_INT(sh(0, "ip -6 route add fd77:a4d::3/128 dev uplink0"), 0);
        CHECK_EQ_INT(sh(t.env, "ip -6 addr add fd77:a4d::3/128 dev eth0 nodad"), 0);
        usleep(300 * 1000);
        before = denied(n, "box");
        CHECK(send_udp(t.env, "fd77:a4d::3", "2001:db8:2::1", 80));
        usleep(100 * 1000);
        CHECK_EQ_INT(denied(n, "box"), before + 1);
        CHECK_EQ_INT(sh(t.env, "ip -6 addr del fd77:a4d::3/128 dev eth0"), 0);
        /* (or the kernel may pick it as the source of the connections below) */
        CHECK_EQ_INT(sh(t.env, "ip -6 addr del fd77:a4d::50/128 dev eth0"), 0);

        /* allow: a v6 CIDR with a port, learned v6 addresses; forbidden ones stay blocked. */
        struct nft_cidr_rule cidrs[] = {
            {.family = AF_INET6, .addr6 = A6("2001:db8:2::"), .prefix = 64, .port = 80},
            {.family = AF_INET6, .addr6 = A6("fd00::"), .prefix = 8, .port = 0},
        };
        e.mode = NET_ALLOW;
        e.cidrs = cidrs;
        e.n_cidrs = ELEMENTSOF(cidrs);
        e.flush_learned = true;
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK(table_has("set", "allow6_box"));
        CHECK(table_has("set", "allowp6_box"));
        dump_table("allow environment \"box\" with IPv6 CIDRs");
        CHECK(reach(t.env, "2001:db8:2::1", 80, "net"));
        CHECK(!reach(t.env, "2001:db8:2::1", 81, "net"));
        CHECK(!reach(t.env, "fd00:ec2::254", 80, "net"));
        struct in6_addr pub = A6("2001:db8:2::1"), meta = A6("fd00:ec2::254");
        CHECK_EQ_INT(nft_env_allow_addr6(n, "box", &pub, 81, 600), 0);
        CHECK_EQ_INT(nft_env_allow_addr6(n, "box", &meta, 0, 600), 0);
        CHECK_EQ_INT(elems("set", "allowp6_box"), 1);
        CHECK_EQ_INT(elems("set", "allow6_box"), 1);
        CHECK(reach(t.env, "2001:db8:2::1", 81, "net"));
        CHECK(!reach(t.env, "2001:db8:2::1", 82, "2001:db8:1::1"));
        CHECK(!reach(t.env, "fd00:ec2::254", 80, "net"));
        /* IPv4 of the same environment is unaffected by the v6 rules. */
        CHECK(!reach(t.env, "198.51.100.1", 80, "net"));

        /* Removal from what the caller knows: no listing, and nothing left. */
        CHECK_EQ_INT(nft_env_remove_known(n, "box", "pdktest1", NULL, 0), 0);
        CHECK(!table_has("chain", "env_box"));
        CHECK(!table_has("set", "allow6_box"));
        CHECK(!table_has("set", "allowp6_box"));
        CHECK(!table_has("counter", "denied_box"));
        CHECK_EQ_INT(elems("map", "envs"), 0);
        CHECK(!reach(t.env, "2001:db8:2::1", 80, "net"));
out:
        topo_down(&t);
        if (n) {
                nft_destroy_table(n);
                nft_close(n);
        }
}

/* The fast removal falls back to listing when the caller's picture is wrong: an entry under
 * another interface name still jumps to the chain, a published port it was not told about. */
NETNS_TEST(test_nft_remove_known__falls_back)
{
        struct nft *n = open_test_table();
        if (!n)
                return;
        struct nft_env e = env_open("box");
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        e.host_ifname = "pdktest9"; /* a second entry for the same chain */
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK_EQ_INT(elems("set", "open_envs"), 2);
        CHECK_EQ_INT(elems("map", "envctr"), 2);
        CHECK_EQ_INT(nft_port_add(n, "box", "tcp", 8081, A("10.77.0.2"), 80), 0);
        CHECK_EQ_INT(nft_port_add(n, "box", "udp", 8082, A("10.77.0.2"), 80), 0);
        /* Told about the tcp port only, and only one interface. */
        struct nft_port known[] = {{.proto = "tcp", .host_port = 8081, .addr = A("10.77.0.2"), .port = 80}};
        CHECK_EQ_INT(nft_env_remove_known(n, "box", "pdktest1", known, 1), 0);
        CHECK(!table_has("counter", "denied_box"));
        CHECK_EQ_INT(elems("set", "open_envs"), 0);
        CHECK_EQ_INT(elems("map", "envctr"), 0);
        CHECK_EQ_INT(elems("map", "pub_tcp"), 0);
        /* the udp port does not refer to the chain, so the fast path does not see it: this is
         * why the daemon passes every port it added */
        /* A second removal of what is gone is fine. */
        CHECK_EQ_INT(nft_env_remove_known(n, "box", "pdktest1", known, 1), 0);
        nft_destroy_table(n);
        nft_close(n);
}

/* Queued applies and ports run at nft_batch_end, all together; one the kernel refuses (its
 * interface's entry points at another chain) is redone alone the listing way. */
NETNS_TEST(test_nft_batch__queues_then_applies)
{
        struct nft *n = open_test_table();
        if (!n)
                return;
        struct nft_env old = env_open("old");
        old.host_ifname = "pdkb3";
        CHECK_EQ_INT(nft_env_apply(n, &old), 0);

        CHECK_EQ_INT(nft_batch_begin(n), 0);
        CHECK_EQ_INT(nft_batch_begin(n), -EINVAL);
        static const char *const names[] = {"b1", "b2", "b3"};
        static const char *const ifs[] = {"pdkb1", "pdkb2", "pdkb3"}; /* pdkb3: was old's */
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                struct nft_env x = env_open(names[i]);
                x.host_ifname = ifs[i];
                x.addr = A(i == 0 ? "10.77.0.3" : i == 1 ? "10.77.0.4" : "10.77.0.5");
                CHECK_EQ_INT(nft_env_apply(n, &x), 0);
        }
        CHECK_EQ_INT(nft_port_add(n, "b1", "tcp", 8085, A("10.77.0.3"), 80), 0);
        CHECK(!table_has("counter", "denied_b1")); /* only queued so far */
        CHECK_EQ_INT(elems("map", "pub_tcp"), 0);
        CHECK_EQ_INT(nft_batch_end(n), 0);
        CHECK_EQ_INT(nft_batch_end(n), -EINVAL);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                char counter[32];
                snprintf(counter, sizeof(counter), "denied_%s", names[i]);
                CHECK(table_has("counter", counter));
        }
        CHECK_EQ_INT(elems("map", "pub_tcp"), 1);
        /* old's entry was replaced by b3's: three interfaces, three entries */
        CHECK_EQ_INT(elems("set", "open_envs"), 3);
        CHECK_EQ_INT(elems("map", "envctr"), 3);
        json_t *root = nft_json("list map inet %s envctr", table);
        char *text = root ? json_dumps(root, 0) : NULL;
        CHECK(text && strstr(text, "denied_b3") && !strstr(text, "denied_old"));
        free(text);
        if (root)
                json_decref(root);
        nft_destroy_table(n);
        nft_close(n);
}

/* A removal while batching runs after what was queued before it, not before (the queued apply
 * would bring the environment back). */
NETNS_TEST(test_nft_batch__removal_runs_after_the_queue)
{
        struct nft *n = open_test_table();
        if (!n)
                return;
        struct nft_env a = env_open("qa"), b = env_open("qb");
        b.host_ifname = "pdktest2";
        b.addr = A("10.77.0.3");
        CHECK_EQ_INT(nft_batch_begin(n), 0);
        CHECK_EQ_INT(nft_env_apply(n, &a), 0);
        CHECK_EQ_INT(nft_env_apply(n, &b), 0);
        CHECK_EQ_INT(nft_env_remove_known(n, "qa", "pdktest1", NULL, 0), 0);
        CHECK_EQ_INT(nft_env_remove(n, "qb"), 0);
        CHECK_EQ_INT(nft_env_apply(n, &b), 0);
        CHECK_EQ_INT(nft_batch_end(n), 0);
        CHECK(!table_has("counter", "denied_qa"));
        CHECK(table_has("counter", "denied_qb"));
        CHECK_EQ_INT(elems("set", "open_envs"), 1);
        CHECK_EQ_INT(elems("map", "envctr"), 1);
        nft_destroy_table(n);
        nft_close(n);
}

/* A daemon that ran with IPv6 and now runs IPv4 only still removes the v6 sets it made. */
NETNS_TEST(test_nft_ipv6_then_ipv4_only__removes_v6_sets)
{
        struct nft *n = NULL;
        struct in6_addr sub6 = A6("fd77:a4d::");
        CHECK_EQ_INT(nft_open(table, A("10.77.0.0"), 16, A("10.77.0.1"), &sub6, 64, &n), 0);
        if (!n)
                return;
        struct nft_env e = env_open("box");
        e.mode = NET_ALLOW; /* an open environment has no sets */
        e.addr6 = A6("fd77:a4d::2");
        CHECK_EQ_INT(nft_env_apply(n, &e), 0);
        CHECK(table_has("set", "allow6_box"));
        nft_close(n);
        n = open_test_table(); /* the same table, without IPv6 */
        if (!n)
                return;
        CHECK_EQ_INT(nft_env_remove_known(n, "box", "pdktest1", NULL, 0), 0);
        CHECK(!table_has("set", "allow6_box"));
        CHECK(!table_has("set", "allowp6_box"));
        CHECK(!table_has("chain", "env_box"));
        nft_destroy_table(n);
        nft_close(n);
}

/* The elements of our table's set or map, as JSON text (malloc'd). */
static char *elems_text(const char *kind, const char *name)
{
        json_t *root = nft_json("list %s inet %s %s", kind, table, name);
        json_t *o = root ? find_obj(root, kind, name) : NULL;
        char *text = o ? json_dumps(json_object_get(o, "elem"), JSON_SORT_KEYS) : NULL;
        if (root)
                json_decref(root);
        return text;
}

/* An open environment applied and removed through raw netlink (nft_fast.c) gets exactly the
 * counter and elements that libnftables writes for one (batched applies take the libnftables
 * way), with IPv6 and without; each takes over from a chain of an earlier policy, and each
 * falls back to the listing way when something else refers to the environment's objects. */
static void fast_same_as_text(const struct in6_addr *sub6)
{
        struct nft *n = NULL;
        CHECK_EQ_INT(nft_open(table, A("10.77.0.0"), 16, A("10.77.0.1"), sub6, 64, &n), 0);
        if (!n)
                return;
        struct nft_env fast = env_open("qqq1"), text = env_open("qqq2");
        text.host_ifname = "pdktest2";
        text.addr = A("10.77.0.3");
        if (sub6) {
                fast.addr6 = A6("fd77:a4d::2");
                text.addr6 = A6("fd77:a4d::3");
        }
        /* both linked first: a chain of their own each, which the unlinked apply replaces */
        struct in_addr link = A("10.77.0.9");
        fast.links = text.links = &link;
        fast.n_links = text.n_links = 1;
        CHECK_EQ_INT(nft_env_apply(n, &fast), 0);
        CHECK_EQ_INT(nft_env_apply(n, &text), 0);
        CHECK(table_has("chain", "env_qqq1") && table_has("chain", "env_qqq2"));
        CHECK_EQ_INT((int)nft_fast_changes(n), 0);
        fast.n_links = text.n_links = 0;
        size_t rules = rules_in_chain("open_env");

        CHECK_EQ_INT(nft_env_apply(n, &fast), 0);
        CHECK_EQ_INT((int)nft_fast_changes(n), 1);
        CHECK_EQ_INT(nft_env_apply(n, &fast), 0); /* again: nothing changes */
        CHECK_EQ_INT(nft_batch_begin(n), 0);
        CHECK_EQ_INT(nft_env_apply(n, &text), 0);
        CHECK_EQ_INT(nft_batch_end(n), 0);
        CHECK_EQ_INT((int)nft_fast_changes(n), 2);
        CHECK(!table_has("chain", "env_qqq1"));
        CHECK(!table_has("chain", "env_qqq2"));
        CHECK_EQ_INT(rules_in_chain("open_env"), rules);
        CHECK(table_has("counter", "denied_qqq1") && table_has("counter", "denied_qqq2"));
        CHECK_EQ_INT(elems("map", "envs"), 0);
        char *set = elems_text("set", "open_envs"), *map = elems_text("map", "envctr");
        CHECK(set && strstr(set, "\"pdktest1\"") && strstr(set, "\"pdktest2\""));
        CHECK(map && strstr(map, "[\"pdktest1\", \"denied_qqq1\"]") &&
              strstr(map, "[\"pdktest2\", \"denied_qqq2\"]"));
        free(set);
        free(map);

        CHECK_EQ_INT(nft_env_remove_known(n, "qqq1", "pdktest1", NULL, 0), 0);
        CHECK_EQ_INT((int)nft_fast_changes(n), 3);
        CHECK(!table_has("counter", "denied_qqq1"));
        CHECK_EQ_INT(elems("set", "open_envs"), 1);
        CHECK_EQ_INT(elems("map", "envctr"), 1);
        /* gone already: still fine */
        CHECK_EQ_INT(nft_env_remove_known(n, "qqq1", "pdktest1", NULL, 0), 0);

        /* the link's counter entry naming another counter: taken over (the link is this
         * environment's), by the raw message on this kernel, by the listing way where the
         * kernel refuses it */
        struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
        nft_ctx_buffer_error(c);
        char cmd[200];
        snprintf(cmd, sizeof(cmd),
                 "add element inet %s envctr { \"pdktest1\" : \"denied_qqq2\" }", table);
        CHECK_EQ_INT(nft_run_cmd_from_buffer(c, cmd), 0);
        CHECK_EQ_INT(nft_env_apply(n, &fast), 0);
        int fast_n = (int)nft_fast_changes(n);
        CHECK(fast_n == 3 || fast_n == 4);
        map = elems_text("map", "envctr");
        CHECK(map && strstr(map, "[\"pdktest1\", \"denied_qqq1\"]"));
        free(map);
        /* another link still jumping to the chain of an earlier policy, another link's entry
         * naming the counter: refused, then the listing way, for the apply and the removal */
        fast.n_links = 1;
        CHECK_EQ_INT(nft_env_apply(n, &fast), 0);
        fast.n_links = 0;
        snprintf(cmd, sizeof(cmd),
                 "add element inet %s envs { \"pdkother\" : jump env_qqq1 }\n"
                 "add element inet %s envctr { \"pdkother\" : \"denied_qqq1\" }", table, table);
        CHECK_EQ_INT(nft_run_cmd_from_buffer(c, cmd), 0);
        nft_ctx_free(c);
        CHECK_EQ_INT(nft_env_apply(n, &fast), 0);
        CHECK_EQ_INT((int)nft_fast_changes(n), fast_n);
        CHECK(!table_has("chain", "env_qqq1"));
        CHECK_EQ_INT(elems("map", "envs"), 0);
        CHECK_EQ_INT(elems("set", "open_envs"), 2);
        CHECK_EQ_INT(elems("map", "envctr"), 2); /* pdktest1, pdktest2: pdkother's went */
        CHECK_EQ_INT(nft_env_remove_known(n, "qqq2", "pdktest2", NULL, 0), 0);
        CHECK_EQ_INT((int)nft_fast_changes(n), fast_n + 1);
        c = nft_ctx_new(NFT_CTX_DEFAULT);
        nft_ctx_buffer_error(c);
        snprintf(cmd, sizeof(cmd),
                 "add element inet %s envctr { \"pdkother\" : \"denied_qqq1\" }\n"
                 "add element inet %s open_envs { \"pdkother\" }", table, table);
        CHECK_EQ_INT(nft_run_cmd_from_buffer(c, cmd), 0);
        nft_ctx_free(c);
        CHECK_EQ_INT(nft_env_remove_known(n, "qqq1", "pdktest1", NULL, 0), 0);
        CHECK_EQ_INT((int)nft_fast_changes(n), fast_n + 1);
        CHECK(!table_has("counter", "denied_qqq1"));
        CHECK_EQ_INT(elems("map", "envctr"), 0);
        CHECK_EQ_INT(elems("set", "open_envs"), 0);
        nft_destroy_table(n);
        nft_close(n);
}

NETNS_TEST(test_nft_fast__same_as_libnftables)
{
        fast_same_as_text(NULL);
}

NETNS_TEST(test_nft_fast__same_as_libnftables_ipv6)
{
        struct in6_addr sub6 = A6("fd77:a4d::");
        fast_same_as_text(&sub6);
}

int main(void)
{
        if (geteuid() != 0) {
                UNIT_SKIP_ALL("needs root");
        }
        RUN(test_nft_open__idempotent_and_confined);
        RUN(test_nft_names__validation);
        RUN(test_nft_open_mode__behaviour);
        RUN(test_nft_allow_mode__behaviour);
        RUN(test_nft_ports__behaviour);
        RUN(test_nft_links__behaviour);
        RUN(test_nft_none_list_destroy);
        RUN(test_nft_ipv6__behaviour);
        RUN(test_nft_remove_known__falls_back);
        RUN(test_nft_ipv6_then_ipv4_only__removes_v6_sets);
        RUN(test_nft_batch__queues_then_applies);
        RUN(test_nft_batch__removal_runs_after_the_queue);
        RUN(test_nft_fast__same_as_libnftables);
        RUN(test_nft_fast__same_as_libnftables_ipv6);
        UNIT_EXIT();
}
