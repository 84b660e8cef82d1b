/* The WebSocket frame path as paddockd runs it: a wslay server context whose recv and send
 * callbacks are lib/websocket.c's ws_io_recv / ws_io_send, fed the input as the bytes that
 * followed the HTTP head (ws_io's read-ahead), then the end of the connection. Text and binary
 * messages are echoed back (ws_queue_msg), as an exec session's stdin/stdout would be. */
#include "fuzz.h"
#include "lib/websocket.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *user)
{
        return ws_io_recv(user, ctx, buf, len);
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *user)
{
        return ws_io_send(user, ctx, data, len, flags);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                   void *user)
{
        if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
                (void)ws_queue_msg(ctx, arg->opcode, arg->msg, arg->msg_length);
}

static void drain(int fd)
{
        char buf[4096];
        while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
                ;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        struct ws_io io;
        if (ws_io_init(&io, sv[0], data, size) < 0)
                abort();
        struct wslay_event_callbacks cb = {
            .recv_callback = on_recv,
            .send_callback = on_send,
            .genmask_callback = ws_genmask,
            .on_msg_recv_callback = on_msg,
        };
        wslay_event_context_ptr ctx;
        if (wslay_event_context_server_init(&ctx, &cb, &io) != 0)
                abort();
        wslay_event_config_set_max_recv_msg_length(ctx, 1u << 20);
        /* Read everything that was sent, answering as we go; the peer then closes. */
        for (int round = 0; round < 64 && wslay_event_want_read(ctx); round++) {
                if (wslay_event_recv(ctx) != 0)
                        break;
                if (wslay_event_want_write(ctx) && wslay_event_send(ctx) != 0)
                        break;
                drain(sv[1]);
                if (!ws_io_has_extra(&io))
                        shutdown(sv[1], SHUT_WR);
        }
        wslay_event_context_free(ctx);
        ws_io_done(&io);
        close(sv[0]);
        close(sv[1]);
        return 0;
}
