/* Readable log lines on stderr: "2026-11-30T23:40:00Z paddockd[123]: info: message"; under
 * systemd (stderr is the journal's stream) "<6>message", the journal adding time and pid. */
#pragma once

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

#include <stdbool.h>

void log_set_level(enum log_level l);
/* Whether a message of this level is written: for work done only to build one. */
bool log_enabled(enum log_level l);
void log_msg(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
