/* A WebSocket client of paddockd: a connection of its own (client_connect: the unix socket, or
 * TLS to a remote daemon), the HTTP/1.1 Upgrade handshake by hand, then wslay in client mode
 * (masked frames) on the same transport. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cli/client.h"
#include "cli/transport.h"

#include <wslay/wslay.h>

struct wsc {
        struct transport conn; /* the bytes that came after the 101 response are given back */
        wslay_event_context_ptr ctx;
};

/* Connect and switch protocols on path ("/v1/...", already encoded). On any failure prints why
 * ("paddock: <daemon's message>" for an HTTP error) and returns -1. callbacks' recv, send and
 * genmask are filled in here; user is passed to the others. */
int wsc_open(struct client *client, const char *path,
             const struct wslay_event_callbacks *callbacks, void *user, struct wsc *ret);
void wsc_close(struct wsc *w);
/* Queue one message (opcode 1 text, 2 binary). */
int wsc_send(struct wsc *w, int opcode, const void *buf, size_t len);
int wsc_send_json(struct wsc *w, json_t *j /* stolen */);
