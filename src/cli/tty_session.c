/* The client end of a terminal session: local terminal in raw mode, keys up as binary frames,
 * screen output down as binary frames, SIGWINCH as {"resize":...}, the last text frame's
 * exit_code as our exit code.
 *
 * Raw mode means Ctrl-C, Ctrl-D, Ctrl-Z reach the environment's pty as bytes and act there.
 * The terminal is restored on every way out: normal end, error, and the signals that end us
 * (taken through a signalfd, so no handler runs at a bad moment); only SIGKILL can leave it
 * raw, as with ssh. */
#include "cli/tty_session.h"
#include "cli/envpath.h"
#include "cli/opts.h"
#include "cli/wsclient.h"
#include "lib/util.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>

#define STDIN_CHUNK      4096
#define SEND_QUEUE_PAUSE (1u << 20) /* stop reading keys while this much waits to go out */

struct session {
        struct wsc ws;
        bool have_exit, failed;
        int exit_code;
};

static struct termios saved_termios;
static bool termios_saved;

static void restore_terminal(void)
{
        if (termios_saved) {
                tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
                termios_saved = false;
        }
}

static int enter_raw_mode(void)
{
        struct termios t;
        if (tcgetattr(STDIN_FILENO, &t) < 0)
                return -errno;
        saved_termios = t;
        termios_saved = true;
        atexit(restore_terminal);
        cfmakeraw(&t);
        if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) < 0) {
                termios_saved = false;
                return -errno;
        }
        return 0;
}

static bool window_size(unsigned *cols, unsigned *rows)
{
        struct winsize ws;
        int fds[] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (ioctl(fds[i], TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
                        *cols = ws.ws_col;
                        *rows = ws.ws_row;
                        return true;
                }
        return false;
}

/* Leave the screen on a fresh line before we print anything of our own. */
static void say(const char *msg)
{
        if (termios_saved)
                fputs("\r\n", stderr);
        fprintf(stderr, "paddock: %s\n", msg);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user)
{
        struct session *s = user;
        if (arg->opcode == WSLAY_BINARY_FRAME) {
                if (write_all(STDOUT_FILENO, arg->msg, arg->msg_length) < 0)
                        s->failed = true;
                return;
        }
        if (arg->opcode != WSLAY_TEXT_FRAME)
                return;
        json_t *j = json_loadb((const char *)arg->msg, arg->msg_length, 0, NULL);
        json_t *code = json_object_get(j, "exit_code");
        const char *err =
            json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        if (json_is_integer(code)) {
                json_int_t c = json_integer_value(code);
                s->have_exit = true;
                s->exit_code = c < 0 || c > 255 ? 255 : (int)c;
                if (json_is_true(json_object_get(j, "timed_out")))
                        say("the session timed out");
        } else if (err) {
                say(err);
        }
        json_decref(j);
}

static void send_resize(struct session *s)
{
        unsigned cols, rows;
        if (window_size(&cols, &rows))
                wsc_send_json(&s->ws, json_pack("{s:{s:i,s:i}}", "resize", "cols", (int)cols,
                                                "rows", (int)rows));
}

/* -1 when the session must end. */
static int pump(struct session *s, short revents)
{
        wslay_event_context_ptr ctx = s->ws.ctx;
        if ((revents & (POLLIN | POLLHUP | POLLERR)) || transport_pending(&s->ws.conn))
                if (wslay_event_recv(ctx) != 0)
                        return -1;
        if (wslay_event_send(ctx) != 0)
                return -1;
        if (s->failed)
                return -1;
        return wslay_event_want_read(ctx) || wslay_event_want_write(ctx) ? 0 : -1;
}

static int session_loop(struct session *s, bool forward_stdin, int sfd)
{
        bool stdin_open = forward_stdin;
        for (;;) {
                bool paused = wslay_event_get_queued_msg_length(s->ws.ctx) > SEND_QUEUE_PAUSE;
                struct pollfd p[3] = {
                    {.fd = s->ws.conn.fd,
                     .events = (short)(POLLIN | (wslay_event_want_write(s->ws.ctx) ? POLLOUT : 0))},
                    {.fd = sfd, .events = POLLIN},
                    {.fd = stdin_open && !paused ? STDIN_FILENO : -1, .events = POLLIN},
                };
                /* Bytes already read (a TLS record's rest) are not announced by poll. */
                if (poll(p, 3, transport_pending(&s->ws.conn) ? 0 : -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -1;
                }
                if (p[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                                if (si.ssi_signo == SIGWINCH)
                                        send_resize(s);
                                else
                                        return 128 + (int)si.ssi_signo;
                        }
                }
                if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
                        char buf[STDIN_CHUNK];
                        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                        if (n > 0)
                                wsc_send(&s->ws, WSLAY_BINARY_FRAME, buf, (size_t)n);
                        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
                                stdin_open = false; /* our terminal is gone */
                }
                if (pump(s, p[0].revents) < 0)
                        return -1;
        }
}

int tty_session_run(struct cli *cli, const char *name, json_t *spec, bool forward_stdin)
{
        if (forward_stdin && !isatty(STDIN_FILENO)) {
                fprintf(stderr, "paddock: standard input is not a terminal (a terminal session "
                                "needs one; use exec -i without -t to pipe input)\n");
                return EXIT_USAGE;
        }
        unsigned cols, rows;
        if (window_size(&cols, &rows)) {
                json_object_set_new(spec, "cols", json_integer(cols));
                json_object_set_new(spec, "rows", json_integer(rows));
        }
        const char *term = getenv("TERM");
        if (term && *term) {
                json_t *env = json_child(spec, "env");
                if (env && !json_object_get(env, "TERM"))
                        json_object_set_new(env, "TERM", json_string(term));
        }
        struct client *client = cli_client(cli);
        if (!client)
                return EXIT_FAIL;
        char *text = json_dumps(spec, JSON_COMPACT);
        char *q = text ? client_escape(client, text) : NULL;
        char *query = NULL, *path = NULL;
        if (q && asprintf(&query, "spec=%s", q) >= 0)
                path = env_path(client, name, "exec/ws", query);
        free(text);
        free(q);
        free(query);
        if (!path) {
                fprintf(stderr, "paddock: out of memory\n");
                return EXIT_FAIL;
        }

        /* Signals that end us, and SIGWINCH, arrive through a signalfd. */
        sigset_t mask, old;
        sigemptyset(&mask);
        sigaddset(&mask, SIGWINCH);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGQUIT);
        sigprocmask(SIG_BLOCK, &mask, &old);
        signal(SIGPIPE, SIG_IGN);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

        struct session s = {.ws.conn.fd = -EBADF};
        static const struct wslay_event_callbacks cb = {.on_msg_recv_callback = on_msg};
        int r = EXIT_FAIL;
        if (sfd < 0) {
                fprintf(stderr, "paddock: signalfd: %s\n", strerror(errno));
                goto out;
        }
        if (wsc_open(client, path, &cb, &s, &s.ws) < 0)
                goto out;
        if (forward_stdin) {
                int e = enter_raw_mode();
                if (e < 0) {
                        fprintf(stderr, "paddock: cannot put the terminal in raw mode: %s\n",
                                strerror(-e));
                        goto out;
                }
        }
        int end = session_loop(&s, forward_stdin, sfd);
        restore_terminal();
        if (s.have_exit)
                r = s.exit_code;
        else if (end > 0)
                r = end; /* a signal ended us; closing the connection hangs the session up */
        else
                fprintf(stderr, "paddock: the session ended without an exit code (connection "
                                "to paddockd lost)\n");
out:
        restore_terminal();
        wsc_close(&s.ws);
        if (sfd >= 0)
                close(sfd);
        sigprocmask(SIG_SETMASK, &old, NULL);
        free(path);
        return r;
}
