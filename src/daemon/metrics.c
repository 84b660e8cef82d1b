/* The engine side of the metrics: see metrics.h. */
#include "daemon/metrics.h"
#include "daemon/engine_internal.h"
#include "daemon/supervise.h"
#include "lib/util.h"

#include <inttypes.h>
#include <time.h>

/* Every environment's veth counters from one netlink dump, kept for a second: a listing or a
 * scrape of N environments costs one dump, and a client polling every second (paddock stats)
 * one dump per second however many environments there are. One engine per daemon, one
 * thread: the cache is the module's. */
#define NET_CACHE_MS 1000
static struct {
        struct link_stats *all;
        size_t n;
        uint64_t at_ms; /* 0: never read */
} veths;

static const struct link_stats *veth_cached(const char *ifname)
{
        uint64_t now = now_ms();
        if (!veths.at_ms || now - veths.at_ms >= NET_CACHE_MS) {
                struct link_stats *all = NULL;
                size_t n = 0;
                if (netlink_stats_all(&all, &n) < 0)
                        return NULL; /* keep the old table; try again next time */
                free(veths.all);
                veths.all = all;
                veths.n = n;
                veths.at_ms = now;
        }
        /* The dump has indexes, not names: the name's index now (a hash lookup). */
        int ifindex = netlink_ifindex(ifname);
        return ifindex > 0 ? link_stats_by_index(veths.all, veths.n, ifindex) : NULL;
}

void metrics_env_net(struct engine *e, struct env *v, bool listed, struct link_stats *ret)
{
        *ret = (struct link_stats){0};
        if (!e->net || v->pidfd < 0 || v->net.mode == NET_NONE || !v->ifname[0])
                return;
        const char *ifname = v->ifname;
        struct link_stats one;
        const struct link_stats *s = listed                                  ? veth_cached(ifname)
                                     : netlink_link_stats(ifname, &one) >= 0 ? &one
                                                                             : NULL;
        if (!s)
                return;
        /* The host side's rx is what the environment sent, its tx what it received. */
        snprintf(ret->name, sizeof(ret->name), "%s", ifname);
        ret->rx_bytes = s->tx_bytes;
        ret->tx_bytes = s->rx_bytes;
        ret->rx_packets = s->tx_packets;
        ret->tx_packets = s->rx_packets;
}

void metrics_label_value(FILE *f, const char *s)
{
        for (; *s; s++) {
                if (*s == '\\')
                        fputs("\\\\", f);
                else if (*s == '"')
                        fputs("\\\"", f);
                else if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
        }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One environment's readings, written out at once into each family's buffer. */
struct sample {
        struct env *v;
        bool running; /* the cgroup was read: cg and net are valid */
        struct cgroup_stats cg;
        struct link_stats net;
        uint64_t denied;
        bool has_disk;
        uint64_t disk;
};

static const char *const states[] = {"creating", "starting", "running", "paused",
                                     "stopping", "stopped",  "deleting"};
static const char *const kinds[] = {"computer", "sandbox"};

#define N_ENV_FAMILIES 13 /* ELEMENTSOF(env_families), checked below */

/* Each family's samples are written as each environment is read (the text format wants a
 * family's samples together: one buffer per family, joined at the end). */
struct metrics_envs {
        FILE *fam[N_ENV_FAMILIES];
        char *text[N_ENV_FAMILIES];
        size_t len[N_ENV_FAMILIES];
        size_t count[ELEMENTSOF(states)][ELEMENTSOF(kinds)]; /* of those added */
};

enum env_family {
        F_INFO,
        F_CPU,
        F_MEM,
        F_MEM_PEAK,
        F_MEM_LIMIT,
        F_PIDS,
        F_OOM,
        F_DISK,
        F_RX_BYTES,
        F_TX_BYTES,
        F_RX_PACKETS,
        F_TX_PACKETS,
        F_DENIED,
};

static const struct {
        const char *name, *type, *help;
} env_families[] = {
    [F_INFO] = {"paddock_env_info", "gauge",
                "An environment the caller may see (always 1), with its kind, state and image."},
    [F_CPU] = {"paddock_env_cpu_seconds_total", "counter",
               "CPU time used by the running environment's processes, in seconds."},
    [F_MEM] = {"paddock_env_memory_bytes", "gauge",
               "Memory charged to the running environment's cgroup, in bytes."},
    [F_MEM_PEAK] = {"paddock_env_memory_peak_bytes", "gauge",
                    "Highest memory of the running environment since it started, in bytes "
                    "(0 where the kernel does not tell)."},
    [F_MEM_LIMIT] = {"paddock_env_memory_limit_bytes", "gauge",
                     "The environment's memory limit in bytes (no sample when unlimited)."},
    [F_PIDS] = {"paddock_env_pids", "gauge", "Processes and threads in the running environment."},
    [F_OOM] = {"paddock_env_oom_kills_total", "counter",
               "Processes of the running environment killed by the OOM killer."},
    [F_DISK] = {"paddock_env_disk_used_bytes", "gauge",
                "Bytes a computer wrote to its own disk (shared image data not counted)."},
    [F_RX_BYTES] = {"paddock_env_network_receive_bytes_total", "counter",
                    "Bytes the running environment received over its network interface."},
    [F_TX_BYTES] = {"paddock_env_network_transmit_bytes_total", "counter",
                    "Bytes the running environment sent over its network interface."},
    [F_RX_PACKETS] = {"paddock_env_network_receive_packets_total", "counter",
                      "Packets the running environment received over its network interface."},
    [F_TX_PACKETS] = {"paddock_env_network_transmit_packets_total", "counter",
                      "Packets the running environment sent over its network interface."},
    [F_DENIED] = {"paddock_env_network_denied_packets_total", "counter",
                  "Packets of the running environment dropped by its network policy."},
};

_Static_assert(ELEMENTSOF(env_families) == N_ENV_FAMILIES, "N_ENV_FAMILIES");

/* The value of family fam for s, or false when s has no sample in it. */
static bool sample_value(const struct sample *s, enum env_family fam, char *buf, size_t len)
{
        uint64_t u;
        switch (fam) {
        case F_INFO:
                u = 1;
                break;
        case F_CPU:
                if (!s->running)
                        return false;
                snprintf(buf, len, "%" PRIu64 ".%06" PRIu64, s->cg.cpu_usage_us / 1000000,
                         s->cg.cpu_usage_us % 1000000);
                return true;
        case F_MEM_LIMIT:
                if (s->v->limits.memory_bytes == CG_UNLIMITED)
                        return false;
                u = s->v->limits.memory_bytes;
                break;
        case F_DISK:
                if (!s->has_disk)
                        return false;
                u = s->disk;
                break;
        case F_MEM:
        case F_MEM_PEAK:
        case F_PIDS:
        case F_OOM:
        case F_RX_BYTES:
        case F_TX_BYTES:
        case F_RX_PACKETS:
        case F_TX_PACKETS:
        case F_DENIED:
        default:
                if (!s->running)
                        return false;
                u = fam == F_MEM          ? s->cg.memory_current
                    : fam == F_MEM_PEAK   ? s->cg.memory_peak
                    : fam == F_PIDS       ? s->cg.pids_current
                    : fam == F_OOM        ? s->cg.oom_kills
                    : fam == F_RX_BYTES   ? s->net.rx_bytes
                    : fam == F_TX_BYTES   ? s->net.tx_bytes
                    : fam == F_RX_PACKETS ? s->net.rx_packets
                    : fam == F_TX_PACKETS ? s->net.tx_packets
                                          : s->denied;
                break;
        }
        snprintf(buf, len, "%" PRIu64, u);
        return true;
}

static void take_sample(struct engine *e, struct env *v, struct sample *s)
{
        *s = (struct sample){.v = v};
        struct env_counters c;
        engine_env_counters(e, v, true, &c);
        if (v->pidfd >= 0 && c.cg_ok) {
                s->cg = c.cg;
                s->running = true;
                metrics_env_net(e, v, true, &s->net);
                if (e->net && v->net.mode != NET_NONE)
                        s->denied = network_env_denied(e->net, v->row.name, true);
        }
        s->disk = c.disk;
        s->has_disk = c.disk_ok;
}

void metrics_envs_free(struct metrics_envs *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < N_ENV_FAMILIES; i++) {
                if (m->fam[i])
                        fclose(m->fam[i]);
                free(m->text[i]);
        }
        free(m);
}

struct metrics_envs *metrics_envs_new(void)
{
        struct metrics_envs *m = calloc(1, sizeof(*m));
        for (size_t i = 0; m && i < N_ENV_FAMILIES; i++)
                if (!(m->fam[i] = open_memstream(&m->text[i], &m->len[i]))) {
                        metrics_envs_free(m);
                        return NULL;
                }
        return m;
}

int metrics_envs_add(struct metrics_envs *m, struct engine *e, struct env *v)
{
        struct sample s;
        take_sample(e, v, &s);
        for (size_t fam = 0; fam < N_ENV_FAMILIES; fam++) {
                char val[48];
                if (!sample_value(&s, (enum env_family)fam, val, sizeof(val)))
                        continue;
                FILE *f = m->fam[fam];
                fprintf(f, "%s{env=\"", env_families[fam].name);
                metrics_label_value(f, v->row.name);
                if (fam == F_INFO) {
                        fputs("\",kind=\"", f);
                        metrics_label_value(f, v->row.kind);
                        fputs("\",state=\"", f);
                        metrics_label_value(f, env_state(v));
                        fputs("\",image=\"", f);
                        metrics_label_value(f, v->row.image);
                }
                fprintf(f, "\"} %s\n", val);
        }
        size_t k = v->kind == KIND_SANDBOX;
        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                if (!strcmp(env_state(v), states[i]))
                        m->count[i][k]++;
        return 0;
}

int metrics_envs_write(struct metrics_envs *m, FILE *f)
{
        int r = 0;
        for (size_t fam = 0; fam < N_ENV_FAMILIES; fam++) {
                if (m->fam[fam] && fclose(m->fam[fam]) != 0)
                        r = -ENOMEM;
                m->fam[fam] = NULL;
                family(f, env_families[fam].name, env_families[fam].type, env_families[fam].help);
                if (m->text[fam])
                        fwrite(m->text[fam], 1, m->len[fam], f);
        }
        return r;
}

/* Seconds since this process started: its start time in /proc/self/stat against the boot
 * clock both are measured on. */
static double uptime_s(void)
{
        uint64_t start_ticks;
        struct timespec ts;
        long hz = sysconf(_SC_CLK_TCK);
        if (proc_start_time(getpid(), &start_ticks) < 0 || hz <= 0 ||
            clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
                return 0;
        double up = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - (double)start_ticks / (double)hz;
        return up > 0 ? up : 0;
}

void metrics_write_daemon(struct engine *e, const struct metrics_envs *m, FILE *f)
{
        family(f, "paddock_envs", "gauge", "Environments by state and kind.");
        for (size_t s = 0; s < ELEMENTSOF(states); s++)
                for (size_t k = 0; k < ELEMENTSOF(kinds); k++)
                        fprintf(f, "paddock_envs{state=\"%s\",kind=\"%s\"} %zu\n", states[s],
                                kinds[k], m->count[s][k]);
        family(f, "paddock_helpers_running", "gauge",
               "Helper processes the daemon supervises (exec, files, watch, image jobs, disks).");
        fprintf(f, "paddock_helpers_running %u\n", supervise_running());
        family(f, "paddock_loop_turn_max_seconds", "gauge",
               "The longest turn of the daemon's event loop (callbacks run between two waits, "
               "while every other client waits) since the previous scrape by an administrator.");
        fprintf(f, "paddock_loop_turn_max_seconds %.6f\n",
                (double)loop_take_max_turn_us(e->cfg.loop) / 1e6);
        family(f, "paddock_loop_callback_max_seconds", "gauge",
               "The longest single callback of the event loop (one request's or event's share "
               "of a turn) since the previous scrape by an administrator.");
        fprintf(f, "paddock_loop_callback_max_seconds %.6f\n",
                (double)loop_take_max_callback_us(e->cfg.loop) / 1e6);
        family(f, "paddock_uptime_seconds", "gauge", "Seconds since the daemon started.");
        fprintf(f, "paddock_uptime_seconds %.3f\n", uptime_s());
        family(f, "paddock_build_info", "gauge", "The daemon's version (always 1).");
        fputs("paddock_build_info{version=\"", f);
        metrics_label_value(f, e->cfg.version ? e->cfg.version : "");
        fputs("\"} 1\n", f);
        engine_idle_metrics(e, f);
}
