/* libcurl, loaded when first used (registry.c is its only user). Linked, it and the twenty
 * libraries it pulls in (OpenSSL, Kerberos, LDAP, SSH, RTMP, IDN...) were a third of the
 * daemon's mappings, and every process the daemon forks copies each mapping: a create forks
 * twice (PID 1, its exec slot), and they cost 0.15-0.25 ms of the loop per fork here
 * (bench/fork_cost.sh). Pulls run in a forked helper, which loads it there; the daemon itself
 * loads it only to read a --allow-registry / --insecure-registry host (curl's URL parser).
 * Nor does a daemon that never pulls carry that code.
 *
 * As in the CLI's lazylib.c: this file defines the curl functions registry.c calls, under
 * curl's own names and with its headers' prototypes, so the linker resolves those calls here
 * and the programs are not linked against libcurl; each forwards to the function dlsym found. */
#define CURL_DISABLE_TYPECHECK /* the real prototypes, not the checking macros */
#include "lib/curl_lazy.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>

#ifndef CURL_SONAME
#define CURL_SONAME "libcurl.so.4"
#endif

#define CURL_FUNCS(X)                                                                              \
        X(curl_global_init)                                                                        \
        X(curl_easy_init)                                                                          \
        X(curl_easy_cleanup)                                                                       \
        X(curl_easy_reset)                                                                         \
        X(curl_easy_perform)                                                                       \
        X(curl_easy_setopt)                                                                        \
        X(curl_easy_getinfo)                                                                       \
        X(curl_easy_strerror)                                                                      \
        X(curl_easy_escape)                                                                        \
        X(curl_free)                                                                               \
        X(curl_slist_append)                                                                       \
        X(curl_slist_free_all)                                                                     \
        X(curl_url)                                                                                \
        X(curl_url_cleanup)                                                                        \
        X(curl_url_get)                                                                            \
        X(curl_url_set)

/* The prototypes are the headers', so a mismatch is a compile error, not a crash. */
#define DECLARE(f) static __typeof__(f) *p_##f;
CURL_FUNCS(DECLARE)
#undef DECLARE

static int state; /* 0: not tried yet, 1: loaded, -1: failed */

int curl_lazy_load(void)
{
        if (state)
                return state > 0 ? 0 : -ELIBACC;
        state = -1;
        void *h = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return -ELIBACC;
#define LOAD(f)                                                                                    \
        if (!(p_##f = (__typeof__(p_##f))dlsym(h, #f)))                                            \
                return -ELIBACC;
        CURL_FUNCS(LOAD)
#undef LOAD
        state = 1;
        return 0;
}

/* Callers load first (registry_open, registry_policy_add): these only guard against a path
 * that did not, failing the way curl fails when it cannot do something. */
#define READY(fail)                                                                                \
        if (curl_lazy_load() < 0)                                                                  \
                return fail;

CURLcode curl_global_init(long flags)
{
        READY(CURLE_FAILED_INIT);
        return p_curl_global_init(flags);
}

CURL *curl_easy_init(void)
{
        READY(NULL);
        return p_curl_easy_init();
}

void curl_easy_cleanup(CURL *c)
{
        if (state > 0)
                p_curl_easy_cleanup(c);
}

void curl_easy_reset(CURL *c)
{
        if (state > 0)
                p_curl_easy_reset(c);
}

CURLcode curl_easy_perform(CURL *c)
{
        READY(CURLE_FAILED_INIT);
        return p_curl_easy_perform(c);
}

/* The one argument after the option is a long, an object or function pointer, or a
 * curl_off_t (curl_easy_setopt(3)), and getinfo's is a pointer: all one 64-bit word, passed
 * on as one. */
_Static_assert(sizeof(long) == sizeof(void *) && sizeof(curl_off_t) == sizeof(void *),
               "curl's variadic arguments are forwarded as one pointer-sized word");

CURLcode curl_easy_setopt(CURL *c, CURLoption option, ...)
{
        va_list ap;
        va_start(ap, option);
        void *arg = va_arg(ap, void *);
        va_end(ap);
        READY(CURLE_FAILED_INIT);
        return p_curl_easy_setopt(c, option, arg);
}

CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...)
{
        va_list ap;
        va_start(ap, info);
        void *arg = va_arg(ap, void *);
        va_end(ap);
        READY(CURLE_FAILED_INIT);
        return p_curl_easy_getinfo(c, info, arg);
}

const char *curl_easy_strerror(CURLcode code)
{
        READY("libcurl could not be loaded");
        return p_curl_easy_strerror(code);
}

char *curl_easy_escape(CURL *c, const char *s, int len)
{
        READY(NULL);
        return p_curl_easy_escape(c, s, len);
}

void curl_free(void *p)
{
        if (state > 0)
                p_curl_free(p);
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *s)
{
        READY(NULL);
        return p_curl_slist_append(list, s);
}

void curl_slist_free_all(struct curl_slist *list)
{
        if (state > 0)
                p_curl_slist_free_all(list);
}

CURLU *curl_url(void)
{
        READY(NULL);
        return p_curl_url();
}

void curl_url_cleanup(CURLU *u)
{
        if (state > 0)
                p_curl_url_cleanup(u);
}

CURLUcode curl_url_get(CURLU *u, CURLUPart what, char **part, unsigned int flags)
{
        READY(CURLUE_OUT_OF_MEMORY);
        return p_curl_url_get(u, what, part, flags);
}

CURLUcode curl_url_set(CURLU *u, CURLUPart what, const char *part, unsigned int flags)
{
        READY(CURLUE_OUT_OF_MEMORY);
        return p_curl_url_set(u, what, part, flags);
}
