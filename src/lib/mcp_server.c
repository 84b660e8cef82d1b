/* JSON-RPC 2.0 for MCP: the lifecycle (initialize, the initialized notification, ping) and the
 * tools (tools/list, tools/call). Protocol errors (bad JSON, not a request, unknown method or
 * tool, arguments that do not fit a tool's schema) are JSON-RPC errors; a failure of the tool
 * itself (paddockd refused, no such environment) is a result with isError, so the model reads
 * the daemon's message. */
#include "lib/mcp.h"
#include "lib/jsonutil.h"
#include "lib/paddock.h"
#include "lib/util.h"

#include <stdio.h>
#include <string.h>

/* Newest first; the first is what a client asking for something else gets. */
static const char *const versions[] = {MCP_LATEST_VERSION, "2025-03-26", "2024-11-05"};

static const char instructions[] =
    "Paddock runs isolated Linux environments. Create one with create_environment (a throw-away "
    "sandbox, or a persistent computer that can be snapshotted and forked), run commands in it "
    "with run_command (or start_process for long-running ones), move code in and out with "
    "write_file and read_file, and destroy it with destroy_environment when done.";

bool mcp_version_known(const char *v)
{
        for (size_t i = 0; i < ELEMENTSOF(versions); i++)
                if (strcmp(v, versions[i]) == 0)
                        return true;
        return false;
}

json_t *mcp_error(const json_t *id, int code, const char *message)
{
        return json_pack("{sssOs{siss}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
                         "code", code, "message", message);
}

static json_t *reply(const json_t *id, json_t *result)
{
        if (!result)
                return mcp_error(id, MCP_INTERNAL_ERROR, "out of memory");
        return json_pack("{sssOso}", "jsonrpc", "2.0", "id", id, "result", result);
}

bool mcp_is_request(const json_t *msg)
{
        const json_t *id = json_object_get(msg, "id");
        return json_is_string(json_object_get(msg, "method")) &&
               (json_is_string(id) || json_is_integer(id));
}

static json_t *initialize(struct mcp_server *s, const json_t *id, const json_t *params)
{
        const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
        if (!asked)
                return mcp_error(id, MCP_INVALID_PARAMS, "initialize: missing protocolVersion");
        const char *v = versions[0];
        for (size_t i = 0; i < ELEMENTSOF(versions); i++)
                if (strcmp(asked, versions[i]) == 0)
                        v = versions[i];
        snprintf(s->version, sizeof(s->version), "%s", v);
        return reply(id, json_pack("{sss{s{sb}}s{ssssss}ss}", "protocolVersion", v, "capabilities",
                                   "tools", "listChanged", 0, "serverInfo", "name", "paddock",
                                   "title", "Paddock", "version", PADDOCK_VERSION, "instructions",
                                   instructions));
}

static json_t *tools_call(struct mcp_server *s, const json_t *id, const json_t *params)
{
        const char *name = json_string_value(json_object_get(params, "name"));
        const json_t *args = json_object_get(params, "arguments");
        if (!name)
                return mcp_error(id, MCP_INVALID_PARAMS, "tools/call: missing tool name");
        if (args && !json_is_object(args))
                return mcp_error(id, MCP_INVALID_PARAMS, "tools/call: arguments must be an object");
        struct tool_result res = {};
        _cleanup_free_ char *why = NULL;
        int r = mcp_tool_call(&s->backend, name, args, &res, &why);
        if (r == -EINVAL)
                return mcp_error(id, MCP_INVALID_PARAMS, why);
        if (r < 0 || !res.text) {
                tool_result_done(&res);
                return mcp_error(id, MCP_INTERNAL_ERROR, "out of memory");
        }
        json_t *result = json_pack("{s[{ssss}]sb}", "content", "type", "text", "text", res.text,
                                   "isError", res.is_error);
        if (result && res.structured && json_is_object(res.structured))
                json_object_set(result, "structuredContent", res.structured);
        tool_result_done(&res);
        return reply(id, result);
}

static json_t *dispatch(struct mcp_server *s, const json_t *msg)
{
        const json_t *id = json_object_get(msg, "id");
        const char *method = json_string_value(json_object_get(msg, "method"));
        const json_t *params = json_object_get(msg, "params");
        if (params && !json_is_object(params))
                return mcp_error(id, MCP_INVALID_PARAMS, "params must be an object");
        if (strcmp(method, "initialize") == 0)
                return initialize(s, id, params);
        if (strcmp(method, "ping") == 0)
                return reply(id, json_object());
        if (strcmp(method, "tools/list") == 0)
                return reply(id, json_pack("{so}", "tools", mcp_tools_list()));
        if (strcmp(method, "tools/call") == 0)
                return tools_call(s, id, params);
        /* No resources, prompts or completions: say so the standard way. */
        char text[160];
        snprintf(text, sizeof(text), "method not found: %.100s", method);
        return mcp_error(id, MCP_METHOD_NOT_FOUND, text);
}

json_t *mcp_server_handle(struct mcp_server *s, const char *text, size_t len)
{
        json_error_t err;
        _cleanup_json_ json_t *msg = json_loadb(text, len, JSON_DECODE_ANY, &err);
        if (!msg) {
                char why[200];
                snprintf(why, sizeof(why), "parse error: %s (line %d, column %d)", err.text,
                         err.line, err.column);
                return mcp_error(NULL, MCP_PARSE_ERROR, why);
        }
        return mcp_server_handle_message(s, msg);
}

json_t *mcp_server_handle_message(struct mcp_server *s, const json_t *msg)
{
        if (!json_is_object(msg))
                return mcp_error(NULL, MCP_INVALID_REQUEST,
                                 json_is_array(msg) ? "batches are not supported"
                                                    : "a message must be a JSON object");
        const json_t *id = json_object_get(msg, "id");
        bool id_ok = json_is_string(id) || json_is_integer(id);
        const json_t *method = json_object_get(msg, "method");
        if (!json_is_string(method)) {
                /* A response to a request of ours (we send none): nothing to answer. */
                if (id_ok && (json_object_get(msg, "result") || json_object_get(msg, "error")))
                        return NULL;
                return mcp_error(id_ok ? id : NULL, MCP_INVALID_REQUEST,
                                 "not a JSON-RPC 2.0 request: no method");
        }
        if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
            strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0)
                return mcp_error(id_ok ? id : NULL, MCP_INVALID_REQUEST,
                                 "not a JSON-RPC 2.0 request: jsonrpc must be \"2.0\"");
        if (!id) {
                /* Notifications: initialized, cancelled (a call is over by the time it could
                 * be read), anything else is ignored as the protocol asks. */
                if (strcmp(json_string_value(method), "notifications/initialized") == 0)
                        s->initialized = true;
                return NULL;
        }
        if (!id_ok)
                return mcp_error(NULL, MCP_INVALID_REQUEST, "id must be a string or an integer");
        return dispatch(s, msg);
}
