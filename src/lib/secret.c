#include "lib/secret.h"
#include "lib/util.h"

#include <ctype.h>
#include <nettle/base64.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <sys/random.h>

int secret_new(char ret[static SECRET_LEN + 1])
{
        uint8_t raw[32];
        size_t got = 0;
        while (got < sizeof(raw)) {
                ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t)n;
        }
        char enc[BASE64_ENCODE_LENGTH(sizeof(raw)) + BASE64_ENCODE_FINAL_LENGTH + 1];
        struct base64_encode_ctx ctx;
        base64url_encode_init(&ctx);
        size_t n = base64_encode_update(&ctx, enc, sizeof(raw), raw);
        n += base64_encode_final(&ctx, enc + n);
        while (n && enc[n - 1] == '=')
                n--; /* 32 bytes: 43 characters and one pad, which carries nothing */
        explicit_bzero(raw, sizeof(raw));
        if (n != SECRET_LEN - 4)
                return -EINVAL;
        memcpy(ret, SECRET_PREFIX, 4);
        memcpy(ret + 4, enc, n);
        ret[SECRET_LEN] = 0;
        explicit_bzero(enc, sizeof(enc));
        return 0;
}

bool secret_format_ok(const char *s)
{
        if (strncmp(s, SECRET_PREFIX, 4) != 0 || strlen(s) != SECRET_LEN)
                return false;
        for (const char *p = s + 4; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_'))
                        return false;
        return true;
}

void secret_hash_hex(const char *secret, size_t len, char ret[static SECRET_HASH_HEX + 1])
{
        static const char hex[] = "0123456789abcdef";
        struct sha256_ctx ctx;
        uint8_t d[SHA256_DIGEST_SIZE];
        sha256_init(&ctx);
        sha256_update(&ctx, len, (const uint8_t *)secret);
        sha256_digest(&ctx, sizeof(d), d);
        for (size_t i = 0; i < sizeof(d); i++) {
                ret[2 * i] = hex[d[i] >> 4];
                ret[2 * i + 1] = hex[d[i] & 15];
        }
        ret[SECRET_HASH_HEX] = 0;
}

bool secret_hash_equal(const char *a, const char *b)
{
        return strlen(a) == SECRET_HASH_HEX && strlen(b) == SECRET_HASH_HEX &&
               memeql_sec(a, b, SECRET_HASH_HEX);
}
