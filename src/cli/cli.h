/* The paddock CLI: a thin HTTP client of paddockd. Nothing here is privileged; every verb is
 * one or a few API calls plus printing. Shared state and the verb entry points live here. */
#pragma once

#include "cli/client.h"
#include "cli/transport.h"
#include "lib/paddock.h"

#include <stdbool.h>


/* Exit codes of every verb but exec (which passes on the command's own code). */
enum {
        EXIT_OK = 0,
        EXIT_FAIL = 1,  /* the daemon refused, or could not be reached */
        EXIT_USAGE = 2, /* bad command line; nothing was sent */
        EXIT_UNTRUSTED = 2, /* the server's TLS certificate was refused; nothing was sent */
};

struct cli {
        const char *socket_path;
        bool socket_from_cmdline; /* --socket given (forwarded by `paddock daemon`) */
        bool json;                /* --json: print what the daemon sent, unformatted */
        bool client_open;
        struct client client;
        /* A remote daemon (remote.c): --host or PADDOCK_HOST and how to trust it. */
        const char *host, *token, *fingerprint, *ca_cert;
        bool host_from_cmdline, trust_new;
        struct endpoint remote;
};

/* The global options of a remote daemon, before the verb: --host URL, --token T,
 * --fingerprint FP, --ca-cert FILE, --trust-new (each also as --opt=VALUE). -1 when argv[*i]
 * was one (*i then at its last word), else EXIT_USAGE after printing why (an unknown option
 * included). */
int remote_option(struct cli *cli, int argc, char **argv, int *i);
/* Where the client connects and with what token: the options, else PADDOCK_HOST,
 * PADDOCK_TOKEN, PADDOCK_FINGERPRINT, PADDOCK_CA_CERT, PADDOCK_TRUST_NEW. 0, or -1 after
 * printing why. */
int remote_setup(struct cli *cli, struct client *c);

/* The HTTP client, connected lazily on first use (so --help and usage errors need no daemon).
 * NULL after printing why it could not be set up. */
struct client *cli_client(struct cli *cli);

/* Verbs. argv[0] is the verb's own name; options may stand anywhere among the operands. Each
 * returns the process exit code. */
int cmd_create(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_inspect(struct cli *cli, int argc, char **argv);
int cmd_rm(struct cli *cli, int argc, char **argv);
int cmd_lifecycle(struct cli *cli, int argc, char **argv); /* start stop restart pause resume */
int cmd_update(struct cli *cli, int argc, char **argv);
int cmd_net(struct cli *cli, int argc, char **argv);
int cmd_port(struct cli *cli, int argc, char **argv);
int cmd_token(struct cli *cli, int argc, char **argv); /* cmd_token.c: API tokens */
int cmd_exec(struct cli *cli, int argc, char **argv);
int cmd_shell(struct cli *cli, int argc, char **argv); /* interactive terminal: tty_session.c */
int cmd_ps(struct cli *cli, int argc, char **argv); /* background processes: cmd_procs.c */
int cmd_logs(struct cli *cli, int argc, char **argv);
int cmd_kill(struct cli *cli, int argc, char **argv);
int cmd_wait(struct cli *cli, int argc, char **argv);
int cmd_forget(struct cli *cli, int argc, char **argv);
int cmd_cp(struct cli *cli, int argc, char **argv);
int cmd_watch(struct cli *cli, int argc, char **argv);
int cmd_image(struct cli *cli, int argc, char **argv);
int cmd_snapshot(struct cli *cli, int argc, char **argv); /* cmd_snapshot.c: snapshots, */
int cmd_restore(struct cli *cli, int argc, char **argv);  /* restore, fork, commit */
int cmd_fork(struct cli *cli, int argc, char **argv);
int cmd_commit(struct cli *cli, int argc, char **argv);
int cmd_system(struct cli *cli, int argc, char **argv);
int cmd_daemon(struct cli *cli, int argc, char **argv);
int cmd_stats(struct cli *cli, int argc, char **argv); /* cmd_stats.c */
int cmd_audit(struct cli *cli, int argc, char **argv);
int cmd_events(struct cli *cli, int argc, char **argv);
