/* The least a process can do for `paddock exec sb -- true`, for bench/cli.py's floor row: libc
 * only, the request the CLI sends (stream:true) in one write on a new unix-socket connection,
 * read until the end of the chunked answer, exit 0 when the exit line says 0. No JSON, no
 * options, no error messages: what is left of the CLI's time above this is its own.
 *
 *   cc -O2 -o cli_floor bench/cli_floor.c && ./cli_floor SOCKET ENV */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
        static char req[1024], buf[1 << 16];
        static const char body[] = "{\"cmd\":[\"true\"],\"stream\":true}";
        if (argc != 3 || strlen(argv[1]) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return 2;
        int n = snprintf(req, sizeof(req),
                         "POST /v1/envs/%s/exec HTTP/1.1\r\nHost: localhost\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                         argv[2], sizeof(body) - 1, body);
        if (n < 0 || (size_t)n >= sizeof(req))
                return 2;
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        strcpy(a.sun_path, argv[1]);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
                return 1;
        size_t got = 0;
        while (got < sizeof(buf) - 1) {
                ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
                if (r <= 0)
                        break;
                got += (size_t)r;
                if (got >= 5 && memcmp(buf + got - 5, "0\r\n\r\n", 5) == 0)
                        break;
        }
        close(fd);
        buf[got] = 0;
        return strstr(buf, "\"exit_code\":0") ? 0 : 1;
}
