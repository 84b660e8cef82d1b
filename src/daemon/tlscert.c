/* The listener's certificate: see tlscert.h. Everything cryptographic is GnuTLS's. */
#include "daemon/tlscert.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

#define VALIDITY_S (10 * 366 * 24 * 3600LL) /* 10 years */

static void x509_crt_freep(gnutls_x509_crt_t *c)
{
        if (*c)
                gnutls_x509_crt_deinit(*c);
}

static void x509_key_freep(gnutls_x509_privkey_t *k)
{
        if (*k)
                gnutls_x509_privkey_deinit(*k);
}

static void datum_freep(gnutls_datum_t *d)
{
        gnutls_free(d->data);
        d->data = NULL;
}

static void cred_freep(gnutls_certificate_credentials_t *c)
{
        if (*c)
                gnutls_certificate_free_credentials(*c);
}

__attribute__((format(printf, 4, 5))) static int fail(int r, char *err, size_t errlen,
                                                        const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        return r;
}

/* dir/name written through name.tmp (mode given, fsync'd) and renamed over. */
static int write_atomic(int dirfd, const char *name, const gnutls_datum_t *d, mode_t mode)
{
        char tmp[64];
        int r = BUF_PRINTF(tmp, "%s.tmp", name);
        if (r < 0)
                return r;
        (void)unlinkat(dirfd, tmp, 0);
        _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                        mode);
        if (fd < 0)
                return -errno;
        if (fchmod(fd, mode) < 0 || (r = write_all(fd, d->data, d->size)) < 0 || fsync(fd) < 0) {
                r = r < 0 ? r : -errno;
                unlinkat(dirfd, tmp, 0);
                return r;
        }
        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                r = -errno;
                unlinkat(dirfd, tmp, 0);
                return r;
        }
        return 0;
}

static int add_ip_san(gnutls_x509_crt_t crt, const char *ip)
{
        unsigned char bin[16];
        size_t len;
        if (inet_pton(AF_INET, ip, bin) == 1) {
                if (!memcmp(bin, "\0\0\0\0", 4))
                        return 0; /* 0.0.0.0: no name a client could check */
                len = 4;
        } else if (inet_pton(AF_INET6, ip, bin) == 1) {
                if (!memcmp(bin, in6addr_any.s6_addr, 16))
                        return 0;
                len = 16;
        } else {
                return 0;
        }
        return gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, bin, (unsigned)len,
                                                    GNUTLS_FSAN_APPEND);
}

static int make_cert(const struct tlscert_names *names, gnutls_datum_t *ret_cert,
                     gnutls_datum_t *ret_key, const char **ret_step)
{
        _cleanup_(x509_key_freep) gnutls_x509_privkey_t key = NULL;
        _cleanup_(x509_crt_freep) gnutls_x509_crt_t crt = NULL;
        unsigned char serial[16];
        time_t now = time(NULL);
        int r;

        *ret_step = "generating the key";
        if ((r = gnutls_x509_privkey_init(&key)) < 0 ||
            (r = gnutls_x509_privkey_generate2(key, GNUTLS_PK_ECDSA,
                                               GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0,
                                               NULL, 0)) < 0)
                return r;
        *ret_step = "building the certificate";
        if ((r = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial))) < 0)
                return r;
        serial[0] &= 0x7f; /* a positive INTEGER */
        char cn[128] = "paddockd";
        if (names->hostname)
                snprintf(cn, sizeof(cn), "paddockd %s", names->hostname);
        if ((r = gnutls_x509_crt_init(&crt)) < 0 || (r = gnutls_x509_crt_set_version(crt, 3)) < 0 ||
            (r = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial))) < 0 ||
            (r = gnutls_x509_crt_set_activation_time(crt, now - 3600)) < 0 ||
            (r = gnutls_x509_crt_set_expiration_time(crt, (time_t)(now + VALIDITY_S))) < 0 ||
            (r = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
                                               (unsigned)strlen(cn))) < 0 ||
            (r = gnutls_x509_crt_set_key(crt, key)) < 0 ||
            (r = gnutls_x509_crt_set_basic_constraints(crt, 0, -1)) < 0 ||
            (r = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
            (r = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0)
                return r;
        *ret_step = "adding subjectAltName";
        if ((r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9,
                                                      GNUTLS_FSAN_APPEND)) < 0)
                return r;
        if (names->hostname && names->hostname[0] && strcmp(names->hostname, "localhost") &&
            (r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, names->hostname,
                                                      (unsigned)strlen(names->hostname),
                                                      GNUTLS_FSAN_APPEND)) < 0)
                return r;
        for (size_t i = 0; i < names->n_ips; i++)
                if ((r = add_ip_san(crt, names->ips[i])) < 0)
                        return r;
        *ret_step = "signing the certificate";
        if ((r = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0)) < 0)
                return r;
        *ret_step = "exporting";
        gnutls_datum_t c = {0}, k = {0};
        if ((r = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &c)) < 0)
                return r;
        if ((r = gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN,
                                                   &k)) < 0) {
                datum_freep(&c);
                return r;
        }
        *ret_cert = c;
        *ret_key = k;
        return 0;
}

int tlscert_ensure(const char *dir, const struct tlscert_names *names, char *err, size_t errlen)
{
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return fail(-errno, err, errlen, "%s: %s", dir, strerror(errno));
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return fail(-errno, err, errlen, "%s: %s", dir, strerror(errno));
        /* Also where an older directory was made with another mode: only root reads the key. */
        if (fchmod(dfd, 0700) < 0)
                return fail(-errno, err, errlen, "%s: %s", dir, strerror(errno));
        struct stat st;
        if (fstatat(dfd, "cert.pem", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            fstatat(dfd, "key.pem", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                (void)!fchmodat(dfd, "key.pem", 0600, 0);
                return 0; /* kept: clients may have pinned its fingerprint */
        }
        _cleanup_(datum_freep) gnutls_datum_t cert = {0};
        _cleanup_(datum_freep) gnutls_datum_t key = {0};
        const char *step = "";
        int r = make_cert(names, &cert, &key, &step);
        if (r < 0)
                return fail(-EIO, err, errlen, "%s: %s", step, gnutls_strerror(r));
        (void)unlinkat(dfd, "cert.pem", 0); /* without its key it is useless */
        if ((r = write_atomic(dfd, "key.pem", &key, 0600)) < 0 ||
            (r = write_atomic(dfd, "cert.pem", &cert, 0644)) < 0)
                return fail(r, err, errlen, "writing %s: %s", dir, strerror(-r));
        if (fsync(dfd) < 0)
                return fail(-errno, err, errlen, "%s: %s", dir, strerror(errno));
        return 0;
}

int tlscert_load(const char *cert_path, const char *key_path,
                 char ret_fingerprint[static TLSCERT_FINGERPRINT_SIZE], char *err, size_t errlen)
{
        /* The credentials call checks that the key belongs to the certificate. */
        _cleanup_(cred_freep) gnutls_certificate_credentials_t cred = NULL;
        int r = gnutls_certificate_allocate_credentials(&cred);
        if (r < 0)
                return fail(-ENOMEM, err, errlen, "%s", gnutls_strerror(r));
        r = gnutls_certificate_set_x509_key_file(cred, cert_path, key_path, GNUTLS_X509_FMT_PEM);
        if (r < 0)
                return fail(r == GNUTLS_E_FILE_ERROR ? -ENOENT : -EINVAL, err, errlen,
                            "%s with %s: %s", cert_path, key_path, gnutls_strerror(r));
        _cleanup_(datum_freep) gnutls_datum_t pem = {0};
        _cleanup_(x509_crt_freep) gnutls_x509_crt_t crt = NULL;
        if ((r = gnutls_load_file(cert_path, &pem)) < 0 || (r = gnutls_x509_crt_init(&crt)) < 0 ||
            (r = gnutls_x509_crt_import(crt, &pem, GNUTLS_X509_FMT_PEM)) < 0)
                return fail(-EINVAL, err, errlen, "%s: %s", cert_path, gnutls_strerror(r));
        unsigned char md[32];
        size_t mdlen = sizeof(md);
        r = gnutls_x509_crt_get_fingerprint(crt, GNUTLS_DIG_SHA256, md, &mdlen);
        if (r < 0 || mdlen != sizeof(md))
                return fail(-EIO, err, errlen, "%s: fingerprint: %s", cert_path,
                            gnutls_strerror(r));
        char *p = ret_fingerprint;
        p += sprintf(p, "sha256:");
        for (size_t i = 0; i < mdlen; i++)
                p += sprintf(p, i ? ":%02X" : "%02X", md[i]);
        return 0;
}
