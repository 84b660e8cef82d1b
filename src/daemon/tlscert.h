/* The network listener's TLS certificate (GnuTLS x509 API): a self-signed one made at the
 * daemon's first start with --listen and kept in <state root>/tls, or one the administrator
 * gives (--tls-cert, --tls-key). The daemon only makes, keeps and fingerprints it; the TLS
 * itself runs in the unprivileged gateway, which gets the two files as open fds. */
#pragma once
#include <stddef.h>

/* "sha256:" and 32 colon-separated hex pairs, with the NUL. */
#define TLSCERT_FINGERPRINT_SIZE (7 + 32 * 3)

struct tlscert_names {
        const char *const *ips; /* textual IPv4/IPv6 addresses for subjectAltName (wildcards skipped) */
        size_t n_ips;
        const char *hostname; /* also a DNS name, with "localhost"; NULL: none */
};

/* Make dir (0700) and in it cert.pem (0644) and key.pem (0600) unless both exist already:
 * an ECDSA P-256 key and a self-signed certificate valid for 10 years, with the names as
 * subjectAltName. Existing files are kept as they are (the fingerprint clients pinned stays
 * valid). Written to temporary files and renamed, the key first: a crash leaves either both
 * or a stray key that the next start replaces. err gets a message on failure. */
int tlscert_ensure(const char *dir, const struct tlscert_names *names, char *err, size_t errlen);

/* Check that cert_path holds a PEM certificate and key_path a PEM private key that belong
 * together, and write the SHA-256 fingerprint of the (first) certificate's DER encoding as
 * "sha256:AB:CD:...". err gets a message on failure. */
int tlscert_load(const char *cert_path, const char *key_path,
                 char ret_fingerprint[static TLSCERT_FINGERPRINT_SIZE], char *err, size_t errlen);
