/* paddockd: the Paddock daemon. One process, one thread, one epoll loop (and a small process
 * that only waits for fdatasync: syncer.c). */
#include "daemon/api.h"
#include "daemon/audit.h"
#include "daemon/engine.h"
#include "daemon/spawner.h"
#include "daemon/syncer.h"
#include "daemon/events.h"
#include "daemon/gateway.h"
#include "daemon/ingress.h"
#include "daemon/http.h"
#include "daemon/log.h"
#include "daemon/exec.h"
#include "daemon/sdnotify.h"
#include "daemon/sdscope.h"
#include "daemon/tokens.h"
#include "daemon/lxcfs.h"
#include "daemon/loop.h"
#include "daemon/network.h"
#include "daemon/procs.h"
#include "daemon/tlscert.h"
#include "lib/confine.h"
#include "lib/paddock.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>


struct options {
        const char *root;
        const char *socket;
        const char *init;
        const char *uid_registry;
        const char *subnet;
        const char *subnet6; /* NULL: derived from subnet */
        const char *resolv_conf;
        const char *default_image;
        const char *storage;
        const char *apt_dir;
        uint64_t pool_bytes;
        uint64_t image_max_bytes;
        bool no_network;
        bool debug;
        uint64_t audit_max_size;
        unsigned audit_keep;
        /* The network gateway (gateway.h): --listen, --listen-plain, --tls-cert/--tls-key,
         * --gateway-user. */
        struct gateway_listen listen[GATEWAY_MAX_LISTEN];
        size_t n_listen;
        const char *tls_cert, *tls_key;
        const char *gateway_user;
        const char *domain; /* --domain: preview URLs (gateway_domain) */
};

static void usage(FILE *f)
{
        fprintf(f, "Usage: paddockd [--root DIR] [--socket PATH] [--init PATH] [--uid-registry DIR]\n"
                   "                [--debug] [--version] [--routes]\n"
                   "  --root DIR          state directory (env PADDOCK_ROOT, default /var/lib/paddock)\n"
                   "  --socket PATH       API socket (env PADDOCK_SOCKET, default "
                   PADDOCK_DEFAULT_SOCKET ")\n"
                   "  --init PATH         paddock-init binary (default: next to paddockd)\n"
                   "  --uid-registry DIR  host-wide id range claims (default /var/lib/paddock-uids)\n"
                   "  --subnet CIDR       environments' addresses (default 10.77.0.0/16)\n"
                   "  --subnet6 CIDR|none environments' IPv6 addresses (default fd77:A:B::/64, A:B\n"
                   "                      = the v4 subnet's address in hex; none: IPv4 only)\n"
                   "  --resolv-conf PATH  upstream DNS servers (default /etc/resolv.conf)\n"
                   "  --no-network        loopback only for every environment\n"
                   "  --default-image NAME  image of environments created without one "
                   "(default \"default\")\n"
                   "  --storage DRIVER    btrfs (default) or dir; fixed when DIR is first used\n"
                   "  --pool-size SIZE    size of a new btrfs pool file (default: 16G, at most\n"
                   "                      half the host filesystem)\n"
                   "  --max-image-size SIZE  disk one image may use (btrfs; default: half the pool)\n"
                   "  --allow-registry HOST[:PORT]  pulls may reach HOST at any address, private and\n"
                   "                      loopback ones included (default: public addresses only;\n"
                   "                      repeatable; no PORT: every port)\n"
                   "  --insecure-registry HOST[:PORT]  the same, and plain http to HOST allowed\n"
                   "  --apt-config DIR    the apt configuration image builds take their default\n"
                   "                      mirror and proxy from (default /etc/apt)\n"
                   "  --audit-max-size SIZE  size of one audit log file before it rotates "
                   "(default 16M)\n"
                   "  --audit-keep N      audit log files kept, the current one included "
                   "(default 5)\n"
                   "  --listen ADDR:PORT  serve the API over TLS on the network through the\n"
                   "                      unprivileged gateway (repeatable; 0.0.0.0:8443, [::]:8443)\n"
                   "  --listen-plain ADDR:PORT  the same without TLS, loopback addresses only\n"
                   "  --tls-cert FILE --tls-key FILE  the listener's certificate and key (PEM;\n"
                   "                      default: self-signed, made once in ROOT/tls)\n"
                   "  --gateway-user USER|UID  the gateway's user (default: paddock-gateway if it\n"
                   "                      exists, else uid/gid 2147483632)\n"
                   "  --domain DOMAIN     preview URLs: PORT-NAME.DOMAIN on the listener reaches\n"
                   "                      PORT of environment NAME (DNS: *.DOMAIN to this host)\n");
}

static int parse_options(int argc, char **argv, struct options *o)
{
        static const struct option longopts[] = {
                {"root", required_argument, NULL, 'r'},    {"socket", required_argument, NULL, 's'},
                {"init", required_argument, NULL, 'i'},    {"uid-registry", required_argument, NULL, 'u'},
                {"debug", no_argument, NULL, 'd'},         {"version", no_argument, NULL, 'V'},
                {"subnet", required_argument, NULL, 'n'},  {"resolv-conf", required_argument, NULL, 'R'},
                {"no-network", no_argument, NULL, 'N'},    {"subnet6", required_argument, NULL, '6'},
                {"default-image", required_argument, NULL, 'I'},
                {"storage", required_argument, NULL, 'S'}, {"pool-size", required_argument, NULL, 'P'},
                {"max-image-size", required_argument, NULL, 'M'},
                {"help", no_argument, NULL, 'h'},          {"routes", no_argument, NULL, 'L'},
                {"allow-registry", required_argument, NULL, 'a'},
                {"insecure-registry", required_argument, NULL, 'k'},
                {"apt-config", required_argument, NULL, 'A'},
                {"audit-max-size", required_argument, NULL, 0x100},
                {"audit-keep", required_argument, NULL, 0x101},
                {"listen", required_argument, NULL, 'l'},
                {"listen-plain", required_argument, NULL, 'p'},
                {"tls-cert", required_argument, NULL, 'c'},
                {"tls-key", required_argument, NULL, 'K'},
                {"gateway-user", required_argument, NULL, 'g'},
                {"domain", required_argument, NULL, 0x102},
                {0},
        };
        o->root = getenv("PADDOCK_ROOT") ? getenv("PADDOCK_ROOT") : "/var/lib/paddock";
        o->socket = getenv("PADDOCK_SOCKET") ? getenv("PADDOCK_SOCKET") : PADDOCK_DEFAULT_SOCKET;
        o->subnet = "10.77.0.0/16";
        o->resolv_conf = "/etc/resolv.conf";
        o->uid_registry = getenv("PADDOCK_UID_REGISTRY") ? getenv("PADDOCK_UID_REGISTRY")
                                                         : "/var/lib/paddock-uids";
        int c;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'r': o->root = optarg; break;
                case 's': o->socket = optarg; break;
                case 'i': o->init = optarg; break;
                case 'u': o->uid_registry = optarg; break;
                case 'd': o->debug = true; break;
                case 'n': o->subnet = optarg; break;
                case '6': o->subnet6 = optarg; break;
                case 'R': o->resolv_conf = optarg; break;
                case 'N': o->no_network = true; break;
                case 'I': o->default_image = optarg; break;
                case 'S': o->storage = optarg; break;
                case 'A': o->apt_dir = optarg; break;
                case 'M':
                        if (parse_size(optarg, &o->image_max_bytes) < 0 || !o->image_max_bytes) {
                                fprintf(stderr, "paddockd: --max-image-size: invalid size %s\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case 'P':
                        if (parse_size(optarg, &o->pool_bytes) < 0) {
                                fprintf(stderr, "paddockd: --pool-size: invalid size %s\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case 'a':
                case 'k': {
                        int k = engine_allow_registry(optarg, c == 'k');
                        if (k < 0) {
                                fprintf(stderr, "paddockd: --%s: %s\n",
                                        c == 'k' ? "insecure-registry" : "allow-registry",
                                        k == -E2BIG     ? "too many registries"
                                        : k == -ELIBACC ? "libcurl cannot be loaded"
                                                        : "use HOST[:PORT], like registry.lan:5000");
                                return -EINVAL;
                        }
                        break;
                }
                case 0x100:
                        if (parse_size(optarg, &o->audit_max_size) < 0 || o->audit_max_size < 1024) {
                                fprintf(stderr, "paddockd: --audit-max-size: invalid size %s "
                                                "(at least 1K)\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case 0x101: {
                        char *end;
                        unsigned long k = strtoul(optarg, &end, 10);
                        if (*end || end == optarg || k < 1 || k > AUDIT_MAX_KEEP) {
                                fprintf(stderr, "paddockd: --audit-keep: a number from 1 to %d\n",
                                        AUDIT_MAX_KEEP);
                                return -EINVAL;
                        }
                        o->audit_keep = (unsigned)k;
                        break;
                }
                case 'l':
                case 'p': {
                        char err[256];
                        if (o->n_listen == GATEWAY_MAX_LISTEN) {
                                fprintf(stderr, "paddockd: at most %d listen addresses\n",
                                        GATEWAY_MAX_LISTEN);
                                return -EINVAL;
                        }
                        if (gateway_parse_listen(optarg, c == 'l', &o->listen[o->n_listen], err,
                                                 sizeof(err)) < 0) {
                                fprintf(stderr, "paddockd: --%s %s\n",
                                        c == 'l' ? "listen" : "listen-plain", err);
                                return -EINVAL;
                        }
                        o->n_listen++;
                        break;
                }
                case 'c': o->tls_cert = optarg; break;
                case 'K': o->tls_key = optarg; break;
                case 'g': o->gateway_user = optarg; break;
                case 0x102:
                        if (gateway_set_domain(optarg) < 0) {
                                fprintf(stderr, "paddockd: --domain %s: not a DNS name\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case 'V': printf("paddockd %s\n", PADDOCK_VERSION); exit(0);
                case 'h': usage(stdout); exit(0);
                case 'L': /* the API's routes, one "METHOD PATTERN" a line (docs/API.md lists them) */
                        for (size_t i = 0; i < api_routes_count(); i++)
                                printf("%s %s\n", api_route_at(i)->method, api_route_at(i)->pattern);
                        exit(0);
                default: usage(stderr); return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "paddockd: unexpected argument: %s\n", argv[optind]);
                return -EINVAL;
        }
        if (!o->tls_cert != !o->tls_key) {
                fprintf(stderr, "paddockd: --tls-cert and --tls-key go together\n");
                return -EINVAL;
        }
        if ((o->tls_cert || o->gateway_user) && !o->n_listen) {
                fprintf(stderr, "paddockd: --tls-cert, --tls-key and --gateway-user need --listen\n");
                return -EINVAL;
        }
        return 0;
}

/* The state directory goes into overlay mount options: keep it a plain absolute path. */
static int prepare_root(const char *root, char *ret, size_t len)
{
        int r = mkdir_p_at(AT_FDCWD, root, 0700);
        if (r < 0)
                return r;
        if (!realpath(root, ret))
                return -errno;
        if (strlen(ret) > len / 2 || strpbrk(ret, ",:\\\n\t"))
                return -EINVAL;
        static const char *const subs[] = {"tmp"}; /* envs and images: the storage driver */
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                char p[4200];
                if ((r = BUF_PRINTF(p, "%s/%s", ret, subs[i])) < 0)
                        return r;
                if (mkdir(p, 0700) < 0 && errno != EEXIST)
                        return -errno;
        }
        return 0;
}

static int lock_root(const char *root)
{
        char p[4200];
        int r = BUF_PRINTF(p, "%s/paddockd.lock", root);
        if (r < 0)
                return r;
        int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                r = -errno;
                close(fd);
                return r == -EWOULDBLOCK ? -EBUSY : r;
        }
        return fd; /* held for the daemon's lifetime */
}

static int open_socket(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        char dir[sizeof(sa.sun_path)];
        memcpy(dir, path, strlen(path) + 1); /* fits: checked against sun_path above */
        mkdir_p_at(AT_FDCWD, dirname(dir), 0755);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode)) {
                        close(fd);
                        return -EEXIST;
                }
                /* A live daemon answers; a stale socket file from a crash does not. */
                int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                bool live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
                if (probe >= 0)
                        close(probe);
                if (live) {
                        close(fd);
                        return -EADDRINUSE;
                }
                unlink(path);
        }
        mode_t old = umask(0117);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(fd, 128) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        struct group *g = getgrnam("paddock");
        if (g)
                (void)!chown(path, 0, g->gr_gid);
        chmod(path, 0660);
        return fd;
}

/* A helper program of paddockd's: next to it (build/), in ../lib/paddock beside its directory
 * (an installed PREFIX/sbin/paddockd, scripts/install.sh), else /usr/lib/paddock. */
static const char *helper_path(const char *selfdir, const char *name, char *buf, size_t size)
{
        if (buf_printf(buf, size, "%s/%s", selfdir, name) >= 0 && access(buf, X_OK) == 0)
                return buf;
        if (buf_printf(buf, size, "%s/../lib/paddock/%s", selfdir, name) >= 0 &&
            access(buf, X_OK) == 0)
                return buf;
        return buf_printf(buf, size, "/usr/lib/paddock/%s", name) >= 0 ? buf : "";
}

static int open_init(const char *given)
{
        char path[4096];
        const char *init = given;
        if (!init) {
                char self[4096];
                ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
                if (n < 0)
                        return -errno;
                self[n] = 0;
                init = helper_path(dirname(self), "paddock-init", path, sizeof(path));
        }
        int fd = open(init, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fd;
}

/* "ADDR/PREFIX": ADDR into buf, the prefix length as written (not yet range-checked). */
static int split_cidr(const char *s, char *buf, size_t size, unsigned long *ret_prefix)
{
        const char *slash = strchr(s, '/');
        if (!slash || (size_t)(slash - s) >= size || slash[1] == 0)
                return -EINVAL;
        memcpy(buf, s, (size_t)(slash - s));
        buf[slash - s] = 0;
        char *end;
        unsigned long p = strtoul(slash + 1, &end, 10);
        if (*end)
                return -EINVAL;
        *ret_prefix = p;
        return 0;
}

static int parse_cidr(const char *s, struct in_addr *addr, uint8_t *prefix)
{
        char buf[32];
        unsigned long p;
        if (split_cidr(s, buf, sizeof(buf), &p) < 0 || p < 8 || p > 28 ||
            inet_pton(AF_INET, buf, addr) != 1)
                return -EINVAL;
        uint32_t mask = ~0u << (32 - p);
        if (ntohl(addr->s_addr) & ~mask)
                return -EINVAL;
        *prefix = (uint8_t)p;
        return 0;
}

static int parse_cidr6(const char *s, struct in6_addr *addr, uint8_t *prefix)
{
        char buf[INET6_ADDRSTRLEN];
        unsigned long p;
        if (split_cidr(s, buf, sizeof(buf), &p) < 0 || p < 8 || p > 120 ||
            inet_pton(AF_INET6, buf, addr) != 1)
                return -EINVAL;
        for (unsigned i = 0; i < 16; i++) {
                unsigned bits = p > i * 8 ? (unsigned)p - i * 8 : 0;
                uint8_t keep = bits >= 8 ? 0xff : (uint8_t)(0xff00 >> bits);
                if (addr->s6_addr[i] & ~keep)
                        return -EINVAL;
        }
        *prefix = (uint8_t)p;
        return 0;
}

/* IPv6 forwarding in this namespace. A host that forwards ignores router advertisements on
 * links with accept_ra=1, so a VPS whose IPv6 uplink comes from SLAAC would lose its default
 * route when the advertised lifetime ends: such links get accept_ra=2 (accept them while
 * forwarding) first, which is what they had in effect before. */
static int enable_ipv6_forwarding(void)
{
        _cleanup_closedir_ DIR *d = opendir("/proc/sys/net/ipv6/conf");
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || !strcmp(de->d_name, "all") ||
                    !strcmp(de->d_name, "default") || !strcmp(de->d_name, "lo"))
                        continue;
                _cleanup_close_ int link = openat(dirfd(d), de->d_name,
                                                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_free_ char *ra = NULL, *fwd = NULL;
                if (link < 0 || read_file_at(link, "accept_ra", 16, &ra) < 0 ||
                    strncmp(ra, "1", 1) != 0)
                        continue;
                if (read_file_at(link, "forwarding", 16, &fwd) < 0 || strncmp(fwd, "0", 1) != 0)
                        continue;
                if (write_file_at(link, "accept_ra", "2") == 0)
                        log_info("%s: accept_ra=2 (router advertisements while forwarding)",
                                 de->d_name);
        }
        return write_file_at(AT_FDCWD, "/proc/sys/net/ipv6/conf/all/forwarding", "1");
}

/* Networking is optional: without nftables or with port 53 taken on the gateway address the
 * daemon still runs, and every environment is loopback-only. */
static struct network *start_network(const struct options *o, struct loop *loop, const char *root,
                                     struct engine *engine)
{
        struct network_config nc = {.loop = loop,
                                    .root = root,
                                    .table = "paddock",
                                    .resolv_conf = o->resolv_conf};
        if (parse_cidr(o->subnet, &nc.subnet, &nc.prefix) < 0) {
                log_error("--subnet %s: use a network address like 10.77.0.0/16 (/8../28)",
                          o->subnet);
                exit(2);
        }
        if (o->subnet6 && !strcmp(o->subnet6, "none"))
                nc.ipv6 = false;
        else if (o->subnet6) {
                if (parse_cidr6(o->subnet6, &nc.subnet6, &nc.prefix6) < 0 ||
                    nc.prefix6 > 128 - (32 - nc.prefix)) {
                        log_error("--subnet6 %s: use a network address like fd77:1::/64 with room "
                                  "for the v4 subnet's host part, or none",
                                  o->subnet6);
                        exit(2);
                }
                nc.ipv6 = true;
        } else {
                /* fd77:<v4 network in hex>::/64: distinct v4 subnets give distinct v6 ones. */
                uint32_t v4 = ntohl(nc.subnet.s_addr);
                nc.subnet6.s6_addr[0] = 0xfd;
                nc.subnet6.s6_addr[1] = 0x77;
                for (int i = 0; i < 4; i++)
                        nc.subnet6.s6_addr[2 + i] = (uint8_t)(v4 >> (24 - 8 * i));
                nc.prefix6 = 64;
                nc.ipv6 = true;
        }
        /* Routing environments' traffic needs forwarding in this network namespace. */
        if (write_file_at(AT_FDCWD, "/proc/sys/net/ipv4/ip_forward", "1") < 0)
                log_warn("cannot enable net.ipv4.ip_forward: %m");
        if (nc.ipv6 && access("/proc/sys/net/ipv6", F_OK) < 0) {
                log_info("no IPv6 in this kernel: environments get IPv4 only");
                nc.ipv6 = false;
        }
        if (nc.ipv6) {
                int k = enable_ipv6_forwarding();
                if (k < 0) {
                        log_warn("cannot enable IPv6 forwarding (%s): environments get IPv4 only",
                                 strerror(-k));
                        nc.ipv6 = false;
                }
        }
        struct network_envs envs = engine_network_envs(engine);
        struct network *net = NULL;
        char err[512] = "";
        int r = network_new(&nc, &envs, &net, err, sizeof(err));
        if (r < 0) {
                log_warn("networking unavailable (%s): environments get loopback only", err);
                return NULL;
        }
        return net;
}

/* What the gateway needs from root, prepared before anything else starts so a bad address or
 * certificate fails the start at once: its binary (opened here: the gateway's uid need not be
 * able to reach it by path), its uid, the certificate and the bound sockets. */
struct gateway_prep {
        int exe_fd;
        uid_t uid;
        gid_t gid;
        char cert[4200], key[4200];
        char fingerprint[TLSCERT_FINGERPRINT_SIZE];
};

static int open_gateway_exe(void)
{
        char self[4096], path[4200];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
                return -errno;
        self[n] = 0;
        const char *exe = helper_path(dirname(self), "paddock-gateway", path, sizeof(path));
        int fd = open(exe, O_PATH | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static void prepare_gateway(struct options *o, const char *root, struct gateway_prep *ret)
{
        char err[512];
        if ((ret->exe_fd = open_gateway_exe()) < 0) {
                log_error("--listen: cannot open paddock-gateway (next to paddockd or in "
                          "/usr/lib/paddock): %s", strerror(-ret->exe_fd));
                exit(1);
        }
        if (gateway_resolve_user(o->gateway_user, &ret->uid, &ret->gid, err, sizeof(err)) < 0) {
                log_error("%s", err);
                exit(1);
        }
        if (o->tls_cert) {
                /* Absolute: they are opened again at every start of the gateway. */
                char cert[PATH_MAX], key[PATH_MAX];
                if (!realpath(o->tls_cert, cert) || !realpath(o->tls_key, key)) {
                        log_error("TLS certificate: %s: %m",
                                  realpath(o->tls_cert, cert) ? o->tls_key : o->tls_cert);
                        exit(1);
                }
                snprintf(ret->cert, sizeof(ret->cert), "%s", cert);
                snprintf(ret->key, sizeof(ret->key), "%s", key);
        } else {
                char dir[4200], host[256] = "";
                const char *ips[GATEWAY_MAX_LISTEN];
                for (size_t i = 0; i < o->n_listen; i++)
                        ips[i] = o->listen[i].ip;
                (void)gethostname(host, sizeof(host) - 1);
                struct tlscert_names names = {.ips = ips, .n_ips = o->n_listen,
                                              .hostname = host[0] ? host : NULL};
                if (BUF_PRINTF(dir, "%s/tls", root) < 0 || BUF_PRINTF(ret->cert, "%s/cert.pem", dir) < 0 ||
                    BUF_PRINTF(ret->key, "%s/key.pem", dir) < 0 ||
                    tlscert_ensure(dir, &names, err, sizeof(err)) < 0) {
                        log_error("TLS certificate: %s", err);
                        exit(1);
                }
        }
        if (tlscert_load(ret->cert, ret->key, ret->fingerprint, err, sizeof(err)) < 0) {
                log_error("TLS certificate: %s", err);
                exit(1);
        }
        for (size_t i = 0; i < o->n_listen; i++) {
                int r = gateway_bind(&o->listen[i]);
                if (r < 0) {
                        log_error("--listen %s: %s", o->listen[i].text,
                                  r == -EADDRINUSE     ? "the address is already in use"
                                  : r == -EADDRNOTAVAIL ? "no such address on this host"
                                                        : strerror(-r));
                        exit(1);
                }
        }
        log_info("TLS fingerprint %s", ret->fingerprint);
}

/* The gateway gets the token table at start and again after every change (a token made,
 * revoked or expired): it checks tokens and rates before anything reaches the engine. */
struct token_push {
        struct gateway *gateway;
        struct tokens *tokens;
};

static void push_tokens(void *data)
{
        struct token_push *p = data;
        size_t n = 0, i = 0;
        for (const struct token_row *t = tokens_next(p->tokens, NULL); t; t = tokens_next(p->tokens, t))
                n++;
        _cleanup_free_ struct gateway_token *list = calloc(n ? n : 1, sizeof(*list));
        if (!list) {
                log_error("gateway: out of memory sending the token table");
                return;
        }
        for (const struct token_row *t = tokens_next(p->tokens, NULL); t && i < n;
             t = tokens_next(p->tokens, t), i++) {
                snprintf(list[i].name, sizeof(list[i].name), "%s", t->name);
                snprintf(list[i].hash_hex, sizeof(list[i].hash_hex), "%s", t->hash);
                list[i].admin = t->admin;
                list[i].rate = t->rate;
                list[i].expires_at = t->expires_at;
        }
        gateway_set_tokens(p->gateway, list, i);
}

static struct gateway *start_gateway(const struct options *o, const struct gateway_prep *p,
                                     struct loop *loop, struct engine *engine, const char *root,
                                     const char *spool, struct http_server **ret_http)
{
        /* The gateway's uid must not reach the state: the root directory is the one door (made
         * private by state_dir_make_private by now). */
        struct stat st;
        if (stat(root, &st) < 0 || st.st_uid != 0 || (st.st_mode & 0077)) {
                log_error("--listen: the state directory %s must be root's and mode 0700", root);
                exit(1);
        }
        struct http_config hc = {.listen_fd = -1,
                                 .spool_dir = spool,
                                 .handler = api_handle,
                                 .wants_spool = api_wants_spool,
                                 .done = api_request_done,
                                 .head = api_request_head,
                                 .answering = api_request_answering,
                                 .ctx = engine,
                                 .gateway = true,
                                 /* One per client connection the gateway holds open (its own
                                  * limit is 1024), apart from the local socket's 512. */
                                 .max_connections = 1024};
        struct gateway_config gc = {.loop = loop,
                                    .exe_fd = p->exe_fd,
                                    .uid = p->uid,
                                    .gid = p->gid,
                                    .listen = o->listen,
                                    .n_listen = o->n_listen,
                                    .cert_path = p->cert,
                                    .key_path = p->key,
                                    .fingerprint = p->fingerprint,
                                    .ingress = ingress_request, /* preview URLs */
                                    .ingress_ctx = engine};
        struct gateway *g = NULL;
        int r = http_server_start(loop, &hc, &gc.http);
        if (r >= 0)
                r = gateway_start(&gc, &g);
        if (r < 0) {
                log_error("gateway: %s", strerror(-r));
                exit(1);
        }
        static struct token_push push;
        push = (struct token_push){.gateway = g, .tokens = engine_tokens(engine)};
        tokens_set_changed_hook(push.tokens, push_tokens, &push);
        push_tokens(&push);
        for (size_t i = 0; i < o->n_listen; i++)
                log_info("listening on %s (%s) through the gateway, uid %u", o->listen[i].text,
                         o->listen[i].tls ? "TLS" : "plain HTTP", p->uid);
        *ret_http = gc.http;
        return g;
}

static void on_signal(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct signalfd_siginfo si;
        if (read(fd, &si, sizeof(si)) == sizeof(si)) {
                log_info("received signal %u, shutting down (environments keep running)",
                         si.ssi_signo);
                loop_quit(data);
        }
}

/* paddockd's path for the scope holder; " (deleted)" after an upgrade replaced the file: the
 * new one at the same path is started then. */
static void own_exe(char *buf, size_t size)
{
        ssize_t n = readlink("/proc/self/exe", buf, size - 1);
        buf[n > 0 ? n : 0] = 0;
        size_t len = strlen(buf), dl = strlen(" (deleted)");
        if (len > dl && !strcmp(buf + len - dl, " (deleted)"))
                buf[len - dl] = 0;
}

/* Every running environment holds an fd (its PID 1's pidfd) for as long as it runs, and each
 * request, exec and helper a few more: a daemon started by hand under the usual soft limit of
 * 1,024 would fail creates with EMFILE long before MAX_ENVS. Raising the soft limit up to the
 * hard one needs no privilege (the unit sets both, LimitNOFILE=65536: nothing to do there).
 * Returns the soft limit at start; the API shows both (GET /v1/system, "open_files"). */
static unsigned long long raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
                log_warn("open files limit: %s", strerror(errno));
                return 0;
        }
        unsigned long long was = rl.rlim_cur;
        if (rl.rlim_cur == rl.rlim_max)
                return was;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warn("open files: cannot raise the soft limit %llu to the hard one %llu: %s",
                         was, (unsigned long long)rl.rlim_max, strerror(errno));
        else
                log_info("open files: soft limit raised from %llu to the hard limit %llu", was,
                         (unsigned long long)rl.rlim_max);
        return was;
}

int main(int argc, char **argv)
{
        struct options o = {0};
        /* The process that keeps the environments' systemd scope alive (sdscope.c). */
        if (argc == 3 && !strcmp(argv[1], "--cgroup-holder"))
                return sdscope_holder_main(argv[2]);
        sd_notify_init();
        if (parse_options(argc, argv, &o) < 0)
                return 2;
        if (o.debug)
                log_set_level(LOG_DEBUG);
        if (geteuid() != 0) {
                fprintf(stderr, "paddockd: must run as root (it creates namespaces and cgroups)\n");
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        /* Not dumpable: no core file or /proc/PID/mem of a process that holds every token and
         * secret. */
        prctl(PR_SET_DUMPABLE, 0);
        if (suid_dumpable_traceable()) {
                log_error("fs.suid_dumpable is 1: a process in an environment could trace a command "
                          "paddockd starts there between its change of user and its confinement; "
                          "set it to 0, the default (sysctl -w fs.suid_dumpable=0), or 2");
                return 1;
        }
        unsigned long long nofile_at_start = raise_nofile();
        child_nofile_set(nofile_at_start);
        int sr = seccomp_precompile();
        if (sr < 0) {
                log_error("compiling the seccomp profiles: %s", strerror(-sr));
                return 1;
        }
        char root[4096];
        int r = prepare_root(o.root, root, sizeof(root));
        if (r < 0) {
                log_error("state directory %s: %s", o.root,
                          r == -EINVAL ? "must be a plain path without , : or \\" : strerror(-r));
                return 1;
        }
        int lock = lock_root(root);
        if (lock < 0) {
                log_error("%s: %s", root,
                          lock == -EBUSY ? "another paddockd already uses this state directory"
                                         : strerror(-lock));
                return 1;
        }
        /* Before anything else is set up: a bad address or certificate fails at once. */
        struct gateway_prep gw_prep = {.exe_fd = -EBADF};
        if (o.n_listen)
                prepare_gateway(&o, root, &gw_prep);
        int init_fd = open_init(o.init);
        if (init_fd < 0) {
                log_error("cannot open paddock-init (%s): %s", o.init ? o.init : "next to paddockd",
                          strerror(-init_fd));
                return 1;
        }
        struct storage_config stc = {.root = root, .driver = o.storage, .pool_bytes = o.pool_bytes,
                                   .image_max_bytes = o.image_max_bytes};
        struct storage *storage = NULL;
        char serr[512] = "";
        if ((r = storage_open(&stc, &storage, serr, sizeof(serr))) < 0) {
                log_error("storage: %s", serr[0] ? serr : strerror(-r));
                return 1;
        }
        /* Private state, also where an older version made it 0711/0644; after the storage
         * driver, whose pool (a fresh filesystem) has a 0755 top directory. */
        if ((r = state_dir_make_private(root)) < 0) {
                log_error("state directory %s: %s", root, strerror(-r));
                return 1;
        }
        char dbpath[4200], spool[4200], subtree[64];
        if (BUF_PRINTF(dbpath, "%s/paddock.db", root) < 0 || BUF_PRINTF(spool, "%s/tmp", root) < 0) {
                log_error("state directory %s: path too long", root);
                return 1;
        }
        snprintf(subtree, sizeof(subtree), "paddock-%08x", fnv1a(FNV1A_INIT, root));

        struct state *state = NULL;
        if ((r = state_open(dbpath, &state)) < 0) {
                log_error("state database %s: %s", dbpath, strerror(-r));
                return 1;
        }
        struct cgroup_manager *cg = NULL;
        char scope[512] = "", exe[4096], scope_err[600] = "";
        own_exe(exe, sizeof(exe));
        r = exe[0] ? sdscope_prepare(subtree, exe, scope, sizeof(scope), scope_err,
                                     sizeof(scope_err))
                   : 0;
        if (r < 0) {
                log_warn("a systemd scope for the environments: %s; they go below the daemon's "
                         "own cgroup, where systemd before 254 cannot restart the service while "
                         "any runs", scope_err);
                scope[0] = 0;
        }
        r = scope[0] ? cgroup_manager_new_delegated("/sys/fs/cgroup", "/proc/self/cgroup", scope,
                                                    subtree, &cg)
                     : cgroup_manager_new("/sys/fs/cgroup", "/proc/self/cgroup", subtree, &cg);
        if (r < 0) {
                log_error("cgroups: %s", strerror(-r));
                return 1;
        }
        struct loop *loop = NULL;
        if ((r = loop_new(&loop)) < 0) {
                log_error("event loop: %s", strerror(-r));
                return 1;
        }
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        struct loop_source *sig_src = NULL;
        if (sfd < 0 || loop_add_fd(loop, sfd, EPOLLIN, on_signal, loop, &sig_src) < 0) {
                log_error("signals: %m");
                return 1;
        }
        /* Before the environments are loaded and helpers started: the spawn and sync processes
         * are copies of the daemon's memory as it is now, so the smaller the better. */
        bool sysfs_cloned = false;
        if ((r = rootfs_sysfs_share(&sysfs_cloned)) < 0)
                log_warn("a shared sysfs for sandboxes without a network: %s (each mounts its own)",
                         strerror(-r));
        else
                log_info("sandboxes without a network share one sysfs (%s)",
                          sysfs_cloned ? "cloned" : "mounted in its network namespace");
        struct spawner *spawner = NULL;
        if ((r = spawner_new(loop, cg, init_fd, &spawner)) < 0)
                log_warn("PID 1s are cloned in the loop (no spawn process: %s)", strerror(-r));
        struct syncer *syncer = NULL;
        if ((r = syncer_new(loop, "paddockd-sync", &syncer)) < 0)
                log_warn("state syncs stay in the loop (no sync process: %s)", strerror(-r));
        struct audit_config ac = {.root = root, .max_size = o.audit_max_size,
                                  .keep = o.audit_keep, .loop = loop, .syncer = syncer};
        if ((r = audit_open(&ac)) < 0) {
                log_error("audit log %s/audit: %s", root, strerror(-r));
                return 1;
        }
        struct lxcfs *lxcfs = NULL;
        lxcfs_start(loop, subtree, &lxcfs);
        struct engine_config ec = {.root = root,
                                   .lxcfs = lxcfs,
                                   .uid_registry = o.uid_registry,
                                   .version = PADDOCK_VERSION,
                                   .init_fd = init_fd,
                                   .cgroups = cg,
                                   .state = state,
                                   .loop = loop,
                                   .storage = storage,
                                   .apt_dir = o.apt_dir,
                                   .cgroup_scope = scope[0] ? scope : NULL,
                                   .cgroup_scope_error = scope_err[0] ? scope_err : NULL,
                                   .nofile_at_start = nofile_at_start,
                                   .syncer = syncer,
                                   .spawner = spawner};
        struct engine *engine = NULL;
        if ((r = engine_new(&ec, &engine)) < 0) {
                log_error("loading state: %s", strerror(-r));
                return 1;
        }
        struct network *net = NULL;
        if (!o.no_network)
                net = start_network(&o, loop, root, engine);
        engine_set_network(engine, net);
        engine_set_destroy_hook(engine, procs_drop_env);
        engine_images_cleanup(engine);
        if (o.default_image && !name_is_valid(o.default_image)) {
                log_error("--default-image: invalid image name %s", o.default_image);
                return 1;
        }
        engine_set_default_image(engine, o.default_image ? o.default_image : "default");
        engine_storage_reconcile(engine);
        engine_reconcile(engine);

        int lfd = open_socket(o.socket);
        if (lfd < 0) {
                log_error("socket %s: %s", o.socket,
                          lfd == -EADDRINUSE ? "another paddockd is listening there"
                                             : strerror(-lfd));
                return 1;
        }
        struct http_config hc = {.listen_fd = lfd,
                                 .spool_dir = spool,
                                 .handler = api_handle,
                                 .wants_spool = api_wants_spool,
                                 .done = api_request_done,
                                 .head = api_request_head,
                                 .answering = api_request_answering,
                                 .ctx = engine};
        struct http_server *http = NULL;
        if ((r = http_server_start(loop, &hc, &http)) < 0) {
                log_error("http server: %s", strerror(-r));
                return 1;
        }
        struct http_server *gw_http = NULL;
        struct gateway *gateway = NULL;
        if (o.n_listen)
                gateway = start_gateway(&o, &gw_prep, loop, engine, root, spool, &gw_http);
        log_info("paddockd %s ready: root %s, socket %s, cgroups %s", PADDOCK_VERSION, root,
                 o.socket, cgroup_mode_name(cgroup_manager_mode(cg)));
        sd_notify_send("READY=1\nSTATUS=serving on the API socket");
        r = loop_run(loop);
        sd_notify_send("STOPPING=1");
        events_close_all();
        gateway_stop(gateway);
        http_server_stop(gw_http);
        for (size_t i = 0; i < o.n_listen; i++)
                closep(&o.listen[i].fd);
        closep(&gw_prep.exe_fd);
        http_server_stop(http);
        close(lfd);
        unlink(o.socket);
        exec_slots_shutdown();
        engine_free(engine);
        spawner_free(spawner); /* after the creates it served were given up */
        storage_free(storage);
        network_free(net);
        {
                /* lxcfs keeps serving environments that outlive the daemon */
                char **names = NULL;
                size_t n = 0;
                if (cgroup_list_envs(cg, &names, &n) < 0)
                        n = 1;
                for (size_t i = 0; names && i < n; i++)
                        free(names[i]);
                free(names);
                lxcfs_free(lxcfs, n > 0);
        }
        cgroup_manager_remove_if_empty(cg);
        cgroup_manager_free(cg);
        state_close(state);
        audit_close();
        /* After the engine and the audit log: what waits for it is synced in place there. */
        syncer_free(syncer);
        loop_remove(sig_src);
        loop_free(loop);
        close(sfd);
        close(init_fd);
        close(lock);
        return r < 0 ? 1 : 0;
}
