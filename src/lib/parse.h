/* Parsing of user-supplied values: sizes, durations, rates, CPU counts, names.
 * Every parser rejects trailing garbage, overflow and negative values with -EINVAL / -ERANGE. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "512M", "2G", "1.5G", "4096", "64k" (binary units: K=1024). */
int parse_size(const char *s, uint64_t *ret);
/* "90s", "30m", "24h", "7d", "1500ms" rounded up to whole seconds, or a bare number of seconds. */
int parse_duration_s(const char *s, uint64_t *ret);
/* "10mbit", "1gbit", "500kbit", "2mbyte" -> bits per second. */
int parse_rate_bps(const char *s, uint64_t *ret);
/* "1", "0.5", "2.25" -> millicpus (1000 = one CPU). Range 0.01..1024. */
int parse_cpus(const char *s, uint64_t *ret_millicpus);
/* Environment / image names: [A-Za-z0-9][A-Za-z0-9_.-]{0,62} (NAME_LEN_MAX, lib/paddock.h). */
bool name_is_valid(const char *s);
/* Format bytes with the largest binary unit that divides them exactly ("512M", "1536M"). */
const char *format_size(uint64_t bytes, char *buf, size_t len);
