#include "lib/websocket.h"
#include "lib/base64.h"
#include "lib/util.h"

#include <nettle/sha1.h>
#include <sys/random.h>
#include <sys/socket.h>

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

bool ws_key_valid(const char *key)
{
        if (!key || strlen(key) != WS_KEY_LEN)
                return false;
        unsigned char raw[WS_KEY_LEN];
        return base64_decode(key, WS_KEY_LEN, raw) == 16;
}

void ws_accept_for(const char *key, char out[WS_ACCEPT_LEN + 1])
{
        struct sha1_ctx ctx;
        uint8_t digest[SHA1_DIGEST_SIZE];
        sha1_init(&ctx);
        sha1_update(&ctx, strlen(key), (const uint8_t *)key);
        sha1_update(&ctx, sizeof(ws_guid) - 1, (const uint8_t *)ws_guid);
        sha1_digest(&ctx, sizeof(digest), digest);
        base64_encode(digest, sizeof(digest), out);
}

int ws_key_new(char out[WS_KEY_LEN + 1])
{
        unsigned char raw[16];
        if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
                return -EIO;
        base64_encode(raw, sizeof(raw), out);
        return 0;
}

int ws_io_init(struct ws_io *io, int fd, const void *extra, size_t extra_len)
{
        *io = (struct ws_io){.fd = fd};
        if (extra_len == 0)
                return 0;
        io->extra = malloc(extra_len);
        if (!io->extra)
                return -ENOMEM;
        memcpy(io->extra, extra, extra_len);
        io->extra_len = extra_len;
        return 0;
}

void ws_io_done(struct ws_io *io)
{
        free(io->extra);
        io->extra = NULL;
        io->extra_len = io->extra_off = 0;
}

bool ws_io_has_extra(const struct ws_io *io)
{
        return io->extra_off < io->extra_len;
}

/* After a failed recv/send: tell wslay whether to come back later or give up. */
static ssize_t io_failed(wslay_event_context_ptr ctx, bool would_block)
{
        wslay_event_set_error(ctx, would_block ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

ssize_t ws_io_recv(struct ws_io *io, wslay_event_context_ptr ctx, uint8_t *buf, size_t len)
{
        if (ws_io_has_extra(io))
                return (ssize_t)take_pending(buf, len, io->extra, io->extra_len, &io->extra_off);
        ssize_t n;
        do
                n = recv(io->fd, buf, len, MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return io_failed(ctx, errno == EAGAIN || errno == EWOULDBLOCK);
        if (n == 0)
                return io_failed(ctx, false); /* the peer is gone */
        return n;
}

ssize_t ws_io_send(struct ws_io *io, wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
                   int flags)
{
        ssize_t n;
        do
                n = send(io->fd, data, len,
                         MSG_NOSIGNAL | MSG_DONTWAIT | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0));
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return io_failed(ctx, errno == EAGAIN || errno == EWOULDBLOCK);
        return n;
}

int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
        return getrandom(buf, len, 0) == (ssize_t)len ? 0 : -1;
}

int ws_queue_msg(wslay_event_context_ptr ctx, int opcode, const void *buf, size_t len)
{
        struct wslay_event_msg m = {.opcode = (uint8_t)opcode, .msg = buf, .msg_length = len};
        return wslay_event_queue_msg(ctx, &m) == 0 ? 0 : -ENOMEM;
}
