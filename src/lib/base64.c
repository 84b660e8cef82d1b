#include "lib/base64.h"

#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_size(size_t len)
{
        return (len + 2) / 3 * 4 + 1;
}

size_t base64_encode(const void *data, size_t len, char *out)
{
        const unsigned char *in = data;
        char *o = out;
        size_t i = 0;
        for (; i + 3 <= len; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
                *o++ = alphabet[v >> 18];
                *o++ = alphabet[(v >> 12) & 63];
                *o++ = alphabet[(v >> 6) & 63];
                *o++ = alphabet[v & 63];
        }
        if (i < len) {
                uint32_t v = (uint32_t)in[i] << 16;
                if (i + 1 < len)
                        v |= (uint32_t)in[i + 1] << 8;
                *o++ = alphabet[v >> 18];
                *o++ = alphabet[(v >> 12) & 63];
                *o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
                *o++ = '=';
        }
        *o = 0;
        return (size_t)(o - out);
}

static int value_of(char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

long base64_decode(const char *in, size_t len, unsigned char *out)
{
        /* Padding only at the end, at most two, and only to complete a 4-character group;
         * unpadded input is accepted too. */
        size_t pad = 0;
        while (len > 0 && in[len - 1] == '=' && pad < 3) {
                len--;
                pad++;
        }
        if (pad > 2 || len % 4 == 1 || (pad && (len + pad) % 4 != 0) ||
            (pad && len % 4 == 0))
                return -1;
        size_t n = 0;
        uint32_t acc = 0;
        int bits = 0;
        for (size_t i = 0; i < len; i++) {
                int v = value_of(in[i]);
                if (v < 0)
                        return -1;
                acc = acc << 6 | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (unsigned char)(acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        return (long)n;
}
