#include "lib/websocket.h"
#include "lib/base64.h"
#include "lib/util.h"

#include <nettle/sha1.h>
#include <sys/random.h>

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
