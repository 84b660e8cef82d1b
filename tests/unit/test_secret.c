/* lib/secret: token secrets, their SHA-256 and the constant-time comparison. */
#include "lib/secret.h"
#include "unit.h"

#include <string.h>

static void test_secret_new__format_and_uniqueness(void)
{
        char a[SECRET_LEN + 1], b[SECRET_LEN + 1];
        CHECK_EQ_INT(secret_new(a), 0);
        CHECK_EQ_INT(secret_new(b), 0);
        CHECK_EQ_INT((long long)strlen(a), SECRET_LEN);
        CHECK(strncmp(a, "pdk_", 4) == 0);
        CHECK(secret_format_ok(a));
        CHECK(strcmp(a, b) != 0);
        CHECK(strspn(a + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
              SECRET_LEN - 4);
}

static void test_secret_format_ok__rejects(void)
{
        CHECK(!secret_format_ok(""));
        CHECK(!secret_format_ok("pdk_"));
        CHECK(!secret_format_ok("pdk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));   /* 42 */
        CHECK(!secret_format_ok("pdk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")); /* 44 */
        CHECK(!secret_format_ok("xyz_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
        CHECK(!secret_format_ok("pdk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="));
        CHECK(!secret_format_ok("pdk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+"));
        CHECK(secret_format_ok("pdk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-"));
}

static void test_secret_hash_hex__known_values(void)
{
        char h[SECRET_HASH_HEX + 1];
        secret_hash_hex("abc", 3, h);
        CHECK_EQ_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        secret_hash_hex("", 0, h);
        CHECK_EQ_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_secret_hash_equal__only_whole_hashes(void)
{
        char a[SECRET_HASH_HEX + 1], b[SECRET_HASH_HEX + 1];
        secret_hash_hex("one", 3, a);
        secret_hash_hex("two", 3, b);
        CHECK(secret_hash_equal(a, a));
        CHECK(!secret_hash_equal(a, b));
        char c[SECRET_HASH_HEX + 1];
        memcpy(c, a, sizeof(c));
        c[SECRET_HASH_HEX - 1] ^= 1;
        CHECK(!secret_hash_equal(a, c));
        CHECK(!secret_hash_equal(a, ""));
        CHECK(!secret_hash_equal("", ""));
}

int main(void)
{
        RUN(test_secret_new__format_and_uniqueness);
        RUN(test_secret_format_ok__rejects);
        RUN(test_secret_hash_hex__known_values);
        RUN(test_secret_hash_equal__only_whole_hashes);
        UNIT_EXIT();
}
