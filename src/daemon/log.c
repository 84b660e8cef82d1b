/* The daemon's log: one line per message on stderr, UTC timestamp first. */
#include "daemon/log.h"
#include "lib/util.h"

#include <stdarg.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level l)
{
        min_level = l;
}

bool log_enabled(enum log_level l)
{
        return l >= min_level;
}

/* stderr is journald's stream (systemd sets JOURNAL_STREAM=DEV:INODE of it): the journal adds
 * the time and pid itself, and takes the level from a "<N>" prefix (sd-daemon(3)). */
static bool to_journal(void)
{
        static int cached = -1;
        if (cached < 0) {
                const char *js = getenv("JOURNAL_STREAM");
                unsigned long long dev, ino;
                struct stat st;
                cached = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
                         fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
        }
        return cached;
}

void log_msg(enum log_level l, const char *fmt, ...)
{
        static const char *const names[] = {"debug", "info", "warning", "error"};
        static const int syslog_prio[] = {7, 6, 4, 3};
        if (l < min_level)
                return;
        char line[2048], ts[RFC3339_SIZE];
        int n = to_journal() ? snprintf(line, sizeof(line), "<%d>", syslog_prio[l])
                             : snprintf(line, sizeof(line), "%s paddockd[%d]: %s: ",
                                        format_rfc3339(wall_s(), ts), (int)getpid(), names[l]);
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
