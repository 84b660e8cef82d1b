/* POST /mcp: the Model Context Protocol over its streamable HTTP transport, served by paddockd
 * itself (through the gateway's TLS listener, or on the local socket). The tools, their schemas
 * and the JSON-RPC side are `paddock mcp`'s own (src/lib/mcp*.c): both list and answer the same.
 *
 * The transport, stateless: a POST carries one JSON-RPC message (or, for revisions before
 * 2025-06-18, a batch of them); requests are answered with one application/json body (no event
 * stream), a POST of only notifications or responses with 202 and no body. No Mcp-Session-Id
 * (the spec lets a server keep no sessions), so GET (a server-initiated stream) and DELETE are
 * 405 by the route table. A request whose Origin is not the host it was sent to (or loopback)
 * is refused: a web page must not reach the API through a browser (DNS rebinding).
 *
 * Who calls: the route table has resolved the caller before this runs (a token, required on
 * the gateway). Each tool call is made of one or two ordinary API requests (docs/API.md), and
 * each of those is handed to this daemon's own HTTP server, the one the POST came to, over a
 * socketpair with the POST's own Authorization (and Paddock-Peer) header: the same route
 * table, token check, ownership (another token's environment is a 404), quotas, audit records
 * and metrics as a REST call of that client, nothing bypassed.
 *
 * The daemon is one thread around an event loop and a tool call waits for its API answers, so
 * each POST runs in a coroutine (ucontext) with a stack of its own: the shared tool code calls
 * the backend as if it blocked, the backend hands the request to the loop and switches back;
 * the loop resumes the coroutine with the answer. Only the loop's side touches the loop, the
 * HTTP server and the request. */
#include "daemon/api.h"
#include "daemon/http.h"
#include "daemon/log.h"
#include "lib/http1.h"
#include "lib/jsonutil.h"
#include "lib/mcp.h"
#include "lib/strbuf.h"
#include "lib/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <ucontext.h>
#include <unistd.h>

/* The tool code and jansson need little; the guard page below it turns an overflow into a
 * crash rather than a corruption. Pages are touched only as used (a few KiB each), and there is
 * at most one job per open connection, so the HTTP servers' connection limits bound them. */
#define STACK_SIZE (256u << 10)
/* An API answer a tool reads whole (read_file, a process's output) is at most this big. */
#define ANSWER_MAX (64u << 20)

enum job_op {
        OP_NONE,
        OP_REQUEST, /* an API request: req -> resp */
        OP_SLEEP,
};

struct mcp_job {
        struct request *r; /* the POST; NULL once it is over (the client went away) */
        struct loop *loop;
        struct http_server *srv;
        char *authorization; /* passed on as it came; NULL: none (the local administrator) */
        char *peer;          /* Paddock-Peer of a gateway request */
        json_t *msg;         /* the body: one message, or a batch */
        json_t *reply;       /* the answer: a message, an array, or NULL (202) */
        bool finished;

        ucontext_t loop_ctx, job_ctx;
        void *stack; /* mmap'd, STACK_SIZE plus a guard page */

        /* What the coroutine waits for, and its outcome. */
        enum job_op op;
        const struct mcp_request *req; /* on the coroutine's stack */
        struct mcp_response *resp;
        int result;
        char *why;
        unsigned sleep_ms;

        /* The API request in flight. */
        int fd;
        struct loop_source *src;
        char *out;
        size_t out_len, out_off;
        struct http1 parser;
        struct strbuf body;
        struct loop_timer *timer;
};

static void job_resume(struct mcp_job *j);

static size_t guard_size(void)
{
        return (size_t)sysconf(_SC_PAGESIZE);
}

/* ------------------------------------------------------------------ the coroutine's side */

/* makecontext passes only ints: the job starting is handed over here. */
static struct mcp_job *job_starting;

/* Switch to the loop until the operation set in j is done. */
static void job_wait(struct mcp_job *j)
{
        swapcontext(&j->job_ctx, &j->loop_ctx);
}

static int job_perform(void *data, const struct mcp_request *req, struct mcp_response *ret,
                       char **ret_why)
{
        struct mcp_job *j = data;
        if (!j->r) {
                *ret_why = strdup("the MCP client went away");
                return -1;
        }
        j->op = OP_REQUEST;
        j->req = req;
        j->resp = ret;
        j->result = 0;
        job_wait(j);
        if (j->result < 0) {
                *ret_why = TAKE_PTR(j->why);
                return -1;
        }
        return 0;
}

static void job_sleep(void *data, unsigned ms)
{
        struct mcp_job *j = data;
        if (!j->r)
                return;
        j->op = OP_SLEEP;
        j->sleep_ms = ms;
        job_wait(j);
}

static void job_main(void)
{
        struct mcp_job *j = job_starting;
        struct mcp_server s = {
            .backend = {.perform = job_perform, .sleep_ms = job_sleep, .data = j}};
        if (json_is_array(j->msg)) {
                json_t *replies = json_array();
                size_t i;
                json_t *m;
                json_array_foreach(j->msg, i, m)
                {
                        json_t *one = mcp_server_handle_message(&s, m);
                        if (one && replies)
                                json_array_append_new(replies, one);
                        else
                                json_decref(one);
                }
                if (replies && json_array_size(replies) == 0)
                        json_decref(TAKE_PTR(replies));
                j->reply = replies;
        } else {
                j->reply = mcp_server_handle_message(&s, j->msg);
        }
        j->finished = true;
        /* returning switches to uc_link: the loop's side */
}

/* ------------------------------------------------------------------ the loop's side */

static void job_free(struct mcp_job *j)
{
        if (j->stack)
                munmap(j->stack, STACK_SIZE + guard_size());
        json_decref(j->msg);
        json_decref(j->reply);
        free(j->authorization);
        free(j->peer);
        free(j->why);
        free(j);
}

/* The POST is over (answered, or its client gone). */
static void job_request_gone(void *data)
{
        struct mcp_job *j = data;
        j->r = NULL;
        if (j->finished)
                job_free(j);
}

static bool has_request(const json_t *msg)
{
        if (!json_is_array(msg))
                return mcp_is_request(msg);
        size_t i;
        json_t *m;
        json_array_foreach(msg, i, m) if (mcp_is_request(m)) return true;
        return false;
}

/* The coroutine has returned: answer the POST (if it is still there). */
static void job_finish(struct mcp_job *j)
{
        munmap(j->stack, STACK_SIZE + guard_size());
        j->stack = NULL;
        if (!j->r) {
                job_free(j);
                return;
        }
        struct request *r = j->r;
        if (!j->reply) {
                http_reply_empty(r, 202); /* frees j through job_request_gone, now or later */
                return;
        }
        /* A body without requests that could not be taken (not JSON-RPC) is an HTTP error. */
        unsigned status = has_request(j->msg) ? 200 : 400;
        http_reply_json(r, status, TAKE_PTR(j->reply));
}

/* The API request is over: hand its outcome to the coroutine. */
static void request_over(struct mcp_job *j, int result, const char *why)
{
        loop_remove(j->src);
        j->src = NULL;
        if (j->fd >= 0)
                close(j->fd);
        j->fd = -1;
        free(j->out);
        j->out = NULL;
        if (result >= 0) {
                char *body = j->body.data ? j->body.data : strdup("");
                *j->resp = (struct mcp_response){
                    .status = j->parser.status,
                    .body = body,
                    .len = j->body.len,
                    .json = body ? json_loadb(body, j->body.len, 0, NULL) : NULL,
                };
                if (!body) {
                        result = -1;
                        why = "out of memory";
                }
                j->body = (struct strbuf){0}; /* the answer's now */
        }
        strbuf_free(&j->body);
        http1_done(&j->parser);
        j->result = result;
        if (result < 0) {
                free(j->why);
                j->why = strdup(why);
        }
        job_resume(j);
}

static int take_body(const char *data, size_t len, void *userdata)
{
        struct mcp_job *j = userdata;
        if (j->body.len + len > ANSWER_MAX)
                return -E2BIG;
        if (strbuf_add(&j->body, data, len) < 0)
                return -ENOMEM;
        return 0;
}

static void on_answer_io(struct loop_source *s, int fd, uint32_t events, void *data)
{
        struct mcp_job *j = data;
        if (j->out_off < j->out_len && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                ssize_t n = send(fd, j->out + j->out_off, j->out_len - j->out_off, MSG_NOSIGNAL);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        request_over(j, -1, "paddockd's HTTP server closed the request");
                        return;
                }
                if (n > 0)
                        j->out_off += (size_t)n;
                if (j->out_off == j->out_len)
                        loop_set_events(s, EPOLLIN);
        }
        if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return;
        char buf[16384];
        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        /* The server closes after answering (Connection: close). */
                        if (http1_eof(&j->parser) == 0)
                                request_over(j, 0, NULL);
                        else
                                request_over(j, -1, "paddockd's answer was cut off");
                        return;
                }
                int r = http1_feed(&j->parser, buf, (size_t)n, take_body, j);
                if (r < 0) {
                        request_over(j, -1,
                                     r == -E2BIG ? "paddockd's answer is too large for a tool"
                                                 : "paddockd's answer is malformed");
                        return;
                }
                if (http1_complete(&j->parser)) {
                        request_over(j, 0, NULL);
                        return;
                }
        }
}

/* Hand the coroutine's API request to the server the POST came to. */
static int request_start(struct mcp_job *j)
{
        const struct mcp_request *q = j->req;
        http1_init(&j->parser);
        const char *ct = q->content_type ? q->content_type : "application/json";
        _cleanup_free_ char *head = NULL;
        if (asprintf(&head,
                     "%s %s HTTP/1.1\r\nHost: paddockd\r\n%s%s%s%s%s%s%s%s%sContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     q->method, q->path, j->authorization ? "Authorization: " : "",
                     j->authorization ? j->authorization : "", j->authorization ? "\r\n" : "",
                     j->peer ? "Paddock-Peer: " : "", j->peer ? j->peer : "", j->peer ? "\r\n" : "",
                     q->body ? "Content-Type: " : "", q->body ? ct : "", q->body ? "\r\n" : "",
                     q->body ? q->body_len : 0) < 0)
                return -ENOMEM;
        size_t head_len = strlen(head), body_len = q->body ? q->body_len : 0;
        j->out = malloc(head_len + body_len);
        if (!j->out)
                return -ENOMEM;
        memcpy(j->out, head, head_len);
        if (body_len)
                memcpy(j->out + head_len, q->body, body_len);
        j->out_len = head_len + body_len;
        j->out_off = 0;
        int fds[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0)
                return -errno;
        j->fd = fds[1];
        int r = http_server_add_connection(j->srv, fds[0], j->peer ? j->peer : "mcp");
        if (r < 0)
                return r;
        return loop_add_fd(j->loop, j->fd, EPOLLIN | EPOLLOUT, on_answer_io, j, &j->src);
}

static void on_slept(struct loop_timer *t, void *data)
{
        struct mcp_job *j = data;
        j->timer = NULL;
        job_resume(j);
}

/* Run the coroutine until it waits or ends, then start what it waits for. */
static void job_resume(struct mcp_job *j)
{
        j->op = OP_NONE;
        swapcontext(&j->loop_ctx, &j->job_ctx);
        if (j->finished) {
                job_finish(j);
                return;
        }
        switch (j->op) {
        case OP_REQUEST: {
                int r = request_start(j);
                if (r < 0) {
                        char why[128];
                        snprintf(why, sizeof(why), "cannot make an API request: %s", strerror(-r));
                        request_over(j, -1, why);
                }
                return;
        }
        case OP_SLEEP:
                j->timer = loop_add_timer(j->loop, j->sleep_ms, on_slept, j);
                if (!j->timer)
                        job_resume(j); /* no timer: carry on at once */
                return;
        case OP_NONE:
                break;
        }
        log_error("mcp: a tool call stopped without saying why");
}

/* ------------------------------------------------------------------ the route */

/* An Origin the POST may come from: none (not a browser), a loopback one, or the host the
 * request was sent to (the page of the server itself). */
static bool origin_ok(struct request *r)
{
        const char *origin = req_header(r, "Origin");
        if (!origin)
                return true;
        const char *host = strstr(origin, "://");
        if (!host)
                return false; /* "null": a sandboxed page, a file */
        host += 3;
        static const char *const loopback[] = {"127.0.0.1", "localhost", "[::1]"};
        for (size_t i = 0; i < ELEMENTSOF(loopback); i++) {
                size_t n = strlen(loopback[i]);
                if (strncmp(host, loopback[i], n) == 0 && (host[n] == 0 || host[n] == ':'))
                        return true;
        }
        const char *to = req_header(r, "Host");
        return to && *to && strcasecmp(host, to) == 0;
}

static void refuse(struct request *r, unsigned status, int code, const char *message)
{
        http_reply_json(r, status, mcp_error(NULL, code, message));
}

void api_mcp(struct request *r, struct engine *e)
{
        if (!origin_ok(r)) {
                refuse(r, 403, MCP_INVALID_REQUEST, "Origin not allowed");
                return;
        }
        const char *version = req_header(r, "MCP-Protocol-Version");
        if (version && !mcp_version_known(version)) {
                refuse(r, 400, MCP_INVALID_REQUEST, "unsupported MCP-Protocol-Version");
                return;
        }
        const char *ct = req_header(r, "Content-Type");
        if (!ct || strncasecmp(ct, "application/json", 16) != 0) {
                refuse(r, 415, MCP_INVALID_REQUEST, "Content-Type must be application/json");
                return;
        }
        size_t len = 0;
        const char *text = req_body(r, &len);
        json_error_t err;
        json_t *msg = json_loadb(text ? text : "", len, JSON_DECODE_ANY, &err);
        if (!msg) {
                char why[200];
                snprintf(why, sizeof(why), "parse error: %s (line %d, column %d)", err.text,
                         err.line, err.column);
                refuse(r, 400, MCP_PARSE_ERROR, why);
                return;
        }
        if (json_is_array(msg) &&
            (json_array_size(msg) == 0 || (version && strcmp(version, "2025-03-26") != 0 &&
                                           strcmp(version, "2024-11-05") != 0))) {
                json_decref(msg);
                refuse(r, 400, MCP_INVALID_REQUEST,
                       json_array_size(msg) ? "batches are not part of this MCP revision"
                                            : "an empty batch");
                return;
        }
        struct mcp_job *j = calloc(1, sizeof(*j));
        const char *auth = req_header(r, "Authorization");
        size_t stack_len = STACK_SIZE + guard_size();
        void *stack = mmap(NULL, stack_len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (!j || stack == MAP_FAILED) {
                free(j);
                if (stack != MAP_FAILED)
                        munmap(stack, stack_len);
                json_decref(msg);
                http_reply_errno(r, -ENOMEM, "mcp");
                return;
        }
        /* The lowest page is the guard (stacks grow down on every architecture we build for). */
        mprotect(stack, guard_size(), PROT_NONE);
        *j = (struct mcp_job){
            .r = r,
            .loop = engine_loop(e),
            .srv = req_server(r),
            .authorization = auth ? strdup(auth) : NULL,
            .peer = req_from_gateway(r) && req_header(r, "Paddock-Peer")
                        ? strdup(req_header(r, "Paddock-Peer"))
                        : NULL,
            .msg = msg,
            .stack = stack,
            .fd = -1,
        };
        if ((auth && !j->authorization) || getcontext(&j->job_ctx) < 0) {
                job_free(j);
                http_reply_errno(r, -ENOMEM, "mcp");
                return;
        }
        j->job_ctx.uc_stack.ss_sp = (char *)stack + guard_size();
        j->job_ctx.uc_stack.ss_size = STACK_SIZE;
        j->job_ctx.uc_link = &j->loop_ctx;
        makecontext(&j->job_ctx, job_main, 0);
        req_on_free(r, job_request_gone, j);
        job_starting = j;
        job_resume(j);
        /* Unless it is answered already (no tool call, or one that failed at once), the answer
         * comes when the coroutine ends. */
        http_defer(r);
}
