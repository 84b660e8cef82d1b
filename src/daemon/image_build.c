/* paddock image build: an image job whose helper runs mmdebstrap and unpacks its tar.
 *
 * mmdebstrap --mode=unshare (as root: its own mount and pid namespaces, so a killed build
 * leaves no mounts) writes a tar into the partial directory; the helper then unpacks it like
 * any import (chrooted, devices skipped, owners in 0..65535). mmdebstrap itself runs as pid 1
 * of a fresh pid namespace with PR_SET_PDEATHSIG: when the helper dies (the daemon died, or
 * the job was cancelled) the kernel kills every process of the build.
 *
 * Trust: package maintainer scripts run as root in the build chroot. Packages therefore come
 * either from a Debian mirror over http(s), checked by apt against Debian's archive keys, or
 * from a local mirror the host's admin placed in <root>/mirrors/NAME (a flat repository:
 * NAME/Packages and the .debs), never from a path an API client names.
 *
 * Without a mirror in the request the build uses the archive the host's apt uses
 * (aptsources.h), through the proxy the host's apt is configured with (apt-config): an admin's
 * mirror and proxy choices hold for builds too, and no archive is named here. */
#include "daemon/image_job.h"
#include "daemon/log.h"
#include "lib/aptsources.h"
#include "lib/image.h"
#include "lib/util.h"

#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define PROXY_MAX 512

struct build_arg {
        struct image_build_spec spec;
        char local_mirror[PATH_MAX]; /* resolved <root>/mirrors/NAME, or "" */
        char mirror_from[PATH_MAX];  /* the host's apt file the mirror came from, or "" */
        char apt_dir[PATH_MAX];
};

/* apt's proxies for http and https (Acquire::http(s)::Proxy) as the host's apt-config says,
 * "" when none. Runs in the helper: apt parses apt's own configuration. A value apt could not
 * take back inside quotes is dropped. */
static void host_apt_proxies(const char *apt_dir, char http[PROXY_MAX], char https[PROXY_MAX])
{
        http[0] = https[0] = 0;
        char conf[PATH_MAX + 32] = "";
        /* Another directory than /etc/apt is the helper's read-only mount of it. */
        if (strcmp(apt_dir, "/etc/apt") != 0 &&
            BUF_PRINTF(conf, "APT_CONFIG=%s/apt/apt.conf", IMAGE_HELPER_DIR) < 0)
                return;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return;
        pid_t pid = fork();
        if (pid == 0) {
                if (dup2(p[1], STDOUT_FILENO) < 0)
                        _exit(127);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null >= 0)
                        dup2(null, STDIN_FILENO), dup2(null, STDERR_FILENO);
                char *argv[] = {"apt-config", "shell", "H", "Acquire::http::Proxy", "S",
                                "Acquire::https::Proxy", NULL};
                char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", conf, NULL};
                if (!conf[0])
                        envp[2] = NULL;
                execve("/usr/bin/apt-config", argv, envp);
                _exit(127);
        }
        close(p[1]);
        char out[2 * PROXY_MAX + 64];
        ssize_t n = pid > 0 ? read_full(p[0], out, sizeof(out) - 1) : -1;
        close(p[0]);
        if (pid > 0)
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        if (n <= 0)
                return;
        out[n] = 0;
        /* H='http://proxy:3142' */
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                size_t len = strlen(line);
                if (len < 5 || line[1] != '=' || line[2] != '\'' || line[len - 1] != '\'')
                        continue;
                line[len - 1] = 0;
                const char *v = line + 3;
                if (strpbrk(v, "\"'\\;{}") || strlen(v) >= PROXY_MAX)
                        continue;
                snprintf(line[0] == 'H' ? http : https, PROXY_MAX, "%s", v);
        }
}

static _Noreturn void exec_mmdebstrap(const struct build_arg *a, const char *partial, int out)
{
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0)
                _exit(127);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0)
                dup2(null, STDIN_FILENO);
        close_fds_from(3, NULL, 0);
        char variant[48], include[sizeof(a->spec.packages) + 16], tar[PATH_MAX], tmpdir[PATH_MAX];
        char source[PATH_MAX + 64];
        char http[PROXY_MAX], https[PROXY_MAX];
        char http_opt[PROXY_MAX + 48] = "", https_opt[PROXY_MAX + 48] = "";
        host_apt_proxies(a->apt_dir, http, https);
        if ((http[0] &&
             BUF_PRINTF(http_opt, "--aptopt=Acquire::http::Proxy \"%s\"", http) < 0) ||
            (https[0] &&
             BUF_PRINTF(https_opt, "--aptopt=Acquire::https::Proxy \"%s\"", https) < 0))
                http_opt[0] = https_opt[0] = 0; /* cannot happen: the buffers fit */
        if (!a->local_mirror[0] && (http[0] || https[0]))
                dprintf(STDERR_FILENO, "I: proxy from the host's apt: %s%s%s\n", http,
                        http[0] && https[0] ? ", https: " : "", https);
        if (BUF_PRINTF(variant, "--variant=%s", a->spec.variant) < 0 ||
            BUF_PRINTF(include, "--include=%s", a->spec.packages) < 0 ||
            BUF_PRINTF(tar, "%s/rootfs.tar", partial) < 0 ||
            BUF_PRINTF(tmpdir, "TMPDIR=%s/tmp", partial) < 0 ||
            (a->local_mirror[0]
                 ? BUF_PRINTF(source, "deb [trusted=yes] copy://%s ./", IMAGE_HELPER_DIR "/mirror")
                 : BUF_PRINTF(source, "deb %s %s main", a->spec.mirror, a->spec.suite)) < 0) {
                dprintf(STDERR_FILENO, "E: cannot run mmdebstrap: %s\n", strerror(ENAMETOOLONG));
                _exit(127);
        }
        char *argv[14];
        int n = 0;
        argv[n++] = "mmdebstrap";
        argv[n++] = "--mode=unshare";
        argv[n++] = "--format=tar";
        argv[n++] = variant;
        if (http_opt[0] && !a->local_mirror[0])
                argv[n++] = http_opt;
        if (https_opt[0] && !a->local_mirror[0])
                argv[n++] = https_opt;
        if (a->spec.packages[0])
                argv[n++] = include;
        argv[n++] = "--"; /* positionals only from here: a suite is never an option */
        argv[n++] = (char *)a->spec.suite;
        argv[n++] = tar;
        argv[n++] = source;
        argv[n] = NULL;
        char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root", tmpdir,
                        NULL};
        execve("/usr/bin/mmdebstrap", argv, envp);
        dprintf(STDERR_FILENO, "E: cannot run mmdebstrap: %s (install the mmdebstrap package)\n",
                strerror(errno));
        _exit(127);
}

/* mmdebstrap's output, line by line, as progress; its first "E: " line is the error (apt's
 * own reason; mmdebstrap's summary follows it). */
static void relay_output(int fd, char *first_error, size_t len)
{
        FILE *f = fdopen(fd, "r");
        if (!f) {
                close(fd);
                return;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0) {
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                        line[--n] = 0;
                if (n == 0)
                        continue;
                image_progress("%.900s", line);
                if (strncmp(line, "E: ", 3) == 0 && !first_error[0])
                        snprintf(first_error, len, "%s", line + 3);
        }
        free(line);
        fclose(f);
}

static int fill_from_mmdebstrap(const char *partial, const char *rootfs, void *arg, char *err,
                                size_t errlen)
{
        const struct build_arg *a = arg;
        _cleanup_free_ char *tmp = path_join(partial, "tmp");
        _cleanup_free_ char *tar = path_join(partial, "rootfs.tar");
        if (!tmp || !tar) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        if (mkdir(tmp, 0700) < 0) {
                snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
                return -errno;
        }
        image_progress("building debian:%s (%s)%s%s with mmdebstrap", a->spec.suite,
                       a->spec.variant, a->spec.packages[0] ? " with " : "", a->spec.packages);
        if (a->mirror_from[0])
                image_progress("mirror %s (the host's apt: %s)", a->spec.mirror, a->mirror_from);
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0 || unshare(CLONE_NEWPID) < 0) {
                snprintf(err, errlen, "cannot start mmdebstrap: %s", strerror(errno));
                return -errno;
        }
        pid_t pid = fork();
        if (pid < 0) {
                snprintf(err, errlen, "fork: %s", strerror(errno));
                return -errno;
        }
        if (pid == 0)
                exec_mmdebstrap(a, partial, p[1]);
        close(p[1]);
        char first_error[512] = "";
        relay_output(p[0], first_error, sizeof(first_error));
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                snprintf(err, errlen, "mmdebstrap failed: %s",
                         first_error[0] ? first_error : "see the progress output");
                return -EINVAL;
        }
        _cleanup_close_ int fd = open(tar, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                snprintf(err, errlen, "mmdebstrap made no tar: %s", strerror(errno));
                return -errno;
        }
        image_progress("unpacking");
        uint64_t bytes = 0;
        int r = image_unpack(fd, rootfs, &bytes, err, errlen);
        if (r < 0)
                return r;
        image_report_size(bytes);
        return 0;
}

int engine_image_build(struct engine *e, const struct image_build_spec *spec,
                       const struct image_callbacks *cb, struct image_job **ret_job, char *err,
                       size_t errlen)
{
        static struct build_arg a; /* large; the helper gets its own copy at fork */
        memset(&a, 0, sizeof(a));
        a.spec = *spec;
        if (!a.spec.variant[0])
                snprintf(a.spec.variant, sizeof(a.spec.variant), "minbase");
        if (BUF_PRINTF(a.apt_dir, "%s", engine_apt_dir(e)) < 0) {
                snprintf(err, errlen, "the apt configuration directory's name is too long");
                return -ENAMETOOLONG;
        }
        if (!a.spec.mirror[0]) {
                int r = apt_host_mirror(a.apt_dir, a.spec.mirror, sizeof(a.spec.mirror),
                                        a.mirror_from, sizeof(a.mirror_from));
                if (r < 0) {
                        snprintf(err, errlen,
                                 "no Debian mirror to build from: the host's apt (%s/sources.list "
                                 "and sources.list.d) has no deb source with a release suite and "
                                 "main%s; give one with --mirror URL or local:NAME",
                                 a.apt_dir, r == -ENOENT ? "" : " that could be read");
                        return -ENOENT;
                }
        }
        if (!strncmp(spec->mirror, "local:", 6)) {
                struct stat st;
                char packages[PATH_MAX];
                if (BUF_PRINTF(a.local_mirror, "%s/mirrors/%s", engine_root(e), spec->mirror + 6) <
                        0 ||
                    BUF_PRINTF(packages, "%s/Packages", a.local_mirror) < 0 ||
                    stat(packages, &st) < 0 || !S_ISREG(st.st_mode)) {
                        snprintf(err, errlen,
                                 "no local mirror %s (a flat repository with a Packages file in "
                                 "%s/mirrors/%s)",
                                 spec->mirror + 6, engine_root(e), spec->mirror + 6);
                        return -ENOENT;
                }
        }
        /* mmdebstrap unshares its own mount and pid namespaces; the local mirror is read
         * through the helper's own mount of it. */
        static struct image_helper_opts opts;
        opts = (struct image_helper_opts){.mirror = a.local_mirror[0] ? a.local_mirror : NULL,
                                          .apt = strcmp(a.apt_dir, "/etc/apt") ? a.apt_dir : NULL,
                                          .own_namespaces = true};
        return image_job_start(e, spec->name, "build", fill_from_mmdebstrap, &a, -1, &opts, cb,
                               ret_job, err, errlen);
}
