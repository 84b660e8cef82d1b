/* paddock: the command-line client of paddockd. Global options, then a verb:
 *
 *   paddock [--socket PATH | --host URL [--token T] ...] [--json] VERB [ARGS...]
 *
 * Every verb is an HTTP call over the daemon's unix socket, or over TLS to a remote daemon
 * (remote.c, transport.c); nothing here needs privileges. */
#include "cli/cli.h"
#include "cli/opts.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const struct subverb verbs[] = {
    {"create", cmd_create},   {"ls", cmd_ls},
    {"list", cmd_ls},         {"inspect", cmd_inspect},
    {"rm", cmd_rm},           {"start", cmd_lifecycle},
    {"stop", cmd_lifecycle},  {"restart", cmd_lifecycle},
    {"pause", cmd_lifecycle}, {"resume", cmd_lifecycle},
    {"update", cmd_update},   {"net", cmd_net},
    {"port", cmd_port},       {"exec", cmd_exec},
    {"ps", cmd_ps},           {"logs", cmd_logs},
    {"kill", cmd_kill},       {"wait", cmd_wait},
    {"forget", cmd_forget},   {"cp", cmd_cp},
    {"watch", cmd_watch},     {"shell", cmd_shell},
    {"image", cmd_image},     {"system", cmd_system},
    {"daemon", cmd_daemon},
    {"snapshot", cmd_snapshot}, {"restore", cmd_restore},
    {"fork", cmd_fork},         {"commit", cmd_commit},
    {"stats", cmd_stats},
    {"audit", cmd_audit},       {"events", cmd_events},
    {"token", cmd_token},
    {"mcp", cmd_mcp},
};

static const char overview[] =
    "Usage: paddock [--socket PATH | --host URL] [--json] COMMAND [ARGS...]\n"
    "\n"
    "Isolated Linux environments for AI agents: the client of paddockd.\n"
    "\n"
    "Environments:\n"
    "  create NAME [OPTIONS]        create a computer or a sandbox\n"
    "  ls                           list environments\n"
    "  inspect NAME...              show everything about an environment\n"
    "  update NAME [OPTIONS]        change limits or TTL, also while running\n"
    "  start|stop|restart NAME...   change state\n"
    "  pause|resume NAME...         freeze and thaw\n"
    "  rm [-f] NAME...              destroy\n"
    "  exec NAME [OPTIONS] -- CMD   run a command inside, exit with its exit code\n"
    "  shell NAME                   interactive shell in a terminal inside\n"
    "  cp SRC DST                   copy files and directories in or out (NAME:/path)\n"
    "  watch NAME PATH              print changes below a directory as they happen\n"
    "  stats [NAME...]              live CPU, memory, processes, network and disk use\n"
    "\n"
    "Background processes (exec -d):\n"
    "  ps NAME                      list them\n"
    "  logs NAME ID [-f]            print (or follow) the output of one\n"
    "  kill NAME ID... [-s SIGNAL]  signal them (default TERM)\n"
    "  wait NAME ID                 wait for one, exit with its exit code\n"
    "  forget NAME ID...            drop records of finished ones\n"
    "\n"
    "Snapshots (computers, btrfs driver):\n"
    "  snapshot NAME [SNAP]         take a snapshot (a running computer is frozen meanwhile)\n"
    "  snapshot ls|rm NAME ...      list or remove snapshots\n"
    "  restore NAME SNAP            put a stopped computer back to a snapshot\n"
    "  fork NAME NEW [--snapshot S] a new computer copied from NAME (copy-on-write)\n"
    "  commit NAME IMAGE            make an image of a computer's disk\n"
    "\n"
    "Network:\n"
    "  net NAME [OPTIONS]           show or change network mode, allow list, links, bandwidth\n"
    "  port add|ls|rm|url NAME ...  publish environment ports on the host, preview URLs\n"
    "\n"
    "Images and daemon:\n"
    "  image ls|import|export|pull|build|rm   manage root filesystem images\n"
    "  system                       daemon version and host capabilities\n"
    "  audit [--env N] [--since D]  the audit log: changes and commands, who and when\n"
    "  events [--env N] [--type T]  print events (created, started, oom, ...) as they happen\n"
    "  daemon [ARGS]                run paddockd\n"
    "  token create|ls|rm ...       API tokens for agents (secret shown once)\n"
    "  mcp                          serve MCP tools to an agent on stdin/stdout\n"
    "\n"
    "Global options:\n"
    "  --socket PATH   paddockd's socket (env PADDOCK_SOCKET, default " PADDOCK_DEFAULT_SOCKET ")\n"
    "  --host URL      a remote daemon: https://HOST:PORT (env PADDOCK_HOST)\n"
    "  --token T       API token, sent as Authorization: Bearer (env PADDOCK_TOKEN)\n"
    "  --fingerprint F accept only this server certificate, sha256:AB:CD:...\n"
    "                  (env PADDOCK_FINGERPRINT; else ~/.config/paddock/known_hosts)\n"
    "  --ca-cert FILE  verify the server certificate against this CA (env PADDOCK_CA_CERT)\n"
    "  --trust-new     store an unknown server certificate without asking\n"
    "  --json          print what the daemon returns as JSON\n"
    "  --version       print the CLI version\n"
    "\n"
    "'paddock COMMAND --help' describes one command.\n";

struct client *cli_client(struct cli *cli)
{
        if (!cli->client_open) {
                if (client_open(&cli->client, cli->socket_path) < 0 ||
                    remote_setup(cli, &cli->client) < 0)
                        return NULL;
                cli->client_open = true;
        }
        return &cli->client;
}

static const struct subverb *find_verb(const char *name)
{
        return subverb_find(verbs, sizeof(verbs) / sizeof(verbs[0]), name);
}

static int global_usage_error(const char *what, const char *arg)
{
        fprintf(stderr, "paddock: %s '%s' (see 'paddock --help')\n", what, arg);
        return EXIT_USAGE;
}

/* Global options stand before the verb; the verbs accept --socket and --json too, so they may
 * also come after it. */
static int parse_global(struct cli *cli, int argc, char **argv, int *ret_verb_index)
{
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--socket") == 0) {
                        if (i + 1 >= argc)
                                return global_usage_error("option needs a value:", a);
                        cli->socket_path = argv[++i];
                        cli->socket_from_cmdline = true;
                } else if (strncmp(a, "--socket=", 9) == 0) {
                        cli->socket_path = a + 9;
                        cli->socket_from_cmdline = true;
                } else if (strcmp(a, "--json") == 0) {
                        cli->json = true;
                } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        fputs(overview, stdout);
                        return EXIT_OK;
                } else if (strcmp(a, "--version") == 0) {
                        printf("paddock %s\n", PADDOCK_VERSION);
                        return EXIT_OK;
                } else {
                        int r = remote_option(cli, argc, argv, &i);
                        if (r >= 0)
                                return r;
                }
        }
        *ret_verb_index = i;
        return -1;
}

/* jansson seeds the hash of its objects (against inputs that collide on purpose) the first time
 * it makes one, by opening, reading and closing /dev/urandom; one getrandom call does it here
 * instead. If that fails, jansson still seeds itself. */
static void seed_json(void)
{
        uint32_t seed;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == sizeof(seed) && seed != 0)
                json_object_seed(seed);
}

int main(int argc, char **argv)
{
        struct cli cli = {};
        const char *env = getenv("PADDOCK_SOCKET");
        cli.socket_path = env && *env ? env : PADDOCK_DEFAULT_SOCKET;

        int vi;
        int r = parse_global(&cli, argc, argv, &vi);
        if (r >= 0)
                return r;
        if (vi >= argc) {
                fprintf(stderr, "paddock: missing COMMAND (see 'paddock --help')\n");
                return EXIT_USAGE;
        }

        const char *name = argv[vi];
        if (strcmp(name, "help") == 0) {
                if (vi + 1 >= argc) {
                        fputs(overview, stdout);
                        return EXIT_OK;
                }
                /* "paddock help VERB" is "paddock VERB --help". */
                const struct subverb *v = find_verb(argv[vi + 1]);
                if (!v)
                        return global_usage_error("unknown command", argv[vi + 1]);
                char *help_argv[] = {argv[vi + 1], "--help", NULL};
                return v->run(&cli, 2, help_argv);
        }
        const struct subverb *v = find_verb(name);
        if (!v)
                return global_usage_error("unknown command", name);
        seed_json();

        r = v->run(&cli, argc - vi, argv + vi);
        if (cli.client_open)
                client_close(&cli.client);
        if (transport_refused())
                r = EXIT_UNTRUSTED;
        if (fflush(stdout) != 0 && r == EXIT_OK)
                r = EXIT_FAIL;
        return r;
}
