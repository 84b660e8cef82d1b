/* Unit tests of src/lib/imageref.c: Docker's reading of image references, default names. */
#include "lib/imageref.h"
#include "lib/util.h"
#include "unit.h"

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void check(const char *in, const char *registry, const char *repo, const char *tag,
                  const char *digest, bool loopback, const char *name)
{
        struct image_ref r;
        char why[256] = "", n[64] = "";
        int k = image_ref_parse(in, &r, why, sizeof(why));
        CHECK_EQ_INT(k, 0);
        if (k < 0) {
                fprintf(stderr, "  %s: %s\n", in, why);
                return;
        }
        CHECK_EQ_STR(r.registry, registry);
        CHECK_EQ_STR(r.repository, repo);
        CHECK_EQ_STR(r.tag, tag);
        CHECK_EQ_STR(r.digest, digest);
        CHECK_EQ_INT(r.loopback, loopback);
        CHECK_EQ_INT(image_ref_default_name(&r, n, sizeof(n)), 0);
        CHECK_EQ_STR(n, name);
}

static void test_imageref__docker_rules(void)
{
        const char *hub = "registry-1.docker.io";
        check("debian", hub, "library/debian", "latest", "", false, "debian-latest");
        check("debian:bookworm", hub, "library/debian", "bookworm", "", false, "debian-bookworm");
        check("docker.io/library/debian:12", hub, "library/debian", "12", "", false, "debian-12");
        check("user/app", hub, "user/app", "latest", "", false, "app-latest");
        check("ghcr.io/o/r:v1.2", "ghcr.io", "o/r", "v1.2", "", false, "r-v1.2");
        check("127.0.0.1:5000/t/busybox", "127.0.0.1:5000", "t/busybox", "latest", "", true,
              "busybox-latest");
        check("localhost/x:y", "localhost", "x", "y", "", true, "x-y");
        check("[::1]:5000/a/b_c__d-e.f:T_1", "[::1]:5000", "a/b_c__d-e.f", "T_1", "", true,
              "b_c__d-e.f-T_1");
        check("quay.io/a/b@sha256:" D64, "quay.io", "a/b", "", "sha256:" D64, false,
              "b-0123456789ab");
        check("debian:12@sha256:" D64, hub, "library/debian", "12", "sha256:" D64, false,
              "debian-12");
}

static void test_imageref__refused(void)
{
        static const char *const bad[] = {
            "",
            "UPPER",
            "a:b:c",
            "debian@sha256:0123",
            "debian@md5:" D64,
            "x/../y",
            "a//b",
            "a/",
            "/a",
            "debian:-tag",
            "debian:.tag",
            "host:99999/x",
            "host:0/x",
            "-x",
            "a_",
            "a___b",
            "ho st/x",
            "[zz]:5/x",
            "debian:",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct image_ref r;
                char why[256] = "";
                int k = image_ref_parse(bad[i], &r, why, sizeof(why));
                if (k != -EINVAL)
                        fprintf(stderr, "  accepted: '%s'\n", bad[i]);
                CHECK_EQ_INT(k, -EINVAL);
                CHECK(why[0] != 0);
        }
        /* A name longer than an image name may be. */
        struct image_ref r;
        char why[64], n[64];
        CHECK_EQ_INT(
            image_ref_parse(
                "a/"
                "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                &r, why, sizeof(why)),
            0);
        CHECK_EQ_INT(image_ref_default_name(&r, n, sizeof(n)), -EINVAL);
}

static void test_imageref__loopback(void)
{
        static const char *const yes[] = {"localhost",    "localhost:5000", "127.0.0.1",
                                          "127.1.2.3:80", "[::1]",          "[::1]:5000"};
        static const char *const no[] = {"localhost.example.com",
                                         "127.0.0.1.example.com",
                                         "128.0.0.1",
                                         "10.0.0.1:5000",
                                         "[::2]",
                                         "example.com",
                                         "127.0.0.256",
                                         "[::ffff:1.2.3.4]"};
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                CHECK(image_host_is_loopback(yes[i]));
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (image_host_is_loopback(no[i])) {
                        fprintf(stderr, "  loopback: %s\n", no[i]);
                        unit_failures++;
                }
}

/* FIPS 180-2 test vectors, through nettle. */
static void test_imageref__sha256(void)
{
        char d[72];
        image_digest_of("abc", 3, d);
        CHECK_EQ_STR(d, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        image_digest_of("", 0, d);
        CHECK_EQ_STR(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        image_digest_of(two, strlen(two), d);
        CHECK_EQ_STR(d, "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        CHECK(image_digest_valid(d));
}

int main(void)
{
        RUN(test_imageref__sha256);
        RUN(test_imageref__loopback);
        RUN(test_imageref__docker_rules);
        RUN(test_imageref__refused);
        UNIT_EXIT();
}
