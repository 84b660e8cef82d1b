/* bench/nft_scale.c: the firewall's share of a networked create and destroy as the number of
 * environments grows, alone (no veths, no daemon): lib/nft.c's nft_env_apply of one more open
 * environment, and its nft_env_remove_known, timed at each N in argv (default 1000 2000),
 * as medians of 21, in a network namespace of its own (unshare: the table and everything in it
 * goes with the process). The apply's time includes the kernel's commit: before the shared
 * chain open_env (2026-12-04) that was its validation of the whole table, as each apply added a
 * chain's rules and a jump to the "envs" map (nft_chain_validate over every environment's
 * chain); now an open environment is a counter and two set elements. Linked against another
 * build's libpaddock.a (e.g. one before 2026-12-02: everything through libnftables) it
 * measures that one.
 *
 *   make && cc -O2 -std=gnu11 -D_GNU_SOURCE -Isrc -o build/nft_scale bench/nft_scale.c \
 *      build/libpaddock.a $(pkg-config --libs libnftables jansson libmnl)
 *   sudo build/nft_scale 0 1000 2000
 */
#include "lib/nft.h"

#include <arpa/inet.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 21

static double now(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp_d);
        return v[n / 2];
}

static struct nft_env env(unsigned i, char name[32], char ifname[16])
{
        snprintf(name, 32, "b%u", i);
        snprintf(ifname, 16, "pdk%08x", i);
        struct nft_env e = {.name = name, .host_ifname = ifname, .mode = NET_OPEN};
        e.addr.s_addr = htonl((10u << 24 | 77u << 16) + 2 + i);
        inet_pton(AF_INET6, "fd77:a4d::", &e.addr6);
        e.addr6.s6_addr[12] = (uint8_t)((2 + i) >> 24);
        e.addr6.s6_addr[13] = (uint8_t)((2 + i) >> 16);
        e.addr6.s6_addr[14] = (uint8_t)((2 + i) >> 8);
        e.addr6.s6_addr[15] = (uint8_t)(2 + i);
        return e;
}

/* One more environment, applied and removed RUNS times: medians in ms. */
static int measure(struct nft *n, unsigned i, double *ret_apply, double *ret_remove)
{
        double a[RUNS], r[RUNS];
        char name[32], ifname[16];
        for (int k = 0; k < RUNS; k++) {
                struct nft_env e = env(i, name, ifname);
                double t0 = now();
                int x = nft_env_apply(n, &e);
                double t1 = now();
                int y = x < 0 ? x : nft_env_remove_known(n, name, ifname, NULL, 0);
                double t2 = now();
                if (x < 0 || y < 0) {
                        fprintf(stderr, "nft: %s\n", nft_last_error(n));
                        return -1;
                }
                a[k] = (t1 - t0) * 1e3;
                r[k] = (t2 - t1) * 1e3;
        }
        *ret_apply = median(a, RUNS);
        *ret_remove = median(r, RUNS);
        return 0;
}

int main(int argc, char **argv)
{
        if (unshare(CLONE_NEWNET) < 0) {
                perror("unshare(CLONE_NEWNET) (run as root)");
                return 1;
        }
        struct in_addr sub, gw;
        struct in6_addr sub6;
        inet_pton(AF_INET, "10.77.0.0", &sub);
        inet_pton(AF_INET, "10.77.0.1", &gw);
        inet_pton(AF_INET6, "fd77:a4d::", &sub6);
        struct nft *n = NULL;
        if (nft_open("paddock", sub, 16, gw, &sub6, 64, &n) < 0) {
                fprintf(stderr, "nft_open failed\n");
                return 1;
        }
        printf("| environments | apply one more | remove it |\n|---|---|---|\n");
        static const unsigned def[] = {0, 1000, 2000};
        size_t nn = argc > 1 ? (size_t)argc - 1 : sizeof(def) / sizeof(def[0]);
        unsigned have = 0;
        for (size_t k = 0; k < nn; k++) {
                unsigned want = argc > 1 ? (unsigned)atoi(argv[k + 1]) : def[k];
                /* grow without timing: batched, 128 per libnftables call */
                nft_batch_begin(n);
                for (; have < want; have++) {
                        char name[32], ifname[16];
                        struct nft_env e = env(have, name, ifname);
                        if (nft_env_apply(n, &e) < 0) {
                                fprintf(stderr, "grow: %s\n", nft_last_error(n));
                                return 1;
                        }
                }
                if (nft_batch_end(n) < 0) {
                        fprintf(stderr, "grow: %s\n", nft_last_error(n));
                        return 1;
                }
                double a, r;
                if (measure(n, 65000, &a, &r) < 0)
                        return 1;
                printf("| %u | %.2f ms | %.2f ms |\n", have, a, r);
                fflush(stdout);
        }
        nft_destroy_table(n);
        nft_close(n);
        return 0;
}
