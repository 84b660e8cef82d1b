/* paddock stats: a live table of what environments use, like `docker stats`.
 *
 * One GET /v1/envs per refresh serves every environment shown (its `usage` carries CPU time,
 * memory, pids and network counters; `disk.used` the disk): the cost per refresh does not grow
 * with the number of names asked for. CPU% is the CPU time used between two samples over the
 * wall time between them (100% = one CPU busy). */
#include "cli/cli.h"
#include "cli/opts.h"
#include "cli/output.h"
#include "lib/parse.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
        OPT_NO_STREAM = OPT_FIRST_VERB_OPTION,
};

#define INTERVAL_MS 1000

static const char stats_help[] =
    "Usage: paddock stats [NAME...] [--no-stream] [--json]\n"
    "\n"
    "Show what environments use, refreshed every second: CPU (100% = one CPU), memory\n"
    "against its limit, processes, network bytes received / sent, and a computer's disk.\n"
    "Without NAME: every running or paused environment. Ctrl-C ends it.\n"
    "\n"
    "  --no-stream   print one table after one second of sampling and exit\n"
    "  --json        print each refresh as a JSON array (one line per refresh when streaming)\n";

static const struct option stats_options[] = {
    {"no-stream", no_argument, NULL, OPT_NO_STREAM},
    CLI_COMMON_OPTIONS,
    {},
};

static int stats_option(void *userdata, int c, const char *verb)
{
        if (c != OPT_NO_STREAM)
                return 0;
        *(bool *)userdata = true;
        return -1;
}

static const struct verb_syntax stats_syntax = {
    .verb = "stats",
    .help = stats_help,
    .options = stats_options,
    .own = stats_option,
    OPERANDS(0, -1, NULL),
};

/* One answer of GET /v1/envs and when it came. */
struct sample {
        json_t *envs; /* the array */
        uint64_t at_us;
};

static uint64_t mono_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int take_sample(struct client *c, struct sample *s)
{
        struct response resp = {};
        if (client_call(c, "GET", "/v1/envs", NULL, &resp) < 0)
                return -1;
        json_t *envs = json_object_get(resp.json, "envs");
        if (!json_is_array(envs)) {
                fprintf(stderr, "paddock: stats: the daemon's answer has no environment list\n");
                response_done(&resp);
                return -1;
        }
        json_decref(s->envs);
        s->envs = json_incref(envs);
        s->at_us = mono_us();
        response_done(&resp);
        return 0;
}

static json_t *find_env(const struct sample *s, const char *name)
{
        size_t i;
        json_t *v;
        json_array_foreach(s->envs, i, v)
        {
                const char *n = json_string_value(json_object_get(v, "name"));
                if (n && !strcmp(n, name))
                        return v;
        }
        return NULL;
}

static bool u64_at(const json_t *obj, const char *key, uint64_t *ret)
{
        const json_t *j = json_object_get(obj, key);
        if (!json_is_integer(j) || json_integer_value(j) < 0)
                return false;
        *ret = (uint64_t)json_integer_value(j);
        return true;
}

/* One environment's row as JSON (the --json form and the table's source): null where a value
 * is unknown (not running, no limit, no disk of its own). */
static json_t *row_json(const json_t *env, const struct sample *prev, uint64_t now_us)
{
        const char *name = json_string_value(json_object_get(env, "name"));
        const json_t *usage = json_object_get(env, "usage");
        const char *state = json_string_value(json_object_get(env, "state"));
        json_t *row = json_pack("{s:s,s:s}", "name", name ? name : "", "state", state ? state : "");
        if (!row)
                return NULL;
        uint64_t cpu = 0, cpu0 = 0, mem = 0, limit = 0, v = 0;
        const json_t *before = prev && name ? find_env(prev, name) : NULL;
        bool has_cpu = u64_at(usage, "cpu_usage_us", &cpu) && before &&
                       u64_at(json_object_get(before, "usage"), "cpu_usage_us", &cpu0) &&
                       cpu >= cpu0 && now_us > prev->at_us;
        json_object_set_new(
            row, "cpu_percent",
            has_cpu ? json_real(100.0 * (double)(cpu - cpu0) / (double)(now_us - prev->at_us))
                    : json_null());
        bool has_mem = u64_at(usage, "memory", &mem);
        bool has_limit = u64_at(json_object_get(env, "limits"), "memory", &limit) && limit;
        json_object_set_new(row, "memory", has_mem ? json_integer((json_int_t)mem) : json_null());
        json_object_set_new(row, "memory_limit",
                            has_limit ? json_integer((json_int_t)limit) : json_null());
        json_object_set_new(row, "memory_percent",
                            has_mem && has_limit ? json_real(100.0 * (double)mem / (double)limit)
                                                 : json_null());
        static const char *const counts[] = {"pids", "net_rx_bytes", "net_tx_bytes"};
        for (size_t i = 0; i < ELEMENTSOF(counts); i++)
                json_object_set_new(row, counts[i],
                                    u64_at(usage, counts[i], &v) ? json_integer((json_int_t)v)
                                                                 : json_null());
        json_object_set_new(row, "disk_used",
                            u64_at(json_object_get(env, "disk"), "used", &v)
                                ? json_integer((json_int_t)v)
                                : json_null());
        return row;
}

/* The rows of this refresh: the named environments in the order given, else every one that
 * runs (has usage). */
static json_t *rows_json(const struct sample *prev, const struct sample *cur, char **names,
                         size_t n_names)
{
        json_t *rows = json_array();
        if (!rows)
                return NULL;
        if (n_names) {
                for (size_t i = 0; i < n_names; i++) {
                        const json_t *env = find_env(cur, names[i]);
                        if (env)
                                json_array_append_new(rows, row_json(env, prev, cur->at_us));
                }
                return rows;
        }
        size_t i;
        json_t *env;
        json_array_foreach(cur->envs, i, env)
        {
                if (json_is_object(json_object_get(env, "usage")))
                        json_array_append_new(rows, row_json(env, prev, cur->at_us));
        }
        return rows;
}

static const char *size_of(const json_t *row, const char *key, char *buf, size_t len)
{
        const json_t *j = json_object_get(row, key);
        return json_is_integer(j) ? human_size((uint64_t)json_integer_value(j), buf, len) : "-";
}

static const char *percent_of(const json_t *row, const char *key, char *buf, size_t len)
{
        const json_t *j = json_object_get(row, key);
        if (!json_is_number(j))
                return "-";
        snprintf(buf, len, "%.2f%%", json_number_value(j));
        return buf;
}

static int print_table(const json_t *rows)
{
        static const char *const headers[] = {
            "NAME", "CPU%", "MEM USAGE / LIMIT", "MEM%", "PIDS", "NET I/O", "DISK"};
        struct table *t = table_new(headers, ELEMENTSOF(headers));
        if (!t)
                return -1;
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row)
        {
                char cpu[32], mem[32], limit[32], memcell[80], memp[32], pids[32], rx[32], tx[32],
                    net[80], disk[32];
                snprintf(memcell, sizeof(memcell), "%s / %s",
                         size_of(row, "memory", mem, sizeof(mem)),
                         size_of(row, "memory_limit", limit, sizeof(limit)));
                const json_t *p = json_object_get(row, "pids");
                if (json_is_integer(p))
                        snprintf(pids, sizeof(pids), "%lld", (long long)json_integer_value(p));
                else
                        snprintf(pids, sizeof(pids), "-");
                snprintf(net, sizeof(net), "%s / %s", size_of(row, "net_rx_bytes", rx, sizeof(rx)),
                         size_of(row, "net_tx_bytes", tx, sizeof(tx)));
                const char *cells[] = {
                    json_string_value(json_object_get(row, "name")),
                    percent_of(row, "cpu_percent", cpu, sizeof(cpu)),
                    memcell,
                    percent_of(row, "memory_percent", memp, sizeof(memp)),
                    pids,
                    net,
                    size_of(row, "disk_used", disk, sizeof(disk)),
                };
                if (table_add(t, cells) < 0) {
                        table_free(t);
                        return -1;
                }
        }
        table_print(t);
        table_free(t);
        return 0;
}

static void sleep_until(uint64_t at_us)
{
        uint64_t now = mono_us();
        if (at_us > now)
                usleep((useconds_t)(at_us - now));
}

int cmd_stats(struct cli *cli, int argc, char **argv)
{
        bool no_stream = false;
        int r = opts_parse(cli, argc, argv, &stats_syntax, &no_stream);
        if (r >= 0)
                return r;
        char **names = argv + optind;
        size_t n_names = (size_t)(argc - optind);
        for (size_t i = 0; i < n_names; i++)
                if (!name_is_valid(names[i]))
                        return usage_error("stats", "invalid environment name '%s'", names[i]);
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        struct sample prev = {0}, cur = {0};
        bool tty = isatty(STDOUT_FILENO);
        r = EXIT_FAIL;
        if (take_sample(client, &prev) < 0)
                goto out;
        for (size_t i = 0; i < n_names; i++)
                if (!find_env(&prev, names[i])) {
                        fprintf(stderr, "paddock: stats: no such environment: %s\n", names[i]);
                        goto out;
                }
        for (bool first = true;; first = false) {
                sleep_until(prev.at_us + INTERVAL_MS * 1000);
                if (take_sample(client, &cur) < 0)
                        goto out;
                json_t *rows = rows_json(&prev, &cur, names, n_names);
                if (!rows)
                        goto out;
                if (cli->json && no_stream) {
                        output_json(rows);
                } else if (cli->json) {
                        json_dumpf(rows, stdout, JSON_COMPACT);
                        putchar('\n');
                } else {
                        if (tty)
                                fputs("\033[H\033[2J", stdout); /* home, clear: in place */
                        else if (!first)
                                putchar('\n');
                        if (print_table(rows) < 0) {
                                json_decref(rows);
                                goto out;
                        }
                }
                json_decref(rows);
                if (fflush(stdout) != 0)
                        goto out;
                if (no_stream)
                        break;
                json_decref(prev.envs);
                prev = cur;
                cur = (struct sample){0};
        }
        r = EXIT_OK;
out:
        json_decref(prev.envs);
        json_decref(cur.envs);
        return r;
}
