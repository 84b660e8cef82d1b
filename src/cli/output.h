/* What the CLI prints on stdout: aligned tables for people, JSON for programs. */
#pragma once

#include "cli/client.h"

#include <jansson.h>
#include <stdint.h>
#include <time.h>

/* JSON indented by two spaces, with a newline. */
void output_json(const json_t *j);
/* The response body exactly as the daemon sent it (what --json promises), newline-ended. */
void output_raw(const struct response *r);
/* The JSON unless --json asked for the raw body. */
void output_object(const struct response *r, bool raw);

/* A table printed with columns as wide as their widest cell, two spaces apart. */
struct table;
struct table *table_new(const char *const *headers, size_t n_cols);
/* Copies the n_cols cells; NULL cells print as "-". */
int table_add(struct table *t, const char *const *cells);
void table_print(const struct table *t);
void table_free(struct table *t);

/* "512M", "1.5G", "12K", "100B": binary units, at most one decimal. */
const char *human_size(uint64_t bytes, char *buf, size_t len);
/* Bits per second as the daemon's rate units read: "10mbit", "1.5gbit", "500kbit", "64bit". */
const char *human_rate(uint64_t bps, char *buf, size_t len);
/* "just now", "42s ago", "5m ago", "3h ago", "2d ago" / "in 55m", "expired". */
const char *human_ago(time_t t, time_t now, char *buf, size_t len);
const char *human_until(time_t t, time_t now, char *buf, size_t len);

/* A timestamp as the daemon writes it ("2026-11-30T23:40:00Z", or epoch seconds). 0 on success;
 * -1 for null or anything unreadable. */
int json_timestamp(const json_t *v, time_t *ret);
