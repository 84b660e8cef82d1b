#include "cli/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The host part is never resolved: CURLOPT_UNIX_SOCKET_PATH decides where we connect. */
#define BASE_URL "http://localhost"
/* A buffered response larger than this is not something paddockd sends; refuse to hoard it. */
#define MAX_BUFFERED_BODY (64u << 20)

struct transfer {
        CURL *curl;
        const struct request *req;
        struct response *resp;
        bool aborted; /* a sink or source stopped the transfer and has said why */
        bool too_large;
};

int client_open(struct client *c, const char *socket_path)
{
        c->socket_path = socket_path;
        c->errbuf[0] = 0;
        c->curl = curl_easy_init();
        if (!c->curl) {
                fprintf(stderr, "paddock: cannot initialise libcurl\n");
                return -1;
        }
        return 0;
}

void client_close(struct client *c)
{
        if (c->curl)
                curl_easy_cleanup(c->curl);
        c->curl = NULL;
}

char *client_escape(struct client *c, const char *s)
{
        char *e = curl_easy_escape(c->curl, s, 0);
        if (!e)
                return NULL;
        char *copy = strdup(e);
        curl_free(e);
        return copy;
}

void response_done(struct response *r)
{
        free(r->body);
        if (r->json)
                json_decref(r->json);
        memset(r, 0, sizeof(*r));
}

static bool status_ok(long status)
{
        return status >= 200 && status < 300;
}

static bool buffer_append(struct transfer *t, const char *data, size_t len)
{
        struct response *r = t->resp;
        if (r->len + len > MAX_BUFFERED_BODY) {
                t->too_large = true;
                return false;
        }
        char *n = realloc(r->body, r->len + len + 1);
        if (!n)
                return false;
        memcpy(n + r->len, data, len);
        r->len += len;
        n[r->len] = 0;
        r->body = n;
        return true;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct transfer *t = userdata;
        size_t len = size * nmemb;
        long status = 0;
        curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
        /* Error responses are always buffered, so they can be printed as one message. */
        if (t->req->sink && status_ok(status)) {
                if (!t->req->sink(data, len, t->req->sink_data)) {
                        t->aborted = true;
                        return 0;
                }
                return len;
        }
        return buffer_append(t, data, len) ? len : 0;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *userdata)
{
        struct transfer *t = userdata;
        ssize_t n = t->req->source(buf, size * nitems, t->req->source_data);
        if (n < 0) {
                t->aborted = true;
                return CURL_READFUNC_ABORT;
        }
        return (size_t)n;
}

static void print_transport_error(struct client *c, CURLcode rc)
{
        const char *reason = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
        if (rc == CURLE_COULDNT_CONNECT) {
                /* curl's own text names a TCP port; the errno of connect(2) says what is wrong
                 * with the socket (missing, refused, permission). */
                long os_errno = 0;
                curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
                if (os_errno > 0)
                        reason = strerror((int)os_errno);
                fprintf(stderr, "paddock: cannot connect to paddockd at %s: %s\n", c->socket_path,
                        reason);
                return;
        }
        fprintf(stderr, "paddock: request to paddockd at %s failed: %s\n", c->socket_path, reason);
}

static int setup(struct client *c, const struct request *req, struct transfer *t,
                 struct curl_slist **headers, char **url)
{
        CURL *h = c->curl;
        curl_easy_reset(h); /* keeps the connection for the next request */
        c->errbuf[0] = 0;
        if (asprintf(url, "%s%s", BASE_URL, req->path) < 0) {
                *url = NULL;
                return -1;
        }
        curl_easy_setopt(h, CURLOPT_URL, *url);
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket_path);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "paddock-cli");
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, t);

        const char *ct = req->content_type;
        if (req->source) {
                curl_easy_setopt(h, CURLOPT_POST, 1L);
                curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(h, CURLOPT_READDATA, t);
                /* Unknown size: curl sends the body chunked, so an aborted upload can never
                 * be mistaken for a complete one. */
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->source_size);
        } else if (req->body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
                if (!ct)
                        ct = "application/json";
        } else if (strcmp(req->method, "POST") == 0) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
                if (!ct)
                        ct = ""; /* no body: drop curl's form-urlencoded default */
        }
        if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "POST") != 0)
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);

        if (ct) {
                char line[128];
                /* "Content-Type:" with nothing after it makes curl send no such header. */
                snprintf(line, sizeof(line), "Content-Type:%s%s", *ct ? " " : "", ct);
                struct curl_slist *n = curl_slist_append(*headers, line);
                if (!n)
                        return -1;
                *headers = n;
        }
        if (*headers)
                curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
        return 0;
}

int client_perform(struct client *c, const struct request *req, struct response *ret)
{
        struct response resp = {};
        struct transfer t = {.curl = c->curl, .req = req, .resp = &resp};
        struct curl_slist *headers = NULL;
        char *url = NULL;
        int r = -1;

        if (setup(c, req, &t, &headers, &url) < 0) {
                fprintf(stderr, "paddock: out of memory\n");
                goto out;
        }
        CURLcode rc = curl_easy_perform(c->curl);
        if (t.aborted)
                goto out;
        if (t.too_large) {
                fprintf(stderr, "paddock: response from paddockd is larger than %u MiB\n",
                        MAX_BUFFERED_BODY >> 20);
                goto out;
        }
        if (rc != CURLE_OK) {
                print_transport_error(c, rc);
                goto out;
        }
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &resp.status);
        if (resp.body)
                resp.json = json_loadb(resp.body, resp.len, 0, NULL);
        *ret = resp;
        memset(&resp, 0, sizeof(resp));
        r = 0;
out:
        response_done(&resp);
        curl_slist_free_all(headers);
        free(url);
        return r;
}

void client_print_error(const struct response *r)
{
        json_t *err = r->json ? json_object_get(r->json, "error") : NULL;
        const char *msg = json_string_value(json_object_get(err, "message"));
        if (!msg && json_is_string(err))
                msg = json_string_value(err);
        if (msg && *msg) {
                /* One line, whatever the daemon sent. */
                int n = (int)strcspn(msg, "\r\n");
                fprintf(stderr, "paddock: %.*s\n", n, msg);
                return;
        }
        const char *body = r->body ? r->body : "";
        int n = (int)strcspn(body, "\r\n");
        if (n > 200)
                n = 200;
        if (n > 0)
                fprintf(stderr, "paddock: paddockd answered HTTP %ld: %.*s\n", r->status, n, body);
        else
                fprintf(stderr, "paddock: paddockd answered HTTP %ld\n", r->status);
}

int client_call(struct client *c, const char *method, const char *path, const json_t *body,
                struct response *ret)
{
        char *text = NULL;
        if (body) {
                text = json_dumps(body, JSON_COMPACT);
                if (!text) {
                        fprintf(stderr, "paddock: out of memory\n");
                        return -1;
                }
        }
        struct request req = {
            .method = method,
            .path = path,
            .body = text,
            .body_len = text ? strlen(text) : 0,
        };
        struct response resp = {};
        int r = client_perform(c, &req, &resp);
        free(text);
        if (r < 0)
                return -1;
        if (!status_ok(resp.status)) {
                client_print_error(&resp);
                response_done(&resp);
                return -1;
        }
        *ret = resp;
        return 0;
}
