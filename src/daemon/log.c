/* The daemon's log: one line per message on stderr, UTC timestamp first. */
#include "daemon/log.h"
#include "lib/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level l)
{
        min_level = l;
}

void log_msg(enum log_level l, const char *fmt, ...)
{
        static const char *const names[] = {"debug", "info", "warning", "error"};
        if (l < min_level)
                return;
        char line[2048], ts[RFC3339_SIZE];
        int n = snprintf(line, sizeof(line), "%s paddockd[%d]: %s: ", format_rfc3339(wall_s(), ts),
                         (int)getpid(), names[l]);
        va_list ap;
        va_start(ap, fmt);
        if (n > 0 && (size_t)n < sizeof(line))
                n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n >= sizeof(line) - 1)
                n = (int)sizeof(line) - 2;
        line[n++] = '\n';
        (void)!write(STDERR_FILENO, line, (size_t)n); /* one write: lines never interleave */
}
