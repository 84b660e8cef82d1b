/* netlink / tc tests. Run as root.
 *
 * Every test runs in a child process that first unshares its network namespace: that is the
 * "host" of the test. Environments are further namespaces it makes (unshare, keep an fd, setns
 * back). Nothing touches the real host's interfaces, and everything disappears when the child
 * exits. Sockets are created inside a namespace by entering it for socket() only; a socket
 * stays in the namespace it was made in, so both ends of a connection live in one process.
 * No traffic leaves the test's namespaces. */
#include "lib/netlink.h"
#include "lib/netlink_internal.h"
#include "lib/util.h"
#include "unit.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static int host_ns = -1; /* in the test child: its own namespace */

/* ---------------------------------------------------------------- fixtures */

static void die(const char *what)
{
        fprintf(stderr, "  %s: %m\n", what);
        fflush(stderr);
        _exit(99);
}

static int current_ns(void)
{
        int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die("open ns");
        return fd;
}

static void enter(int ns)
{
        if (setns(ns, CLONE_NEWNET) < 0)
                die("setns");
}

/* A new, empty network namespace as an fd; the caller stays where it was. */
static int new_netns(void)
{
        int self = current_ns();
        if (unshare(CLONE_NEWNET) < 0)
                die("unshare");
        int fd = current_ns();
        enter(self);
        close(self);
        return fd;
}

/* Run body in a child with a network namespace of its own; its failures count here. */
static void in_fresh_netns(const char *name, void (*body)(void))
{
        if (geteuid() != 0) {
                SKIP("not root");
                return;
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                perror("fork");
                unit_failures++;
                return;
        }
        if (pid == 0) {
                if (unshare(CLONE_NEWNET) < 0)
                        die("unshare");
                unit_failures = 0; /* the parent's count so far is not ours */
                host_ns = current_ns();
                body();
                fflush(stdout);
                fflush(stderr);
                _exit(unit_failures > 98 ? 98 : unit_failures);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (WIFEXITED(status))
                unit_failures += WEXITSTATUS(status);
        else {
                fprintf(stderr, "  FAIL %s: child killed by signal %d\n", name, WTERMSIG(status));
                unit_failures++;
        }
}

/* Open fds of this process: the library must not leak any. */
static int fd_count(void)
{
        DIR *d = opendir("/proc/self/fd");
        if (!d)
                die("opendir");
        int n = 0;
        for (struct dirent *de; (de = readdir(d));)
                n += de->d_name[0] != '.';
        closedir(d);
        return n - 1; /* the directory's own */
}

/* Is the calling thread in the namespace of fd ns? (The library must always come back.) */
static bool in_ns(int ns)
{
        struct stat a, b;
        return fstat(ns, &a) == 0 && stat("/proc/thread-self/ns/net", &b) == 0 &&
               a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static struct in_addr ip(const char *s)
{
        struct in_addr a;
        if (inet_pton(AF_INET, s, &a) != 1)
                abort();
        return a;
}

static struct veth_config veth(const char *host, int env_ns, const char *addr)
{
        return (struct veth_config){
            .host_ifname = host,
            .env_ifname = "eth0",
            .env_netns_fd = env_ns,
            .gateway = ip("10.77.0.1"),
            .addr = ip(addr),
        };
}

/* ------------------------------------------------------------- inspection */

/* Does ifname in ns carry addr (NULL: any IPv4 address)? Is it up? */
static bool link_state(int ns, const char *ifname, const char *addr, bool *ret_up)
{
        enter(ns);
        struct ifaddrs *ifs;
        if (getifaddrs(&ifs) < 0)
                die("getifaddrs");
        enter(host_ns);
        bool found = false, up = false;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
                if (strcmp(i->ifa_name, ifname) != 0)
                        continue;
                up = i->ifa_flags & IFF_UP;
                if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
                        continue;
                const struct sockaddr_in *sin = (const struct sockaddr_in *)i->ifa_addr;
                if (!addr || sin->sin_addr.s_addr == ip(addr).s_addr)
                        found = true;
        }
        freeifaddrs(ifs);
        if (ret_up)
                *ret_up = up;
        return found;
}

static bool is_up(int ns, const char *ifname)
{
        bool up = false;
        link_state(ns, ifname, NULL, &up);
        return up;
}

static bool exists_in(int ns, const char *ifname)
{
        enter(ns);
        bool r = netlink_link_exists(ifname);
        enter(host_ns);
        return r;
}

/* A file's first line, read with the file opened inside ns; "(missing)" if absent. */
static const char *ns_file(int ns, const char *path)
{
        static char bufs[4][256];
        static int next;
        char *b = bufs[next++ % 4];
        enter(ns);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        enter(host_ns);
        if (fd < 0)
                return "(missing)";
        ssize_t n = read(fd, b, sizeof(bufs[0]) - 1);
        b[n > 0 ? n : 0] = 0;
        b[strcspn(b, "\n")] = 0;
        return b;
}

struct route_seen {
        struct in_addr dst, gw;
        int dst_len, oif, protocol, scope;
        bool found;
};

static int route_cb(const struct nlmsghdr *nlh, void *userdata)
{
        struct route_seen *want = userdata;
        const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
        if (nlh->nlmsg_type != RTM_NEWROUTE || rtm->rtm_table != RT_TABLE_MAIN ||
            rtm->rtm_dst_len != want->dst_len)
                return MNL_CB_OK;
        struct in_addr dst = {}, gw = {};
        int oif = 0;
        const struct nlattr *a;
        mnl_attr_for_each(a, nlh, sizeof(*rtm))
        {
                if (mnl_attr_get_type(a) == RTA_DST)
                        memcpy(&dst, mnl_attr_get_payload(a), 4);
                else if (mnl_attr_get_type(a) == RTA_GATEWAY)
                        memcpy(&gw, mnl_attr_get_payload(a), 4);
                else if (mnl_attr_get_type(a) == RTA_OIF)
                        oif = (int)mnl_attr_get_u32(a);
        }
        if (dst.s_addr == want->dst.s_addr && gw.s_addr == want->gw.s_addr && oif == want->oif &&
            rtm->rtm_protocol == want->protocol && rtm->rtm_scope == want->scope)
                want->found = true;
        return MNL_CB_OK;
}

/* Is there a main-table IPv4 route dst/len [via gw] dev ifname with this protocol and scope? */
static bool has_route(int ns, const char *ifname, const char *dst, int len, const char *gw,
                      int protocol, int scope)
{
        struct nl nl;
        if (nl_open_in_netns(ns, &nl) < 0)
                die("nl_open_in_netns");
        struct nl_link l;
        struct route_seen want = {.dst = ip(dst),
                                  .gw = ip(gw ? gw : "0.0.0.0"),
                                  .dst_len = len,
                                  .protocol = protocol,
                                  .scope = scope};
        if (nl_link_get(&nl, ifname, &l) == 0) {
                want.oif = l.ifindex;
                char buf[NL_SEND_SIZE];
                struct nlmsghdr *nlh = nl_request(&nl, buf, RTM_GETROUTE, NLM_F_DUMP);
                struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
                rtm->rtm_family = AF_INET;
                if (nl_talk(&nl, nlh, route_cb, &want) < 0)
                        die("route dump");
        }
        nl_close(&nl);
        return want.found;
}

static bool name_listed(char **names, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(names[i], name) == 0)
                        return true;
        return false;
}

static void free_names(char **names, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

static size_t count_prefix(const char *prefix)
{
        char **names;
        size_t n;
        if (netlink_links_with_prefix(prefix, &names, &n) < 0)
                die("links_with_prefix");
        free_names(names, n);
        return n;
}

/* ---------------------------------------------------------------- sockets */

static int tcp_socket_in(int ns, int family)
{
        enter(ns);
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        enter(host_ns);
        if (fd < 0)
                die("socket");
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        return fd;
}

/* addr: IPv4 or IPv6 text. */
static socklen_t sa_of(const char *addr, int port, struct sockaddr_storage *ss)
{
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t)port);
                return sizeof(*s6);
        }
        *(struct sockaddr_in *)ss = (struct sockaddr_in){
            .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = ip(addr)};
        return sizeof(struct sockaddr_in);
}

static int listen_in(int ns, const char *addr, int port)
{
        struct sockaddr_storage sa;
        socklen_t sl = sa_of(addr, port, &sa);
        int fd = tcp_socket_in(ns, sa.ss_family);
        if (bind(fd, (struct sockaddr *)&sa, sl) < 0 || listen(fd, 8) < 0)
                die("bind/listen");
        return fd;
}

/* -errno if the connection fails */
static int connect_from(int ns, const char *addr, int port)
{
        struct sockaddr_storage sa;
        socklen_t sl = sa_of(addr, port, &sa);
        int fd = tcp_socket_in(ns, sa.ss_family);
        if (connect(fd, (struct sockaddr *)&sa, sl) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* A TCP connection from client_ns to a listener on addr:port in server_ns, and one message
 * each way over it. */
static bool tcp_talks(int client_ns, int server_ns, const char *addr, int port)
{
        _cleanup_close_ int l = listen_in(server_ns, addr, port);
        _cleanup_close_ int c = connect_from(client_ns, addr, port);
        if (c < 0) {
                fprintf(stderr, "  connect %s:%d: %s\n", addr, port, strerror(-c));
                return false;
        }
        /* the kernel completed the handshake; accept just picks it up */
        _cleanup_close_ int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        char buf[8] = {};
        return s >= 0 && send(c, "ping", 4, MSG_NOSIGNAL) == 4 && recv(s, buf, 4, 0) == 4 &&
               strcmp(buf, "ping") == 0 && send(s, "pong", 4, MSG_NOSIGNAL) == 4 &&
               recv(c, buf, 4, 0) == 4 && strcmp(buf, "pong") == 0;
}

static double seconds_since(const struct timespec *t0)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Throughput in bit/s of one TCP stream from src_ns to addr:port in dst_ns: a forked sender
 * writes as fast as it can; the receiver counts what arrives in `secs` seconds from the first
 * byte. */
static double throughput(int src_ns, int dst_ns, const char *addr, int port, double secs)
{
        _cleanup_close_ int l = listen_in(dst_ns, addr, port);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                int c = connect_from(src_ns, addr, port);
                static char chunk[64 * 1024];
                memset(chunk, 'x', sizeof(chunk));
                while (c >= 0 &&
                       (send(c, chunk, sizeof(chunk), MSG_NOSIGNAL) > 0 || errno == EINTR))
                        ;
                _exit(0);
        }
        double bps = 0;
        _cleanup_close_ int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (s >= 0) {
                static char buf[256 * 1024];
                ssize_t n = recv(s, buf, sizeof(buf), 0);
                struct timespec t0;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                uint64_t total = 0;
                double t = 0;
                while (n > 0 && (t = seconds_since(&t0)) < secs) {
                        n = recv(s, buf, sizeof(buf), 0);
                        if (n > 0)
                                total += (uint64_t)n;
                }
                if (t > 0)
                        bps = (double)total * 8 / t;
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return bps;
}

/* ------------------------------------------------------------------- tests */

static void body_veth_create(void)
{
        int env = new_netns();
        int fds = fd_count();
        struct veth_config c = veth("pdkt0", env, "10.77.0.2");
        CHECK_EQ_INT(netlink_veth_create(&c), 0);
        CHECK(in_ns(host_ns));
        CHECK_EQ_INT(fd_count(), fds);

        /* host side */
        bool up = false;
        CHECK(netlink_link_exists("pdkt0"));
        CHECK(!netlink_link_exists("eth0"));
        CHECK(link_state(host_ns, "pdkt0", "10.77.0.1", &up));
        CHECK(up);
        CHECK(has_route(host_ns, "pdkt0", "10.77.0.2", 32, NULL, RTPROT_STATIC, RT_SCOPE_LINK));

        /* environment side */
        CHECK(exists_in(env, "eth0"));
        CHECK(!exists_in(env, "pdkt0"));
        CHECK(link_state(env, "eth0", "10.77.0.2", &up));
        CHECK(up);
        CHECK(is_up(env, "lo"));
        CHECK(has_route(env, "eth0", "10.77.0.1", 32, NULL, RTPROT_STATIC, RT_SCOPE_LINK));
        CHECK(has_route(env, "eth0", "0.0.0.0", 0, "10.77.0.1", RTPROT_STATIC, RT_SCOPE_UNIVERSE));

        /* IPv6 off in the environment, and only there */
        CHECK_EQ_STR(ns_file(env, "/proc/sys/net/ipv6/conf/all/disable_ipv6"), "1");
        CHECK_EQ_STR(ns_file(env, "/proc/sys/net/ipv6/conf/default/disable_ipv6"), "1");
        CHECK_EQ_STR(ns_file(env, "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"), "1");
        CHECK_EQ_STR(ns_file(env, "/proc/thread-self/net/if_inet6"), "");
        CHECK_EQ_STR(ns_file(host_ns, "/proc/sys/net/ipv6/conf/all/disable_ipv6"), "0");
        CHECK_EQ_STR(ns_file(host_ns, "/proc/sys/net/ipv6/conf/pdkt0/disable_ipv6"), "0");

        /* real traffic both ways, and loopback inside the environment */
        CHECK(tcp_talks(host_ns, env, "10.77.0.2", 7001));
        CHECK(tcp_talks(env, host_ns, "10.77.0.1", 7002));
        CHECK(tcp_talks(env, env, "127.0.0.1", 7003));

        char **names;
        size_t n;
        CHECK_EQ_INT(netlink_links_with_prefix("pdkt", &names, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1) {
                CHECK_EQ_STR(names[0], "pdkt0");
                CHECK(names[1] == NULL);
        }
        free_names(names, n);

        CHECK_EQ_INT(netlink_link_delete("pdkt0"), 0);
        CHECK(!netlink_link_exists("pdkt0"));
        CHECK(!exists_in(env, "eth0"));
        CHECK(!has_route(host_ns, "pdkt0", "10.77.0.2", 32, NULL, RTPROT_STATIC, RT_SCOPE_LINK));
        CHECK_EQ_INT(netlink_link_delete("pdkt0"), -ENODEV);
        CHECK_EQ_INT(fd_count(), fds);
        close(env);
}

static void test_netlink_veth__create_connect_delete(void)
{
        in_fresh_netns(__func__, body_veth_create);
}

/* The whole of a /proc file of ns (up to 4 KiB). */
static const char *ns_file_all(int ns, const char *path)
{
        static char b[4096];
        enter(ns);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        enter(host_ns);
        if (fd < 0)
                return "(missing)";
        ssize_t n = read(fd, b, sizeof(b) - 1);
        b[n > 0 ? n : 0] = 0;
        return b;
}

/* With IPv6: the environment's /128 (no DAD), no generated link-local, a default route via
 * fe80::1 on the host side, and TCP both ways over v6. */
static void body_veth_ipv6(void)
{
        CHECK_EQ_INT(write_file_at(AT_FDCWD, "/proc/sys/net/ipv6/conf/all/forwarding", "1"), 0);
        int env = new_netns();
        struct veth_config c = veth("pdkt6", env, "10.77.0.2");
        c.ipv6 = true;
        CHECK_EQ_INT(inet_pton(AF_INET6, "fd77:a4d::2", &c.addr6), 1);
        CHECK_EQ_INT(netlink_veth_create(&c), 0);

        CHECK_EQ_STR(ns_file(env, "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"), "0");
        CHECK_EQ_STR(ns_file(env, "/proc/sys/net/ipv6/conf/eth0/accept_ra"), "0");
        CHECK_EQ_STR(ns_file(env, "/proc/sys/net/ipv6/conf/eth0/addr_gen_mode"), "1");
        CHECK_EQ_STR(ns_file(host_ns, "/proc/sys/net/ipv6/conf/pdkt6/addr_gen_mode"), "1");
        CHECK_EQ_STR(ns_file(host_ns, "/proc/sys/net/ipv6/conf/pdkt6/accept_ra"), "0");
        /* if_inet6: address, ifindex, prefix length, scope, flags (0x80 permanent, 0x02 nodad;
         * no 0x40 tentative), name */
        const char *a6 = ns_file_all(env, "/proc/thread-self/net/if_inet6");
        CHECK(strstr(a6, "fd770a4d000000000000000000000002") != NULL);
        CHECK(strstr(a6, "fe80") == NULL); /* no link-local of its own */
        const char *line = strstr(a6, "fd770a4d000000000000000000000002");
        if (line) {
                unsigned idx, plen, scope, flags;
                CHECK_EQ_INT(sscanf(line + 33, "%x %x %x %x", &idx, &plen, &scope, &flags), 4);
                CHECK_EQ_INT(plen, 128);
                CHECK(!(flags & 0x40));
        }
        const char *h6 = ns_file_all(host_ns, "/proc/thread-self/net/if_inet6");
        CHECK(strstr(h6, "fe800000000000000000000000000001") != NULL);
        /* ipv6_route: "dst plen src plen gateway metric refcnt use flags dev" */
        const char *r6 = ns_file_all(env, "/proc/thread-self/net/ipv6_route");
        CHECK(strstr(r6, "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
                         "fe800000000000000000000000000001") != NULL);
        const char *hr6 = ns_file_all(host_ns, "/proc/thread-self/net/ipv6_route");
        CHECK(strstr(hr6, "fd770a4d000000000000000000000002 80") != NULL);
        /* no fe80::/64 route through the veth: the gateway's address has none of its own */
        bool ll_route = false;
        for (const char *l = hr6; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                const char *eol = strchr(l, '\n');
                size_t n = eol ? (size_t)(eol - l) : strlen(l);
                if (strncmp(l, "fe800000000000000000000000000000 40", 35) == 0 && n > 5 &&
                    memcmp(l + n - 5, "pdkt6", 5) == 0)
                        ll_route = true;
        }
        CHECK(!ll_route);

        CHECK(tcp_talks(host_ns, env, "fd77:a4d::2", 7011));
        CHECK(tcp_talks(env, env, "::1", 7012));

        /* The routes go, the link stays (the kernel deletes it with the namespace). */
        CHECK_EQ_INT(netlink_env_routes_delete("pdkt6", c.addr, &c.addr6), 0);
        hr6 = ns_file_all(host_ns, "/proc/thread-self/net/ipv6_route");
        CHECK(strstr(hr6, "fd770a4d000000000000000000000002 80") == NULL);
        CHECK(!has_route(host_ns, "pdkt6", "10.77.0.2", 32, NULL, RTPROT_STATIC, RT_SCOPE_LINK));
        CHECK(netlink_link_exists("pdkt6"));
        CHECK_EQ_INT(netlink_env_routes_delete("nosuch0", c.addr, &c.addr6), -ENODEV);
        close(env);
        /* The last reference to the namespace is gone: the kernel removes the pair. */
        for (int i = 0; i < 200 && netlink_link_exists("pdkt6"); i++)
                usleep(10 * 1000);
        CHECK(!netlink_link_exists("pdkt6"));
}

static void test_netlink_veth__ipv6(void)
{
        in_fresh_netns(__func__, body_veth_ipv6);
}


/* Several environments share the gateway address; each keeps working when another goes. */
static void body_veth_two(void)
{
        int env1 = new_netns(), env2 = new_netns();
        struct veth_config c1 = veth("pdkt1", env1, "10.77.0.2");
        struct veth_config c2 = veth("pdkt2", env2, "10.77.0.3");
        CHECK_EQ_INT(netlink_veth_create(&c1), 0);
        CHECK_EQ_INT(netlink_veth_create(&c2), 0);
        CHECK(tcp_talks(host_ns, env1, "10.77.0.2", 7001));
        CHECK(tcp_talks(host_ns, env2, "10.77.0.3", 7001));
        CHECK(tcp_talks(env2, host_ns, "10.77.0.1", 7002));
        CHECK_EQ_INT(count_prefix("pdkt"), 2);
        CHECK_EQ_INT(netlink_link_delete("pdkt1"), 0);
        CHECK(tcp_talks(host_ns, env2, "10.77.0.3", 7003));
        CHECK(tcp_talks(env2, host_ns, "10.77.0.1", 7004));
        CHECK_EQ_INT(count_prefix("pdkt"), 1);
        close(env1);
        close(env2);
}

static void test_netlink_veth__shared_gateway(void)
{
        in_fresh_netns(__func__, body_veth_two);
}

static void body_veth_failures(void)
{
        int env1 = new_netns(), env2 = new_netns();
        struct veth_config c = veth("pdkd0", env1, "10.77.0.2");
        CHECK_EQ_INT(netlink_veth_create(&c), 0);

        /* host name taken: nothing new on either side, the existing link untouched */
        c = veth("pdkd0", env2, "10.77.0.3");
        CHECK_EQ_INT(netlink_veth_create(&c), -EEXIST);
        CHECK(!exists_in(env2, "eth0"));
        CHECK_EQ_INT(count_prefix("pdkd"), 1);
        CHECK(has_route(host_ns, "pdkd0", "10.77.0.2", 32, NULL, RTPROT_STATIC, RT_SCOPE_LINK));
        CHECK(!has_route(host_ns, "pdkd0", "10.77.0.3", 32, NULL, RTPROT_STATIC, RT_SCOPE_LINK));

        /* environment already has an eth0 */
        c = veth("pdkd1", env1, "10.77.0.3");
        CHECK_EQ_INT(netlink_veth_create(&c), -EEXIST);
        CHECK(!netlink_link_exists("pdkd1"));
        CHECK_EQ_INT(count_prefix("pdkd"), 1);

        /* address already routed to another environment: fails after the link was made, so
         * this exercises the rollback */
        c = veth("pdkd2", env2, "10.77.0.2");
        CHECK_EQ_INT(netlink_veth_create(&c), -EEXIST);
        CHECK(!netlink_link_exists("pdkd2"));
        CHECK(!exists_in(env2, "eth0"));
        CHECK_EQ_INT(count_prefix("pdkd"), 1);
        CHECK(tcp_talks(host_ns, env1, "10.77.0.2", 7001));

        /* not a namespace fd: setns fails, we are still at home, nothing made */
        _cleanup_close_ int not_ns = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int fds = fd_count();
        c = veth("pdkd3", not_ns, "10.77.0.3");
        CHECK_EQ_INT(netlink_veth_create(&c), -EINVAL);
        CHECK(in_ns(host_ns));
        CHECK(!netlink_link_exists("pdkd3"));
        CHECK_EQ_INT(fd_count(), fds);

        /* arguments */
        c = veth("pdk-name-too-long", env2, "10.77.0.3");
        CHECK_EQ_INT(netlink_veth_create(&c), -EINVAL);
        c = veth("pdkd3", -1, "10.77.0.3");
        CHECK_EQ_INT(netlink_veth_create(&c), -EINVAL);
        c = veth("pdkd3", env2, "10.77.0.1");
        CHECK_EQ_INT(netlink_veth_create(&c), -EINVAL);
        c = veth("pdkd3", env2, "10.77.0.3");
        c.mtu = 1u << 20; /* beyond any veth maximum: the kernel says no */
        CHECK(netlink_veth_create(&c) < 0);
        CHECK(!netlink_link_exists("pdkd3"));
        CHECK(!exists_in(env2, "eth0"));
        CHECK(in_ns(host_ns));
        CHECK_EQ_INT(fd_count(), fds);
        CHECK_EQ_INT(netlink_link_delete("pdkd9"), -ENODEV);
        CHECK(!netlink_link_exists(""));
        CHECK(!netlink_link_exists("this-name-is-too-long"));

        /* a second environment after all that still works */
        c = veth("pdkd3", env2, "10.77.0.3");
        c.mtu = 9000;
        CHECK_EQ_INT(netlink_veth_create(&c), 0);
        CHECK(tcp_talks(env2, host_ns, "10.77.0.1", 7002));
        close(env1);
        close(env2);
}

static void test_netlink_veth__failures_leave_nothing(void)
{
        in_fresh_netns(__func__, body_veth_failures);
}

static void body_loopback(void)
{
        int env = new_netns();
        CHECK(!is_up(env, "lo"));
        CHECK_EQ_INT(netlink_loopback_up(env), 0);
        CHECK(is_up(env, "lo"));
        CHECK(tcp_talks(env, env, "127.0.0.1", 7001));
        CHECK(!is_up(host_ns, "lo"));
        CHECK_EQ_INT(netlink_loopback_up(-1), 0);
        CHECK(is_up(host_ns, "lo"));
        CHECK_EQ_INT(netlink_loopback_up(env), 0); /* again: no error */
        close(env);
}

static void test_netlink_loopback__up(void)
{
        in_fresh_netns(__func__, body_loopback);
}

static void body_prefix(void)
{
        int env[3];
        const char *names[] = {"pdka0", "pdka1", "pdkb0"};
        const char *addrs[] = {"10.77.0.2", "10.77.0.3", "10.77.0.4"};
        for (int i = 0; i < 3; i++) {
                env[i] = new_netns();
                struct veth_config c = veth(names[i], env[i], addrs[i]);
                CHECK_EQ_INT(netlink_veth_create(&c), 0);
        }
        char **list;
        size_t n;
        CHECK_EQ_INT(netlink_links_with_prefix("pdka", &list, &n), 0);
        CHECK_EQ_INT(n, 2);
        CHECK(name_listed(list, n, "pdka0") && name_listed(list, n, "pdka1"));
        free_names(list, n);
        CHECK_EQ_INT(netlink_links_with_prefix("pdk", &list, &n), 0);
        CHECK_EQ_INT(n, 3);
        free_names(list, n);
        CHECK_EQ_INT(netlink_links_with_prefix("zzz", &list, &n), 0);
        CHECK_EQ_INT(n, 0);
        CHECK(list && list[0] == NULL);
        free_names(list, n);
        CHECK_EQ_INT(netlink_links_with_prefix("", &list, &n), 0);
        CHECK_EQ_INT(n, 4); /* lo too */
        free_names(list, n);
        for (int i = 0; i < 3; i++)
                close(env[i]);
}

static void test_netlink_links__with_prefix(void)
{
        in_fresh_netns(__func__, body_prefix);
}

/* The arithmetic alone: bucket and queue sizes, and the 64-bit rate above 4 GiB/s. */
static void test_tc_tbf__params(void)
{
        struct tc_tbf_params p;
        tc_tbf_params(20000000, 1500, &p);
        CHECK_EQ_INT(p.rate, 2500000);
        CHECK_EQ_INT(p.burst, 25000);          /* 10 ms */
        CHECK(p.burst >= p.rate / 1000);       /* >= rate/HZ for any HZ up to 1000 */
        CHECK_EQ_INT(p.limit, 25000 + 125000); /* bucket + 50 ms */
        tc_tbf_params(1000000, 1500, &p);
        CHECK_EQ_INT(p.rate, 125000);
        CHECK_EQ_INT(p.burst, 2 * 1514);      /* two frames beat 10 ms */
        CHECK_EQ_INT(p.limit, TBF_MIN_LIMIT); /* 3028 + 6250 < floor */
        tc_tbf_params(1000000, 9000, &p);
        CHECK_EQ_INT(p.burst, 2 * 9014);
        tc_tbf_params(1000000000, 0, &p);
        CHECK_EQ_INT(p.rate, 125000000);
        CHECK_EQ_INT(p.burst, 1250000);
        CHECK_EQ_INT(p.limit, 1250000 + 6250000);
        tc_tbf_params(100000000000ull, 1500, &p); /* 100 Gbit/s: 12.5 GB/s */
        CHECK_EQ_INT(p.rate, 12500000000ull);
        CHECK(p.rate > UINT32_MAX);
        CHECK_EQ_INT(p.burst, 125000000);
        CHECK_EQ_INT(p.limit, 125000000 + 625000000);
        tc_tbf_params(1000000000000ull, 1500, &p); /* 1 Tbit/s: capped */
        CHECK_EQ_INT(p.burst, TBF_MAX_BYTES);
        CHECK_EQ_INT(p.limit, TBF_MAX_BYTES);
        tc_tbf_params(1, 1500, &p);
        CHECK_EQ_INT(p.rate, 1);
}

/* The cap is what users rely on, so a flow may exceed it by 15% at most (bucket and
 * measurement slack); below it the flow needs only 60%, because on a busy 2-core CI machine
 * (or under ASan) the sender itself can fall short of the limit. Unshaped, the same
 * veth carries over 500 mbit/s, so a missing shaper still fails loudly. */
static bool shaped(double measured_mbit, double limit_mbit)
{
        return measured_mbit <= limit_mbit * 1.15 && measured_mbit >= limit_mbit * 0.6;
}

/* host→env and env→host throughput with both limits at mbit (0: unlimited) */
static void measure(int env, int port, double mbit)
{
        double secs = getenv("PADDOCK_TC_SECS") ? strtod(getenv("PADDOCK_TC_SECS"), NULL) : 2.0;
        double down = throughput(host_ns, env, "10.77.0.2", port, secs);
        double up = throughput(env, host_ns, "10.77.0.1", port + 1, secs);
        if (mbit > 0)
                printf("    limit %g mbit/s: to env %.1f mbit/s, from env %.1f mbit/s\n", mbit,
                       down / 1e6, up / 1e6);
        else
                printf("    unlimited: to env %.1f mbit/s, from env %.1f mbit/s\n", down / 1e6,
                       up / 1e6);
        if (mbit > 0) {
                CHECK(shaped(down / 1e6, mbit));
                CHECK(shaped(up / 1e6, mbit));
        } else {
                CHECK(down > 500e6);
                CHECK(up > 500e6);
        }
}

static void body_bandwidth(void)
{
        int env = new_netns();
        struct veth_config c = veth("pdkbw0", env, "10.77.0.2");
        CHECK_EQ_INT(netlink_veth_create(&c), 0);

        int fds = fd_count();
        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 20000000, 20000000), 0);
        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 20000000, 20000000), 0); /* idempotent */
        CHECK_EQ_INT(fd_count(), fds);
        CHECK(netlink_link_exists("pdkbw0i"));
        CHECK(is_up(host_ns, "pdkbw0i"));
        measure(env, 7100, 20);

        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 50000000, 50000000), 0);
        measure(env, 7200, 50);

        /* one direction only */
        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 0, 20000000), 0);
        CHECK(!netlink_link_exists("pdkbw0i"));
        double down = throughput(host_ns, env, "10.77.0.2", 7300, 2.0);
        double up = throughput(env, host_ns, "10.77.0.1", 7301, 2.0);
        printf("    ingress only 20: to env %.1f mbit/s, from env %.1f mbit/s\n", down / 1e6,
               up / 1e6);
        CHECK(shaped(down / 1e6, 20));
        CHECK(up > 500e6);

        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 0, 0), 0);
        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 0, 0), 0); /* nothing left to remove: fine */
        CHECK(!netlink_link_exists("pdkbw0i"));
        measure(env, 7400, 0);

        /* very high rates go through the 64-bit attribute */
        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 100000000000ull, 40000000000ull), 0);
        CHECK(tcp_talks(host_ns, env, "10.77.0.2", 7500));
        CHECK(tcp_talks(env, host_ns, "10.77.0.1", 7501));

        /* deleting the veth takes its ifb along */
        CHECK(netlink_link_exists("pdkbw0i"));
        CHECK_EQ_INT(netlink_link_delete("pdkbw0"), 0);
        CHECK(!netlink_link_exists("pdkbw0i"));
        CHECK_EQ_INT(count_prefix("pdkbw"), 0);

        CHECK_EQ_INT(tc_set_bandwidth("pdkbw0", 1000000, 1000000), -ENODEV);
        CHECK_EQ_INT(tc_set_bandwidth("pdk-too-long-nm", 1000000, 1000000), -ENAMETOOLONG);
        close(env);
}

static void test_tc_bandwidth__shaping(void)
{
        in_fresh_netns(__func__, body_bandwidth);
}

/* PADDOCK_TC_SWEEP=1 (or a list of mbit/s, "1,5,100"): more rates, same bounds (slow). */
static void body_sweep(void)
{
        int env = new_netns();
        struct veth_config c = veth("pdksw0", env, "10.77.0.2");
        CHECK_EQ_INT(netlink_veth_create(&c), 0);
        const char *list = getenv("PADDOCK_TC_SWEEP");
        if (strcmp(list, "1") == 0)
                list = "1,2,5,10,100,200";
        int port = 7600;
        for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',') {
                double mbit = strtod(p, NULL);
                if (mbit <= 0)
                        continue;
                CHECK_EQ_INT(
                    tc_set_bandwidth("pdksw0", (uint64_t)(mbit * 1e6), (uint64_t)(mbit * 1e6)), 0);
                measure(env, port, mbit);
                port += 2;
        }
        close(env);
}

static void test_tc_bandwidth__sweep(void)
{
        if (!getenv("PADDOCK_TC_SWEEP")) {
                SKIP("PADDOCK_TC_SWEEP not set (a long measurement run on demand)");
                return;
        }
        in_fresh_netns(__func__, body_sweep);
}

int main(void)
{
        RUN(test_tc_tbf__params);
        RUN(test_netlink_veth__create_connect_delete);
        RUN(test_netlink_veth__ipv6);
        RUN(test_netlink_veth__shared_gateway);
        RUN(test_netlink_veth__failures_leave_nothing);
        RUN(test_netlink_loopback__up);
        RUN(test_netlink_links__with_prefix);
        RUN(test_tc_bandwidth__shaping);
        RUN(test_tc_bandwidth__sweep);
        UNIT_EXIT();
}
