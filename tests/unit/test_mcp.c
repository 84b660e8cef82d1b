/* paddock mcp without a daemon: the JSON Schema subset its tools' arguments are checked
 * against, output clipping (sizes, notes, UTF-8 kept whole, bad bytes replaced), and the
 * JSON-RPC side (errors for every kind of malformed message, version negotiation, tools/list,
 * tools/call refusing bad arguments, a daemon that cannot be reached as a tool error), plus
 * random bytes that must never crash it.
 *
 * The protocol and the tools are in libpaddock.a (src/lib/mcp*.c); the backend that reaches a
 * daemon is the CLI's, so its sources are compiled into this file (as test_http_client.c
 * does). */
#include "../../src/cli/client.c"
#include "../../src/cli/hostkey.c"
#include "../../src/cli/mcp_client.c"
#include "../../src/cli/tls.c"
#include "../../src/cli/transport.c"

/* This build links libwslay and libnettle (LIB_LIBS), so the CLI's loaders of them stand idle;
 * src/cli/lazylib.c itself, whose forwarders would shadow the libraries, is left out. */
int lazy_wslay(void)
{
        return 0;
}

int lazy_nettle(void)
{
        return 0;
}

#include "unit.h"

static int check(const char *schema_text, const char *value_text, char *why, size_t len)
{
        json_t *schema = json_loads(schema_text, 0, NULL);
        json_t *v = json_loads(value_text, JSON_DECODE_ANY, NULL);
        CHECK(schema && v);
        int r = mcp_schema_check(schema, v, "", why, len);
        json_decref(schema);
        json_decref(v);
        return r;
}

static void test_schema(void)
{
        const char *s =
            "{\"type\":\"object\",\"properties\":{"
            "\"a\":{\"type\":\"string\",\"minLength\":1},"
            "\"n\":{\"type\":\"integer\",\"minimum\":1},"
            "\"k\":{\"type\":\"string\",\"enum\":[\"x\",\"y\"]},"
            "\"c\":{\"type\":[\"array\",\"string\"],\"items\":{\"type\":\"string\"},"
            "\"minItems\":1},"
            "\"m\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
            "\"o\":{\"type\":\"object\",\"additionalProperties\":false,"
            "\"properties\":{\"z\":{\"type\":\"boolean\"}}}},"
            "\"required\":[\"a\"],\"additionalProperties\":false}";
        char why[256];
        CHECK_EQ_INT(check(s, "{\"a\":\"v\"}", why, sizeof(why)), 0);
        CHECK_EQ_INT(check(s,
                           "{\"a\":\"v\",\"n\":3,\"k\":\"y\",\"c\":\"ls\",\"m\":{\"q\":\"r\"},"
                           "\"o\":{\"z\":true}}",
                           why, sizeof(why)),
                     0);
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"c\":[\"ls\",\"-l\"],\"n\":2.0}", why, sizeof(why)),
                     0);

        CHECK_EQ_INT(check(s, "{}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "missing required property \"a\"");
        CHECK_EQ_INT(check(s, "[]", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "arguments: expected object");
        CHECK_EQ_INT(check(s, "{\"a\":\"\"}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "a: too short");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"b\":1}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "b: unknown property");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"n\":0}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "n: must be at least 1");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"n\":1.5}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "n: expected integer");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"k\":\"w\"}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "k: must be one of x, y");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"c\":7}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "c: expected array or string");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"c\":[]}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "c: too few items");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"c\":[\"x\",null]}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "c[1]: expected string");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"m\":{\"q\":1}}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "m.q: expected string");
        CHECK_EQ_INT(check(s, "{\"a\":\"v\",\"o\":{\"y\":1}}", why, sizeof(why)), -EINVAL);
        CHECK_EQ_STR(why, "o.y: unknown property");
        /* A message cut to the buffer, not past it. */
        char tiny[8];
        CHECK_EQ_INT(check(s, "{}", tiny, sizeof(tiny)), -EINVAL);
        CHECK_EQ_INT(strlen(tiny), sizeof(tiny) - 1);
}

static void test_clip_short_and_exact(void)
{
        size_t cut = 99;
        char *o = mcp_clip_output("hello\n", 6, "stdout", &cut);
        CHECK_EQ_STR(o, "hello\n");
        CHECK_EQ_INT(cut, 0);
        free(o);
        char *big = malloc(MCP_STREAM_MAX);
        memset(big, 'x', MCP_STREAM_MAX);
        o = mcp_clip_output(big, MCP_STREAM_MAX, "stdout", &cut);
        CHECK_EQ_INT(cut, 0);
        CHECK_EQ_INT(strlen(o), MCP_STREAM_MAX);
        free(o);
        free(big);
}

static void test_clip_long(void)
{
        size_t len = 300000, cut = 0;
        char *big = malloc(len);
        for (size_t i = 0; i < len; i++)
                big[i] = (char)('a' + i % 26);
        char *o = mcp_clip_output(big, len, "stderr", &cut);
        CHECK_EQ_INT(cut, len - MCP_STREAM_MAX);
        CHECK(strncmp(o, big, MCP_STREAM_HEAD) == 0);
        size_t tail = MCP_STREAM_MAX - MCP_STREAM_HEAD;
        CHECK(memcmp(o + strlen(o) - tail, big + len - tail, tail) == 0);
        char note[200];
        snprintf(note, sizeof(note),
                 "\n[... %zu bytes of stderr cut here: it had %zu bytes; the first %u and the "
                 "last %zu are shown ...]\n",
                 len - MCP_STREAM_MAX, len, MCP_STREAM_HEAD, tail);
        CHECK(strstr(o, note) == o + MCP_STREAM_HEAD);
        free(o);
        free(big);
}

static void test_clip_utf8(void)
{
        /* "é" (2 bytes) everywhere: both cuts must fall between characters. */
        size_t len = 2 * 100000, cut = 0;
        char *big = malloc(len);
        for (size_t i = 0; i < len; i += 2)
                memcpy(big + i, "\xc3\xa9", 2);
        char *o = mcp_clip_output(big, len, "stdout", &cut);
        CHECK(utf8_valid(o, strlen(o)));
        CHECK(cut > 0 && cut % 2 == 0);
        free(o);
        free(big);
        /* Bad bytes and NUL become U+FFFD; good ones stay. */
        o = mcp_clip_output("a\xff"
                            "b\0c\xc3\xa9\xe2\x82",
                            9, "stdout", &cut);
        CHECK_EQ_STR(o, "a\xef\xbf\xbd"
                        "b\xef\xbf\xbd"
                        "c\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd");
        free(o);
}

static json_t *handle(struct mcp_server *s, const char *text)
{
        return mcp_server_handle(s, text, strlen(text));
}

static long long error_code(const json_t *reply)
{
        return json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static void test_rpc_errors(void)
{
        struct client c;
        client_open(&c, "/nonexistent/paddock.sock");
        struct mcp_server s = {.backend = mcp_client_backend(&c)};
        static const struct {
                const char *in;
                long long code;
        } cases[] = {
            {"not json", MCP_PARSE_ERROR},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"", MCP_PARSE_ERROR},
            {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", MCP_INVALID_REQUEST},
            {"42", MCP_INVALID_REQUEST},
            {"{\"jsonrpc\":\"2.0\",\"id\":1}", MCP_INVALID_REQUEST},
            {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", MCP_INVALID_REQUEST},
            {"{\"id\":1,\"method\":\"ping\"}", MCP_INVALID_REQUEST},
            {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", MCP_INVALID_REQUEST},
            {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", MCP_INVALID_REQUEST},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}",
             MCP_INVALID_PARAMS},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/list\"}", MCP_METHOD_NOT_FOUND},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
             MCP_INVALID_PARAMS},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}",
             MCP_INVALID_PARAMS},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
             MCP_INVALID_PARAMS},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"run_command\",\"arguments\":{\"environment\":\"e\"}}}",
             MCP_INVALID_PARAMS},
            {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"list_environments\",\"arguments\":\"x\"}}",
             MCP_INVALID_PARAMS},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *r = handle(&s, cases[i].in);
                if (error_code(r) != cases[i].code)
                        fprintf(stderr, "  case %zu: %s\n", i, cases[i].in);
                CHECK_EQ_INT(error_code(r), cases[i].code);
                CHECK_EQ_STR(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
                json_decref(r);
        }
        /* Notifications and responses are not answered. */
        CHECK(!handle(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
        CHECK(s.initialized);
        CHECK(!handle(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                          "\"params\":{\"requestId\":1}}"));
        CHECK(!handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}"));
}

static void test_rpc_initialize_and_tools(void)
{
        struct client c;
        client_open(&c, "/nonexistent/paddock.sock");
        struct mcp_server s = {.backend = mcp_client_backend(&c)};
        json_t *r = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\","
                               "\"params\":{\"protocolVersion\":\"2025-03-26\"}}");
        CHECK_EQ_STR(json_string_value(json_object_get(r, "id")), "a");
        CHECK_EQ_STR(
            json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
            "2025-03-26");
        json_decref(r);
        r = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\","
                       "\"params\":{\"protocolVersion\":\"2099-01-01\"}}");
        CHECK_EQ_STR(
            json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
            MCP_LATEST_VERSION);
        json_decref(r);
        r = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
        json_t *list = json_object_get(json_object_get(r, "result"), "tools");
        CHECK_EQ_INT(json_array_size(list), 13 /* every tool of src/lib/mcp_tools.c, none unlisted by a bad schema */);
        size_t i;
        json_t *t;
        json_array_foreach(list, i, t)
        {
                json_t *schema = json_object_get(t, "inputSchema");
                CHECK_EQ_STR(json_string_value(json_object_get(schema, "type")), "object");
                CHECK(json_is_false(json_object_get(schema, "additionalProperties")));
        }
        json_decref(r);
        /* A daemon that cannot be reached: a tool error saying so, not a protocol error. */
        r = handle(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":"
                       "{\"name\":\"list_environments\",\"arguments\":{}}}");
        json_t *result = json_object_get(r, "result");
        CHECK(json_is_true(json_object_get(result, "isError")));
        const char *text = json_string_value(
            json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
        CHECK(text && strstr(text, "cannot connect to paddockd at /nonexistent/paddock.sock"));
        json_decref(r);
}

/* Random bytes and mangled messages: always an answer or nothing, never a crash (ASan runs
 * this too). */
static void test_rpc_garbage(void)
{
        struct client c;
        client_open(&c, "/nonexistent/paddock.sock");
        struct mcp_server s = {.backend = mcp_client_backend(&c)};
        static const char *const seeds[] = {
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"create_environment\",\"arguments\":{\"name\":\"x\",\"network\":{\"mode\":\"open\"}}}"
            "}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
            "\"protocolVersion\":1}}",
        };
        unsigned seed = 12345;
        for (int round = 0; round < 4000; round++) {
                const char *base = seeds[round % ELEMENTSOF(seeds)];
                char buf[512];
                size_t len = strlen(base);
                memcpy(buf, base, len);
                for (int k = 0; k < 3; k++) {
                        seed = seed * 1103515245 + 12345;
                        buf[(seed >> 8) % len] = (char)(seed >> 20);
                }
                json_t *r = mcp_server_handle(&s, buf, len);
                CHECK(!r || json_is_object(r));
                json_decref(r);
        }
}

int main(void)
{
        RUN(test_schema);
        RUN(test_clip_short_and_exact);
        RUN(test_clip_long);
        RUN(test_clip_utf8);
        RUN(test_rpc_errors);
        RUN(test_rpc_initialize_and_tools);
        RUN(test_rpc_garbage);
        UNIT_EXIT();
}
