/* The systemd readiness protocol (sd_notify(3)), without libsystemd: one datagram to the
 * socket named by $NOTIFY_SOCKET. A unit with Type=notify (dist/paddockd.service.in) is
 * "started" once the API socket answers, so units ordered after it can use it at once. */
#pragma once

/* Takes $NOTIFY_SOCKET out of the environment (no child inherits it); call first. */
void sd_notify_init(void);
/* "READY=1", "STOPPING=1", "STATUS=..." lines; a no-op outside systemd. */
void sd_notify_send(const char *state);
