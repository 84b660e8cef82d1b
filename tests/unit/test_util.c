/* Unit tests of src/lib/util.c, src/lib/base64.c and passwd_lookup() from src/lib/join.c: the
 * UTF-8 checks every exec output chunk goes through, the base64 codec of exec stdin/output, the
 * process identity (pid + start time), the fd sweep before exec, the tree removal that deletes
 * environments, the small file helpers, and the /etc/passwd reader that runs against a file
 * inside an environment (hostile input).
 *
 * Everything on disk lives in a temp dir under /var/tmp/paddock-unit-XXXXXX, removed at the end
 * of each test. Tests that change process-wide state (closing fds, mount namespaces, seccomp)
 * run in a forked child that reports through its exit status. */
#include "lib/base64.h"
#include "lib/join.h"
#include "lib/strbuf.h"
#include "lib/util.h"
#include "unit.h"

#include <ftw.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

static char tmp_root[256];

/* ---------------------------------------------------------------- fixtures */

static void tmp_setup(void)
{
        snprintf(tmp_root, sizeof(tmp_root), "/var/tmp/paddock-unit-XXXXXX");
        if (!mkdtemp(tmp_root)) {
                perror("mkdtemp");
                exit(2);
        }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        if (remove(path) < 0)
                fprintf(stderr, "  cleanup %s: %m\n", path);
        return 0;
}

/* Independent of rm_rf_at (which is under test): nftw, physical, depth first. */
static void tmp_teardown(void)
{
        if (tmp_root[0])
                nftw(tmp_root, rm_one, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        tmp_root[0] = 0;
}

static const char *pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *pathf(const char *fmt, ...)
{
        static char bufs[8][1024];
        static int next;
        char *b = bufs[next++ % 8];
        int n = snprintf(b, sizeof(bufs[0]), "%s/", tmp_root);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b + n, sizeof(bufs[0]) - (size_t)n, fmt, ap);
        va_end(ap);
        return b;
}

static void put(const char *path, const char *content, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write_all(fd, content, len) < 0) {
                fprintf(stderr, "  create %s: %m\n", path);
                exit(2);
        }
        close(fd);
}

static void put_str(const char *path, const char *content)
{
        put(path, content, strlen(content));
}

static bool exists(const char *path)
{
        struct stat st;
        return fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool is_dir(const char *path)
{
        struct stat st;
        return fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Contents of a file, "(missing)" when it cannot be read. */
static const char *slurp(const char *path)
{
        static char bufs[4][256];
        static int next;
        char *b = bufs[next++ % 4];
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return "(missing)";
        ssize_t n = read_full(fd, b, sizeof(bufs[0]) - 1);
        close(fd);
        b[n < 0 ? 0 : n] = 0;
        return b;
}

/* Run fn in a forked child; CHECK failures there turn into exit status 1. Returns the exit
 * status, or 128 + signal. */
static int in_child(void (*fn)(void *), void *arg)
{
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                perror("fork");
                exit(2);
        }
        if (pid == 0) {
                int before = unit_failures;
                fn(arg);
                _exit(unit_failures != before ? 1 : 0);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The functions under test get an exact-size heap copy, so ASan sees any read past len. */
static bool valid(const char *s, size_t len)
{
        char *copy = malloc(len ? len : 1);
        memcpy(copy, s, len);
        bool v = utf8_valid(copy, len);
        free(copy);
        return v;
}
#define VALID(lit) valid(lit, sizeof(lit) - 1)

static size_t whole(const char *s, size_t len)
{
        char *copy = malloc(len ? len : 1);
        memcpy(copy, s, len);
        size_t n = utf8_whole_prefix(copy, len);
        free(copy);
        return n;
}
#define WHOLE(lit) whole(lit, sizeof(lit) - 1)

/* ---------------------------------------------------------------- utf8_valid */

static void test_util_utf8_valid__ascii(void)
{
        CHECK(VALID(""));
        CHECK(VALID("hello, world\n"));
        CHECK(VALID("\x01\x7f"));
        /* len is honoured: the bytes after it are not looked at */
        CHECK(utf8_valid("ab\xff", 2));
}

static void test_util_utf8_valid__multibyte(void)
{
        CHECK(VALID("caf\xc3\xa9"));      /* é */
        CHECK(VALID("\xe2\x82\xac 5"));   /* € */
        CHECK(VALID("\xf0\x9f\x98\x80")); /* U+1F600, 4 bytes */
        CHECK(VALID("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z"));
        /* Boundaries of each length class. */
        CHECK(VALID("\xc2\x80"));         /* U+0080 */
        CHECK(VALID("\xdf\xbf"));         /* U+07FF */
        CHECK(VALID("\xe0\xa0\x80"));     /* U+0800 */
        CHECK(VALID("\xed\x9f\xbf"));     /* U+D7FF, just below the surrogates */
        CHECK(VALID("\xee\x80\x80"));     /* U+E000, just above */
        CHECK(VALID("\xef\xbf\xbf"));     /* U+FFFF */
        CHECK(VALID("\xf0\x90\x80\x80")); /* U+10000 */
        CHECK(VALID("\xf4\x8f\xbf\xbf")); /* U+10FFFF, the last code point */
}

static void test_util_utf8_valid__overlong(void)
{
        CHECK(!VALID("\xc0\xaf")); /* '/' in 2 bytes */
        CHECK(!VALID("\xc1\xbf"));
        CHECK(!VALID("\xc0\x80"));         /* "modified UTF-8" NUL */
        CHECK(!VALID("\xe0\x80\xaf"));     /* '/' in 3 bytes */
        CHECK(!VALID("\xe0\x9f\xbf"));     /* U+07FF in 3 bytes */
        CHECK(!VALID("\xf0\x80\x80\xaf")); /* '/' in 4 bytes */
        CHECK(!VALID("\xf0\x8f\xbf\xbf")); /* U+FFFF in 4 bytes */
        CHECK(!VALID("ok\xc0\xafok"));
}

static void test_util_utf8_valid__surrogates(void)
{
        CHECK(!VALID("\xed\xa0\x80"));             /* U+D800 */
        CHECK(!VALID("\xed\xbf\xbf"));             /* U+DFFF */
        CHECK(!VALID("\xed\xa0\xbd\xed\xb8\x80")); /* a CESU-8 pair */
}

static void test_util_utf8_valid__truncated(void)
{
        CHECK(!VALID("\xc3"));
        CHECK(!VALID("\xe2\x82"));
        CHECK(!VALID("\xe2"));
        CHECK(!VALID("\xf0\x9f\x98"));
        CHECK(!VALID("abc\xf0\x9f"));
        /* a valid sequence cut by len */
        CHECK(!valid("\xc3\xa9", 1));
        CHECK(!valid("\xf0\x9f\x98\x80", 3));
}

static void test_util_utf8_valid__bad_bytes(void)
{
        CHECK(!VALID("\x80")); /* lone continuation */
        CHECK(!VALID("a\xbfZ"));
        CHECK(!VALID("\xc3\x28")); /* lead + non-continuation */
        CHECK(!VALID("\xe2\x28\xa1"));
        CHECK(!VALID("\xe2\x82\x28"));
        CHECK(!VALID("\xf0\x9f\x98\x28"));
        /* above U+10FFFF and bytes that never occur */
        CHECK(!VALID("\xf4\x90\x80\x80"));
        CHECK(!VALID("\xf5\x80\x80\x80"));
        CHECK(!VALID("\xf7\xbf\xbf\xbf"));
        CHECK(!VALID("\xf8\x88\x80\x80\x80"));
        CHECK(!VALID("\xfc\x84\x80\x80\x80\x80"));
        CHECK(!VALID("\xfe"));
        CHECK(!VALID("\xff"));
}

static void test_util_utf8_valid__embedded_nul(void)
{
        CHECK(!valid("a\0b", 3));
        CHECK(!valid("\0", 1));
        CHECK(!valid("abc\0", 4));
}

/* ---------------------------------------------------------------- utf8_whole_prefix */

static void test_util_utf8_whole_prefix__complete(void)
{
        CHECK_EQ_INT(WHOLE(""), 0);
        CHECK_EQ_INT(WHOLE("abc"), 3);
        CHECK_EQ_INT(WHOLE("\xc3\xa9"), 2);
        CHECK_EQ_INT(WHOLE("\xe2\x82\xac"), 3);
        CHECK_EQ_INT(WHOLE("\xf0\x9f\x98\x80"), 4);
        CHECK_EQ_INT(WHOLE("a\xf0\x9f\x98\x80"), 5);
        CHECK_EQ_INT(WHOLE("\xe2\x82\xac\xc3\xa9"), 5);
}

static void test_util_utf8_whole_prefix__cuts_incomplete_tail(void)
{
        CHECK_EQ_INT(WHOLE("a\xc3"), 1);     /* 2-byte, 1 of 2 */
        CHECK_EQ_INT(WHOLE("a\xe2"), 1);     /* 3-byte, 1 of 3 */
        CHECK_EQ_INT(WHOLE("a\xe2\x82"), 1); /* 3-byte, 2 of 3 */
        CHECK_EQ_INT(WHOLE("a\xf0"), 1);     /* 4-byte, 1 of 4 */
        CHECK_EQ_INT(WHOLE("a\xf0\x9f"), 1);
        CHECK_EQ_INT(WHOLE("a\xf0\x9f\x98"), 1); /* 4-byte, 3 of 4 */
        CHECK_EQ_INT(WHOLE("\xc3"), 0);
        CHECK_EQ_INT(WHOLE("\xf0\x9f\x98"), 0);
        CHECK_EQ_INT(WHOLE("\xe2\x82\xac\xe2\x82"), 3);
}

static void test_util_utf8_whole_prefix__invalid_lead(void)
{
        /* Bytes that cannot start a sequence are not a sequence in progress: nothing is held
         * back (utf8_valid will reject the chunk and the caller encodes it as base64). */
        CHECK_EQ_INT(WHOLE("a\xff"), 2);
        CHECK_EQ_INT(WHOLE("a\xfe"), 2);
        CHECK_EQ_INT(WHOLE("a\xc0"), 2);
        CHECK_EQ_INT(WHOLE("a\xf8\x80"), 3);
        CHECK_EQ_INT(WHOLE("a\x80"), 2);            /* stray continuation after ASCII */
        CHECK_EQ_INT(WHOLE("\x80\x80\x80\x80"), 4); /* only continuations */
        CHECK_EQ_INT(WHOLE("\x80\x80\x80"), 3);
        /* Never more than 3 bytes held back. */
        CHECK_EQ_INT(WHOLE("a\xf0\x80\x80\x80\x80"), 6);
}

/* Every cut point of a mixed string lands on the last character boundary at or before it, and
 * that prefix is valid UTF-8: what the exec streamer relies on to never split a character. */
static void test_util_utf8_whole_prefix__every_cut(void)
{
        static const char *const pieces[] = {
            "a", "\xc3\xa9",         "\xe2\x82\xac", "\xf0\x9f\x98\x80",
            "z", "\xf0\x9f\x98\x80", "\xc3\xa9",     "\xe2\x82\xac"};
        char s[64];
        size_t bounds[16], nb = 0, len = 0;
        bounds[nb++] = 0;
        for (size_t i = 0; i < ELEMENTSOF(pieces); i++) {
                size_t n = strlen(pieces[i]);
                memcpy(s + len, pieces[i], n);
                len += n;
                bounds[nb++] = len;
        }
        CHECK(valid(s, len));
        for (size_t k = 0; k <= len; k++) {
                size_t want = 0;
                for (size_t b = 0; b < nb; b++)
                        if (bounds[b] <= k)
                                want = bounds[b];
                size_t got = whole(s, k);
                if (got != want)
                        fprintf(stderr, "  cut at %zu: got %zu, want %zu\n", k, got, want);
                CHECK_EQ_INT(got, want);
                CHECK(valid(s, got));
        }
}

/* ---------------------------------------------------------------- base64 */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint8_t rng_byte(void)
{
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return (uint8_t)(rng_state >> 24);
}

static long decode_str(const char *in, unsigned char *out)
{
        return base64_decode(in, strlen(in), out);
}

static void test_util_base64__rfc4648_vectors(void)
{
        static const char *const v[][2] = {{"", ""},
                                           {"f", "Zg=="},
                                           {"fo", "Zm8="},
                                           {"foo", "Zm9v"},
                                           {"foob", "Zm9vYg=="},
                                           {"fooba", "Zm9vYmE="},
                                           {"foobar", "Zm9vYmFy"}};
        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                char enc[32];
                unsigned char dec[32];
                size_t n = base64_encode(v[i][0], strlen(v[i][0]), enc);
                CHECK_EQ_INT(n, strlen(v[i][1]));
                CHECK_EQ_STR(enc, v[i][1]);
                CHECK_EQ_INT(base64_encoded_size(strlen(v[i][0])), strlen(v[i][1]) + 1);
                long m = decode_str(v[i][1], dec);
                CHECK_EQ_INT(m, strlen(v[i][0]));
                CHECK(m >= 0 && memcmp(dec, v[i][0], (size_t)m) == 0);
        }
        /* all 64 symbols and the high bits */
        unsigned char all[3] = {0xfb, 0xff, 0xbf}, dec[8];
        char enc[8];
        base64_encode(all, 3, enc);
        CHECK_EQ_STR(enc, "+/+/");
        CHECK_EQ_INT(decode_str("+/+/", dec), 3);
        CHECK(memcmp(dec, all, 3) == 0);
}

static void test_util_base64__random_round_trip(void)
{
        for (size_t len = 0; len <= 300; len++) {
                unsigned char *data = malloc(len ? len : 1);
                for (size_t i = 0; i < len; i++)
                        data[i] = rng_byte();
                /* exact-size buffers: ASan catches any overrun */
                size_t esize = base64_encoded_size(len);
                char *enc = malloc(esize);
                size_t elen = base64_encode(data, len, enc);
                CHECK_EQ_INT(elen, esize - 1);
                CHECK_EQ_INT(strlen(enc), elen);
                CHECK_EQ_INT(elen % 4, 0);
                CHECK_EQ_INT(strspn(enc, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789+/="),
                             elen);
                size_t dsize = elen * 3 / 4;
                unsigned char *dec = malloc(dsize ? dsize : 1);
                long dlen = base64_decode(enc, elen, dec);
                CHECK_EQ_INT(dlen, len);
                if (dlen != (long)len || memcmp(dec, data, len) != 0) {
                        fprintf(stderr, "  round trip failed at length %zu\n", len);
                        unit_failures++;
                }
                /* Unpadded input is accepted too (documented). */
                size_t ulen = elen;
                while (ulen > 0 && enc[ulen - 1] == '=')
                        ulen--;
                memset(dec, 0, dsize ? dsize : 1);
                CHECK_EQ_INT(base64_decode(enc, ulen, dec), len);
                CHECK(memcmp(dec, data, len) == 0);
                /* In place: decoding into the input buffer itself. */
                CHECK_EQ_INT(base64_decode(enc, elen, (unsigned char *)enc), len);
                CHECK(memcmp(enc, data, len) == 0);
                free(dec);
                free(enc);
                free(data);
        }
}

static void test_util_base64__rejects_bad_characters(void)
{
        static const char *const bad[] = {"Zm9v!A==", "Zm 9v",    "Zm9v\n",     "Zm9-",
                                          "Zm9_",     "Zm9v\tYg", "\xc3\xa9Zm", "Zm9v.Zm9v"};
        unsigned char out[64];
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                long r = decode_str(bad[i], out);
                if (r != -1)
                        fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
                CHECK_EQ_INT(r, -1);
        }
        /* an embedded NUL counts: len is authoritative */
        CHECK_EQ_INT(base64_decode("Zm\0v", 4, out), -1);
        CHECK_EQ_INT(base64_decode("\x80\x80\x80\x80", 4, out), -1);
}

static void test_util_base64__rejects_bad_padding(void)
{
        static const char *const bad[] = {
            "Zg=a",     /* padding in the middle */
            "Zg==Zg==", /* two padded quanta glued together */
            "=Zg=",     /* leading padding */
            "Z",        /* one symbol is never a whole byte */
            "Z===",     /* the same, padded */
            "Zm9vY",    /* 4n+1 symbols */
            "Zm9vY===",
        };
        unsigned char out[64];
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                long r = decode_str(bad[i], out);
                if (r != -1)
                        fprintf(stderr, "  accepted \"%s\"\n", bad[i]);
                CHECK_EQ_INT(r, -1);
        }
}

/* RFC 4648 §3.2/§4: padding only fills the last 4-symbol quantum, with exactly as many '=' as
 * are missing. The decoder strips any run of trailing '=' before looking, so the cases below
 * (data of a whole quantum followed by '=', too many or too few '=') are all accepted, although
 * the header promises -1 on "bad padding". */
static void test_util_base64__rejects_excess_padding(void)
{
        static const char *const bad[] = {
            "Zm9v=",    /* complete quantum, then padding */
            "Zm9v====", /* a whole quantum of padding */
            "====",     /* nothing but padding */
            "Zg=",      /* one '=' where two are needed */
            "Zg===",    /* three */
            "Zm8==",    /* two where one is needed */
        };
        unsigned char out[64];
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                long r = decode_str(bad[i], out);
                if (r != -1)
                        fprintf(stderr, "  accepted \"%s\" (decoded %ld bytes)\n", bad[i], r);
                CHECK_EQ_INT(r, -1);
        }
}

/* ---------------------------------------------------------------- proc_start_time */

/* Field 22 of /proc/PID/stat, parsed independently. */
static unsigned long long stat_field22(pid_t pid)
{
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read_full(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n < 0 ? 0 : n] = 0;
        char *p = strrchr(buf, ')');
        unsigned long long v = 0;
        /* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
         * utime stime cutime cstime priority nice threads itrealvalue starttime(22) */
        if (!p || sscanf(p + 1,
                         " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                         "%*d %*d %*d %*d %llu",
                         &v) != 1)
                return 0;
        return v;
}

static void test_util_proc_start_time__self_stable(void)
{
        uint64_t a = 0, b = 0;
        CHECK_EQ_INT(proc_start_time(getpid(), &a), 0);
        usleep(20000);
        CHECK_EQ_INT(proc_start_time(getpid(), &b), 0);
        CHECK_EQ_INT(a, b);
        CHECK(a > 0);
        CHECK_EQ_INT(a, stat_field22(getpid()));
}

/* A child that exits 0 once a byte is written to go[1] (1 if go[1] closes first). */
static pid_t waiting_child(int go[2])
{
        if (pipe2(go, O_CLOEXEC) < 0) {
                perror("pipe2");
                exit(2);
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                perror("fork");
                exit(2);
        }
        if (pid == 0) {
                char c;
                close(go[1]);
                _exit(read(go[0], &c, 1) == 1 ? 0 : 1);
        }
        return pid;
}

/* The flag env_spawn_finish relies on: a live process is not exiting; one that has exited
 * (not reaped yet) is, and so was it from the moment it began to exit. */
static void test_util_proc_stat__exiting_flag(void)
{
        int go[2];
        pid_t pid = waiting_child(go);
        close(go[0]);
        struct proc_stat st;
        CHECK_EQ_INT(proc_stat(pid, &st), 0);
        CHECK(!(st.flags & PROC_FLAG_EXITING));
        CHECK(!proc_stat_gone(&st));
        CHECK(st.start_time > 0);
        uint64_t started = st.start_time;
        CHECK(write(go[1], "x", 1) == 1);
        close(go[1]);
        siginfo_t si = {0};
        CHECK_EQ_INT(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
        CHECK_EQ_INT(proc_stat(pid, &st), 0);
        CHECK(st.flags & PROC_FLAG_EXITING);
        CHECK(proc_stat_gone(&st));
        CHECK(st.start_time == started);
        waitpid(pid, NULL, 0);
        CHECK(proc_stat(pid, &st) < 0);
}

/* Running, exited and unreaped, reaped: and never someone else's process, nor a bad pid. */
static void test_util_child_state__through_a_childs_life(void)
{
        int go[2];
        pid_t pid = waiting_child(go);
        CHECK_EQ_INT(child_state(pid), CHILD_RUNNING);
        CHECK_EQ_INT(child_state(pid), CHILD_RUNNING); /* asking does not reap */
        CHECK(write(go[1], "g", 1) == 1);
        for (int i = 0; i < 2000 && child_state(pid) == CHILD_RUNNING; i++)
                usleep(1000);
        CHECK_EQ_INT(child_state(pid), CHILD_EXITED);
        CHECK_EQ_INT(child_state(pid), CHILD_EXITED);
        int status = -1;
        CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK_EQ_INT(child_state(pid), CHILD_NONE);
        CHECK_EQ_INT(child_state(1), CHILD_NONE); /* alive, but not ours */
        CHECK_EQ_INT(child_state(0), CHILD_NONE);
        CHECK_EQ_INT(child_state(-1), CHILD_NONE);
        close(go[0]);
        close(go[1]);
}

static void test_util_proc_start_time__child_differs(void)
{
        uint64_t self = 0, child = 0, again = 0, renamed = 0;
        CHECK_EQ_INT(proc_start_time(getpid(), &self), 0);
        /* A clock tick is 10 ms at USER_HZ=100: make sure the child starts ticks later. */
        usleep(50000);
        int go[2], ack[2];
        if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ack, O_CLOEXEC) < 0) {
                perror("pipe2");
                exit(2);
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
                perror("fork");
                exit(2);
        }
        if (pid == 0) {
                char c;
                /* 1: rename to a comm full of ") " that would derail a naive parser */
                if (read(go[0], &c, 1) != 1)
                        _exit(1);
                prctl(PR_SET_NAME, "x) 1 2 (3) 4 5");
                if (write(ack[1], "r", 1) != 1)
                        _exit(1);
                /* 2: wait to be told to exit */
                if (read(go[0], &c, 1) != 1)
                        _exit(1);
                _exit(0);
        }
        char c = 0;
        CHECK_EQ_INT(proc_start_time(pid, &child), 0);
        CHECK(child != self);
        CHECK(child > self);
        CHECK_EQ_INT(child, stat_field22(pid));
        CHECK_EQ_INT(proc_start_time(pid, &again), 0);
        CHECK_EQ_INT(again, child);
        CHECK_EQ_INT(write(go[1], "g", 1), 1);
        CHECK_EQ_INT(read(ack[0], &c, 1), 1);
        char comm[64];
        snprintf(comm, sizeof(comm), "/proc/%d/comm", (int)pid);
        CHECK_EQ_STR(slurp(comm), "x) 1 2 (3) 4 5\n");
        CHECK_EQ_INT(proc_start_time(pid, &renamed), 0);
        CHECK_EQ_INT(renamed, child);
        CHECK_EQ_INT(write(go[1], "x", 1), 1);
        int st;
        waitpid(pid, &st, 0);
        /* Reaped: no such process any more; the out-parameter is left alone. */
        uint64_t gone = 12345;
        CHECK_EQ_INT(proc_start_time(pid, &gone), -ENOENT);
        CHECK_EQ_INT(gone, 12345);
        close(go[0]);
        close(go[1]);
        close(ack[0]);
        close(ack[1]);
}

/* ---------------------------------------------------------------- close_fds_from */

static bool fd_open(int fd)
{
        return fcntl(fd, F_GETFD) >= 0;
}

struct fds_case {
        bool block_close_range; /* force the fallback path with a seccomp filter */
        bool high_fd;           /* also plant an fd above 65535 */
};

static void close_fds_child(void *arg)
{
        const struct fds_case *c = arg;
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0) {
                perror("open /dev/null");
                _exit(2);
        }
        /* fds 3..9 are below `from`; 10..20 and 1000, 1001 above it */
        for (int fd = 5; fd <= 20; fd++)
                if (fd != null)
                        dup2(null, fd);
        dup2(null, 1000);
        dup2(null, 1001);
        int high = -1;
        if (c->high_fd) {
                struct rlimit rl = {100000, 100000};
                if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
                        high = dup2(null, 70000);
                if (high < 0)
                        fprintf(stderr, "  (no fd 70000: %m; part of the check skipped)\n");
        }
        if (null >= 10)
                close(null);
        if (c->block_close_range) {
                scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
                if (!ctx ||
                    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(close_range), 0) < 0 ||
                    seccomp_load(ctx) < 0) {
                        fprintf(stderr, "  seccomp setup failed\n");
                        _exit(2);
                }
                seccomp_release(ctx);
                /* the fault is really injected */
                CHECK(syscall(SYS_close_range, 1001u, 1001u, 0) < 0 && errno == ENOSYS);
                CHECK(fd_open(1001));
        }

        /* Unsorted, with a duplicate and one below `from` (ignored). */
        const int keep[] = {15, 12, 1000, 12, 7, 10};
        CHECK_EQ_INT(close_fds_from(10, keep, ELEMENTSOF(keep)), 0);
        for (int fd = 5; fd <= 9; fd++)
                CHECK(fd_open(fd)); /* below from: untouched */
        for (int fd = 10; fd <= 20; fd++) {
                bool want = fd == 10 || fd == 12 || fd == 15;
                if (fd_open(fd) != want)
                        fprintf(stderr, "  fd %d: %s\n", fd, want ? "closed" : "still open");
                CHECK(fd_open(fd) == want);
        }
        CHECK(fd_open(1000));
        CHECK(!fd_open(1001) && errno == EBADF);
        if (high >= 0)
                CHECK(!fd_open(70000));
        CHECK(fd_open(2));

        /* And with nothing to keep: everything from `from` on goes. */
        CHECK_EQ_INT(close_fds_from(6, NULL, 0), 0);
        CHECK(fd_open(5));
        for (int fd = 6; fd <= 20; fd++)
                CHECK(!fd_open(fd));
        CHECK(!fd_open(1000));
}

static void test_util_close_fds_from__keeps_listed(void)
{
        struct fds_case c = {.block_close_range = false, .high_fd = true};
        CHECK_EQ_INT(in_child(close_fds_child, &c), 0);
}

/* Without close_range (old kernel, or a seccomp profile that refuses it) the fallback must
 * close the same set, including fds above 65535 when RLIMIT_NOFILE allows them. */
static void test_util_close_fds_from__fallback_without_close_range(void)
{
        struct fds_case c = {.block_close_range = true, .high_fd = true};
        CHECK_EQ_INT(in_child(close_fds_child, &c), 0);
}

/* ---------------------------------------------------------------- rm_rf_at */

static void test_util_rm_rf_at__nested_tree_not_following_symlinks(void)
{
        tmp_setup();
        CHECK_EQ_INT(mkdir(pathf("canary"), 0755), 0);
        put_str(pathf("canary/file"), "keep");
        put_str(pathf("canary-file"), "keep too");
        CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("tree/a/b/c"), 0755), 0);
        CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("tree/a/b/d"), 0755), 0);
        put_str(pathf("tree/a/b/c/file1"), "x");
        put_str(pathf("tree/a/e"), "y");
        CHECK_EQ_INT(mkfifo(pathf("tree/a/b/c/fifo"), 0600), 0);
        /* symlinks out of the tree, absolute and relative, to a dir and to a file */
        CHECK_EQ_INT(symlink(pathf("canary"), pathf("tree/a/link-abs")), 0);
        CHECK_EQ_INT(symlink("../../../canary", pathf("tree/a/b/link-rel")), 0);
        CHECK_EQ_INT(symlink(pathf("canary-file"), pathf("tree/link-file")), 0);
        CHECK_EQ_INT(symlink("/", pathf("tree/a/b/c/root")), 0);
        /* a read-only directory does not stop root */
        CHECK_EQ_INT(chmod(pathf("tree/a/b/d"), 0), 0);

        CHECK_EQ_INT(rm_rf_at(AT_FDCWD, pathf("tree")), 0);
        CHECK(!exists(pathf("tree")));
        CHECK(is_dir(pathf("canary")));
        CHECK_EQ_STR(slurp(pathf("canary/file")), "keep");
        CHECK_EQ_STR(slurp(pathf("canary-file")), "keep too");
        CHECK(is_dir("/etc"));
        tmp_teardown();
}

/* A tree far deeper than the fds (and stack) a walk could hold (an environment can make one
 * in its own disk): removed completely with a soft limit of 128 descriptors. */
static void test_util_rm_rf_at__very_deep_tree(void)
{
        tmp_setup();
        CHECK_EQ_INT(mkdir(pathf("deep"), 0755), 0);
        int fd = open(pathf("deep"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int i = 0; i < 3000 && fd >= 0; i++) {
                CHECK_EQ_INT(mkdirat(fd, "d", 0755), 0);
                if (i % 500 == 0) {
                        CHECK_EQ_INT(mkdirat(fd, "side", 0755), 0);
                        int f = openat(fd, "side/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                        CHECK(f >= 0);
                        close(f);
                }
                int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = next;
        }
        CHECK(fd >= 0);
        if (fd >= 0)
                close(fd);
        /* names the walk would pick for moved directories, planted by the tree itself */
        for (int i = 0; i < 3; i++)
                CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("deep/.rm-deep-%d/x", i), 0755), 0);
        struct rlimit old, low;
        CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = old;
        low.rlim_cur = 128;
        CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
        int r = rm_rf_at(AT_FDCWD, pathf("deep"));
        setrlimit(RLIMIT_NOFILE, &old);
        CHECK_EQ_INT(r, 0);
        CHECK(!exists(pathf("deep")));
        tmp_teardown();
}

static void test_util_rm_rf_at__relative_and_special(void)
{
        tmp_setup();
        int dfd = open(tmp_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(dfd >= 0);
        CHECK_EQ_INT(mkdir(pathf("canary"), 0755), 0);
        put_str(pathf("canary/file"), "keep");

        /* relative to a dirfd */
        CHECK_EQ_INT(mkdir_p_at(dfd, "t2/x/y", 0755), 0);
        put_str(pathf("t2/x/y/f"), "z");
        CHECK_EQ_INT(rm_rf_at(dfd, "t2"), 0);
        CHECK(!exists(pathf("t2")));

        /* the name itself a symlink to a directory: the link goes, the target stays */
        CHECK_EQ_INT(symlinkat("canary", dfd, "link"), 0);
        CHECK_EQ_INT(rm_rf_at(dfd, "link"), 0);
        CHECK(!exists(pathf("link")));
        CHECK_EQ_STR(slurp(pathf("canary/file")), "keep");

        /* a plain file; a missing name is success */
        put_str(pathf("plain"), "p");
        CHECK_EQ_INT(rm_rf_at(dfd, "plain"), 0);
        CHECK(!exists(pathf("plain")));
        CHECK_EQ_INT(rm_rf_at(dfd, "never-existed"), 0);

        /* deep nesting */
        char deep[2048] = "deep";
        for (int i = 0; i < 60; i++)
                strcat(deep, "/d");
        CHECK_EQ_INT(mkdir_p_at(dfd, deep, 0755), 0);
        CHECK_EQ_INT(rm_rf_at(dfd, "deep"), 0);
        CHECK(!exists(pathf("deep")));
        close(dfd);
        tmp_teardown();
}

static void rm_rf_mount_child(void *arg)
{
        /* a private mount namespace: the tmpfs vanishes with this process */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                perror("unshare/mount");
                _exit(2);
        }
        CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("tree/sub/mnt"), 0755), 0);
        put_str(pathf("tree/sub/other"), "o");
        CHECK_EQ_INT(mount("tmpfs", pathf("tree/sub/mnt"), "tmpfs", 0, "size=1m"), 0);
        put_str(pathf("tree/sub/mnt/inside"), "mounted");
        /* Fails (the tree cannot go entirely) without touching the mounted fs. The code
         * notes -EBUSY at the mount point, but the failed rmdir of its parent then overwrites
         * it: what comes back today is -ENOTEMPTY. Either says "not removed". */
        int r = rm_rf_at(AT_FDCWD, pathf("tree"));
        CHECK(r == -EBUSY || r == -ENOTEMPTY);
        CHECK_EQ_STR(slurp(pathf("tree/sub/mnt/inside")), "mounted");
        CHECK(!exists(pathf("tree/sub/other")));
        umount2(pathf("tree/sub/mnt"), MNT_DETACH);
}

static void test_util_rm_rf_at__stops_at_mount_points(void)
{
        tmp_setup();
        CHECK_EQ_INT(in_child(rm_rf_mount_child, NULL), 0);
        tmp_teardown();
}

/* ---------------------------------------------------------------- mkdir_p_at */

static void test_util_mkdir_p_at__creates_and_tolerates(void)
{
        tmp_setup();
        mode_t old = umask(022);
        CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("m/a/b/c"), 0700), 0);
        CHECK(is_dir(pathf("m/a/b/c")));
        struct stat st;
        CHECK_EQ_INT(stat(pathf("m/a/b"), &st), 0);
        CHECK_EQ_INT(st.st_mode & 07777, 0700);
        /* existing is fine, trailing and doubled slashes too */
        CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("m/a/b/c"), 0700), 0);
        CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("m/a/x/"), 0755), 0);
        CHECK(is_dir(pathf("m/a/x")));
        CHECK_EQ_INT(mkdir_p_at(AT_FDCWD, pathf("m//y//z"), 0755), 0);
        CHECK(is_dir(pathf("m/y/z")));
        /* relative to a dirfd */
        int dfd = open(tmp_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK_EQ_INT(mkdir_p_at(dfd, "rel/one/two", 0755), 0);
        CHECK(is_dir(pathf("rel/one/two")));
        CHECK_EQ_INT(stat(pathf("rel/one"), &st), 0);
        CHECK_EQ_INT(st.st_mode & 07777, 0755);
        /* a file in the way */
        put_str(pathf("file"), "f");
        CHECK_EQ_INT(mkdir_p_at(dfd, "file/sub", 0755), -ENOTDIR);
        /* nonsense */
        CHECK_EQ_INT(mkdir_p_at(dfd, "", 0755), -EINVAL);
        char *huge = malloc(5000);
        memset(huge, 'a', 4999);
        huge[4999] = 0;
        CHECK_EQ_INT(mkdir_p_at(dfd, huge, 0755), -EINVAL);
        free(huge);
        close(dfd);
        umask(old);
        tmp_teardown();
}

/* ---------------------------------------------------------------- write/read_file_at */

static void test_util_file_at__round_trip(void)
{
        tmp_setup();
        int dfd = open(tmp_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        put_str(pathf("f"), "");
        CHECK_EQ_INT(write_file_at(dfd, "f", "hello\n"), 0);
        char *s = NULL;
        CHECK_EQ_INT(read_file_at(dfd, "f", 4096, &s), 0);
        CHECK_EQ_STR(s, "hello\n");
        free(s);
        s = NULL;
        /* at most max-1 bytes, always NUL-terminated */
        CHECK_EQ_INT(read_file_at(dfd, "f", 4, &s), 0);
        CHECK_EQ_STR(s, "hel");
        free(s);
        s = NULL;
        CHECK_EQ_INT(read_file_at(AT_FDCWD, pathf("f"), 1, &s), 0);
        CHECK_EQ_STR(s, "");
        free(s);
        s = NULL;
        /* absolute path with AT_FDCWD */
        CHECK_EQ_INT(write_file_at(AT_FDCWD, pathf("f"), "abs"), 0);
        /* no create */
        CHECK_EQ_INT(write_file_at(dfd, "missing", "x"), -ENOENT);
        CHECK(!exists(pathf("missing")));
        CHECK_EQ_INT(read_file_at(dfd, "missing", 16, &s), -ENOENT);
        CHECK(s == NULL);
        close(dfd);
        tmp_teardown();
}

static void test_util_file_at__refuses_symlink(void)
{
        tmp_setup();
        int dfd = open(tmp_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        put_str(pathf("target"), "original");
        CHECK_EQ_INT(symlinkat("target", dfd, "lnk"), 0);
        CHECK_EQ_INT(symlinkat(pathf("target"), dfd, "lnk-abs"), 0);
        CHECK_EQ_INT(write_file_at(dfd, "lnk", "evil"), -ELOOP);
        CHECK_EQ_INT(write_file_at(AT_FDCWD, pathf("lnk-abs"), "evil"), -ELOOP);
        CHECK_EQ_STR(slurp(pathf("target")), "original");
        char *s = NULL;
        CHECK_EQ_INT(read_file_at(dfd, "lnk", 64, &s), -ELOOP);
        CHECK(s == NULL);
        CHECK_EQ_INT(read_file_at(AT_FDCWD, pathf("lnk-abs"), 64, &s), -ELOOP);
        CHECK(s == NULL);
        close(dfd);
        tmp_teardown();
}

/* ---------------------------------------------------------------- passwd_lookup */

static const char passwd_text[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "short:x:1004\n"                            /* too few fields */
    "nonnum:x:abc:1004::/home/nonnum:/bin/sh\n" /* non-numeric uid */
    "alice:x:abc:1000::/home/evil:/bin/sh\n"    /* malformed twin, must not shadow */
    "big:x:70000:1004::/home/big:/bin/sh\n"     /* uid > 65535 */
    "neg:x:-1:1004::/home/neg:/bin/sh\n"
    "badgid:x:1005:zz::/home/badgid:/bin/sh\n"
    "longuid:x:00001:1::/home/longuid:/bin/sh\n"
    "alice:x:1000:1000:Alice,,,:/home/alice:/bin/sh\n"
    "bob:x:1001:1002::/home/bob\n"            /* 6 fields: no shell */
    "relhome:x:1003:1003::home/rel:/bin/sh\n" /* not absolute: "/" */
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    "max:x:65535:65535::/home/max:/bin/sh"; /* no final newline */

struct pw {
        int r;
        uid_t uid;
        gid_t gid;
        char home[64];
};

static struct pw lookup(const char *path, const char *user)
{
        struct pw p = {.uid = 4242, .gid = 4242, .home = "untouched"};
        p.r = passwd_lookup(path, user, &p.uid, &p.gid, p.home, sizeof(p.home));
        return p;
}

static void test_join_passwd_lookup__by_name_and_uid(void)
{
        tmp_setup();
        const char *path = pathf("passwd");
        put_str(path, passwd_text);
        struct pw p = lookup(path, "alice");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 1000);
        CHECK_EQ_INT(p.gid, 1000);
        CHECK_EQ_STR(p.home, "/home/alice");
        p = lookup(path, "1000");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 1000);
        CHECK_EQ_STR(p.home, "/home/alice");
        p = lookup(path, "root");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 0);
        CHECK_EQ_STR(p.home, "/root");
        p = lookup(path, "0");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_STR(p.home, "/root");
        p = lookup(path, "bob");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 1001);
        CHECK_EQ_INT(p.gid, 1002);
        CHECK_EQ_STR(p.home, "/home/bob");
        p = lookup(path, "relhome");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_STR(p.home, "/");
        p = lookup(path, "max"); /* last line, no newline */
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 65535);
        p = lookup(path, "65534");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_STR(p.home, "/nonexistent");
        /* leading zeros are still the same id */
        p = lookup(path, "longuid");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 1);
        /* the home is cut to the buffer, NUL-terminated */
        uid_t u;
        gid_t g;
        char small[6];
        CHECK_EQ_INT(passwd_lookup(path, "alice", &u, &g, small, sizeof(small)), 0);
        CHECK_EQ_STR(small, "/home");
        tmp_teardown();
}

static void test_join_passwd_lookup__missing_and_malformed(void)
{
        tmp_setup();
        const char *path = pathf("passwd");
        put_str(path, passwd_text);
        static const char *const absent[] = {"carol", "short", "nonnum", "big",    "neg", "badgid",
                                             "70000", "1004",  "ali",    "alice:", "",    "-1"};
        for (size_t i = 0; i < ELEMENTSOF(absent); i++) {
                struct pw p = lookup(path, absent[i]);
                if (p.r != -ENOENT)
                        fprintf(stderr, "  \"%s\": %d\n", absent[i], p.r);
                CHECK_EQ_INT(p.r, -ENOENT);
                /* out-parameters only on success */
                CHECK_EQ_INT(p.uid, 4242);
                CHECK_EQ_INT(p.gid, 4242);
                CHECK_EQ_STR(p.home, "untouched");
        }
        CHECK_EQ_INT(lookup(pathf("no-such-file"), "root").r, -ENOENT);
        /* an empty file */
        put_str(pathf("empty"), "");
        CHECK_EQ_INT(lookup(pathf("empty"), "root").r, -ENOENT);
        tmp_teardown();
}

/* glibc's files backend skips empty lines; an image whose /etc/passwd has one must not lose
 * every user after it. */
static void test_join_passwd_lookup__blank_line_skipped(void)
{
        tmp_setup();
        const char *path = pathf("passwd");
        put_str(path, "root:x:0:0:root:/root:/bin/bash\n"
                      "\n"
                      "alice:x:1000:1000::/home/alice:/bin/sh\n");
        struct pw p = lookup(path, "root");
        CHECK_EQ_INT(p.r, 0);
        p = lookup(path, "alice");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 1000);
        CHECK_EQ_STR(p.home, "/home/alice");
        put_str(path, "\nalice:x:1000:1000::/home/alice:/bin/sh\n");
        CHECK_EQ_INT(lookup(path, "alice").r, 0);
        tmp_teardown();
}

struct fifo_arg {
        const char *path;
};

static void passwd_fifo_child(void *arg)
{
        const struct fifo_arg *a = arg;
        alarm(5); /* a hang kills the child with SIGALRM: the parent sees 128 + 14 */
        struct pw p = lookup(a->path, "root");
        alarm(0);
        CHECK(p.r < 0);
        CHECK_EQ_INT(p.r, -EINVAL);
        CHECK_EQ_STR(p.home, "untouched");
}

static void test_join_passwd_lookup__fifo_and_devices_do_not_hang(void)
{
        tmp_setup();
        CHECK_EQ_INT(mkfifo(pathf("fifo"), 0644), 0);
        struct fifo_arg a = {pathf("fifo")};
        uint64_t t0 = now_ms();
        CHECK_EQ_INT(in_child(passwd_fifo_child, &a), 0);
        CHECK(now_ms() - t0 < 2000);
        /* a directory and a character device are refused as well */
        CHECK_EQ_INT(mkdir(pathf("dir"), 0755), 0);
        CHECK_EQ_INT(lookup(pathf("dir"), "root").r, -EINVAL);
        struct fifo_arg z = {"/dev/zero"};
        CHECK_EQ_INT(in_child(passwd_fifo_child, &z), 0);
        tmp_teardown();
}

/* Only the first 64 KiB are read. Observed and intended: a 1 MiB file with the user at the end
 * gives -ENOENT, without a crash or a long scan. */
static void test_join_passwd_lookup__huge_file(void)
{
        tmp_setup();
        const char *path = pathf("passwd");
        size_t size = 1 << 20;
        char *buf = malloc(size);
        const char *line = "filler:x:2000:2000::/home/filler:/bin/sh\n";
        size_t ll = strlen(line), len = 0;
        const char *last = "zed:x:3000:3000::/home/zed:/bin/sh\n";
        while (len + ll + strlen(last) < size) {
                memcpy(buf + len, line, ll);
                len += ll;
        }
        memcpy(buf + len, last, strlen(last));
        len += strlen(last);
        put(path, buf, len);
        free(buf);
        struct pw p = lookup(path, "zed");
        CHECK_EQ_INT(p.r, -ENOENT);
        CHECK_EQ_STR(p.home, "untouched");
        p = lookup(path, "filler");
        CHECK_EQ_INT(p.r, 0);
        CHECK_EQ_INT(p.uid, 2000);
        tmp_teardown();
}

/* A line cut by the 64 KiB read limit must not be taken as a whole line: here the limit falls
 * inside alice's home field, so the lookup would report a home that does not exist. */
static void test_join_passwd_lookup__line_cut_at_limit(void)
{
        tmp_setup();
        const char *path = pathf("passwd");
        const char *tail = "alice:x:1000:1000::/home/alice-with-a-long-home:/bin/sh\n";
        size_t limit = 65535; /* bytes actually read */
        size_t cut = strlen("alice:x:1000:1000::/home/al");
        size_t size = limit - cut + strlen(tail);
        char *buf = malloc(size);
        memset(buf, '#', limit - cut); /* one long comment-like line, no user */
        buf[limit - cut - 1] = '\n';
        memcpy(buf + limit - cut, tail, strlen(tail));
        put(path, buf, size);
        free(buf);
        struct pw p = lookup(path, "alice");
        if (p.r == 0)
                fprintf(stderr, "  observed home \"%s\"\n", p.home);
        CHECK(p.r == -ENOENT || (p.r == 0 && !strcmp(p.home, "/home/alice-with-a-long-home")));
        tmp_teardown();
}

static void test_util_buf_printf__truncation_is_an_error(void)
{
        char b[8];
        CHECK_EQ_INT(BUF_PRINTF(b, "%s/%s", "ab", "cd"), 5);
        CHECK_EQ_STR(b, "ab/cd");
        CHECK_EQ_INT(BUF_PRINTF(b, "%s/%s", "abc", "defg"), -ENAMETOOLONG); /* 8 chars: no room */
        CHECK_EQ_INT(BUF_PRINTF(b, "%s", "1234567"), 7);                     /* exactly fits */
}

static void test_util_path_join__one_slash(void)
{
        _cleanup_free_ char *a = path_join("/var/lib", "x");
        _cleanup_free_ char *b = path_join("/var/lib/", "x");
        _cleanup_free_ char *c = path_join("", "x");
        CHECK_EQ_STR(a, "/var/lib/x");
        CHECK_EQ_STR(b, "/var/lib/x");
        CHECK_EQ_STR(c, "/x");
}

static void test_util_take_pending__drains_in_pieces(void)
{
        const char src[] = "abcdef";
        char out[4];
        size_t off = 0;
        CHECK_EQ_INT(take_pending(out, 4, src, 6, &off), 4);
        CHECK(memcmp(out, "abcd", 4) == 0);
        CHECK_EQ_INT(take_pending(out, 4, src, 6, &off), 2);
        CHECK(memcmp(out, "ef", 2) == 0);
        CHECK_EQ_INT(take_pending(out, 4, src, 6, &off), 0);
        CHECK_EQ_INT(off, 6);
}

static void test_util_format_rfc3339__utc(void)
{
        char ts[RFC3339_SIZE];
        CHECK_EQ_STR(format_rfc3339(0, ts), "1970-01-01T00:00:00Z");
        CHECK_EQ_STR(format_rfc3339(1796166663, ts), "2026-12-01T23:11:03Z");
}

/* Built piece by piece across many doublings: every byte where it was put, always ended. */
static void test_strbuf__grows_and_stays_terminated(void)
{
        struct strbuf b = {0};
        CHECK_EQ_INT(strbuf_add(&b, "", 0), 0);
        CHECK(b.data && b.len == 0 && b.data[0] == 0);
        char piece[777];
        size_t total = 0;
        for (int i = 0; i < 100; i++) {
                memset(piece, 'a' + i % 26, sizeof(piece));
                CHECK_EQ_INT(strbuf_add(&b, piece, sizeof(piece) - (size_t)i), 0);
                total += sizeof(piece) - (size_t)i;
        }
        CHECK_EQ_INT(b.len, total);
        CHECK(b.cap > b.len && b.data[b.len] == 0 && strlen(b.data) == b.len);
        CHECK(b.data[0] == 'a' && b.data[sizeof(piece)] == 'b' && b.data[b.len - 1] == 'v');
        /* a size that cannot fit leaves it as it was */
        char *before = b.data;
        CHECK_EQ_INT(strbuf_add(&b, piece, (size_t)-1 / 2), -ENOMEM);
        CHECK(b.data == before && b.len == total);
        strbuf_free(&b);
        CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
}

int main(void)
{
        RUN(test_util_buf_printf__truncation_is_an_error);
        RUN(test_strbuf__grows_and_stays_terminated);
        RUN(test_util_path_join__one_slash);
        RUN(test_util_take_pending__drains_in_pieces);
        RUN(test_util_format_rfc3339__utc);
        RUN(test_util_utf8_valid__ascii);
        RUN(test_util_utf8_valid__multibyte);
        RUN(test_util_utf8_valid__overlong);
        RUN(test_util_utf8_valid__surrogates);
        RUN(test_util_utf8_valid__truncated);
        RUN(test_util_utf8_valid__bad_bytes);
        RUN(test_util_utf8_valid__embedded_nul);
        RUN(test_util_utf8_whole_prefix__complete);
        RUN(test_util_utf8_whole_prefix__cuts_incomplete_tail);
        RUN(test_util_utf8_whole_prefix__invalid_lead);
        RUN(test_util_utf8_whole_prefix__every_cut);
        RUN(test_util_base64__rfc4648_vectors);
        RUN(test_util_base64__random_round_trip);
        RUN(test_util_base64__rejects_bad_characters);
        RUN(test_util_base64__rejects_bad_padding);
        RUN(test_util_base64__rejects_excess_padding);
        RUN(test_util_proc_start_time__self_stable);
        RUN(test_util_proc_start_time__child_differs);
        RUN(test_util_child_state__through_a_childs_life);
        RUN(test_util_proc_stat__exiting_flag);
        RUN(test_util_close_fds_from__keeps_listed);
        RUN(test_util_close_fds_from__fallback_without_close_range);
        RUN(test_util_rm_rf_at__nested_tree_not_following_symlinks);
        RUN(test_util_rm_rf_at__relative_and_special);
        RUN(test_util_rm_rf_at__stops_at_mount_points);
        RUN(test_util_rm_rf_at__very_deep_tree);
        RUN(test_util_mkdir_p_at__creates_and_tolerates);
        RUN(test_util_file_at__round_trip);
        RUN(test_util_file_at__refuses_symlink);
        RUN(test_join_passwd_lookup__by_name_and_uid);
        RUN(test_join_passwd_lookup__missing_and_malformed);
        RUN(test_join_passwd_lookup__blank_line_skipped);
        RUN(test_join_passwd_lookup__fifo_and_devices_do_not_hang);
        RUN(test_join_passwd_lookup__huge_file);
        RUN(test_join_passwd_lookup__line_cut_at_limit);
        UNIT_EXIT();
}
