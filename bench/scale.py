#!/usr/bin/python3
"""Paddock at scale: what every request costs as the population grows.

Starts a private paddockd the way the integration tests do (tests/conftest.py's Daemon: its
own --root under /var/tmp, socket, uid registry and network namespace), imports the busybox
image, then for each N in BENCH_SCALE_N (default "0 100 1000") grows the population to N
environments (half networked computers, "network":{"mode":"open"}, half sandboxes without
network; BENCH_SCALE_NET=0: all sandboxes) and measures over the raw unix socket, keep-alive:

  - ls:       GET /v1/envs (what `paddock ls` asks), median of BENCH_LIST_RUNS
  - inspect:  GET /v1/envs/NAME, median of BENCH_RUNS
  - exec:     POST /v1/envs/NAME/exec {"cmd":["true"]} into a sandbox, median of BENCH_RUNS
  - create:   POST /v1/envs of one more sandbox / one more networked computer (each then
              deleted: the population stays N), medians of BENCH_CREATE_RUNS
  - c-e-d:    create a sandbox, exec `true` in it, DELETE ?force=1: median of BENCH_CREATE_RUNS
  - metrics:  GET /metrics, median of BENCH_LIST_RUNS
  - stalls:   the loop's worst stall during BENCH_LIST_RUNS scrapes, and during as many
              listings: the daemon's own measure (paddock_loop_turn_max_seconds, the longest
              turn of its single event loop, i.e. the longest it answered nobody else), and a
              second client's: it sends GET /v1/envs/NAME back to back on its own connection,
              in its own process, and its slowest answer minus its idle median is how long it
              was kept waiting (that includes CPU contention with the listing client on a
              small machine)
  - restart:  SIGTERM, start again, until GET /v1/system answers (every environment re-adopted);
              BENCH_RESTART=0 skips it
  - growth:   each networked computer's create while the population grows (every other
              environment), as medians of 20: the first 20, around every 500th, the last 20, and
              last / first (the issue's "the 2,000th create within 1.5x the first"); compare
              with bench/netns_floor.py, the kernel's own share of the same growth; and the
              daemon loop's CPU per create split into user time (its own code) and system time
              (the kernel's work in its system calls), per span of 500 computers

Density (BENCH_DENSITY, e.g. "sandbox:200 sandbox:1000 computer:200"; default none): for each
KIND:N, from the population above (run it alone with BENCH_SCALE_N=""), N more environments of
that kind (a computer is networked, "network":{"mode":"open"}) are

  - created one after another on one keep-alive connection (creates/s serial), then, after
    BENCH_SETTLE seconds: the host's memory per environment (the fall of MemAvailable in
    /proc/meminfo, i.e. everything the kernel spent too: namespaces, page tables, slab, the
    veths; not only the memcg), the kernel's own part of it (SUnreclaim + KernelStack +
    PageTables), their memcg usage per environment (paddock_env_memory_bytes), paddockd's RSS
    and open fds, and paddockd's own CPU time per create (its single loop does the creates
    one at a time: 1 / that is what any number of clients could reach);
  - destroyed one after another (DELETE ?force=1; destroys/s serial), and after BENCH_SETTLE
    seconds the same two memory readings again (what the destroys gave back: a second
    figure for the same thing);
  - created again by 4 clients at once (threads, a connection each, a quarter of the names
    each; creates/s parallel), and destroyed by 4 clients at once (destroys/s parallel);
  - paddockd's RSS and fds once they are all gone (what a create/destroy cycle leaves behind).

MemAvailable is the whole machine's: other work on it moves the figure (each is the difference
of two readings around the creates or the destroys; when the two disagree, other work moved
it; the kernel's part moves much less; the machine's load is printed).

Prints Markdown tables and removes everything it made (the Daemon's teardown: every
environment, the daemon by its pid, cgroups, mounts, the netns, the directories).

    make && sudo bench/scale.py                      # N = 0 100 1000
    BENCH_SCALE_N="0 100 1000 2000" sudo bench/scale.py
    PADDOCK_BUILD=/tmp/b sudo bench/scale.py         # binaries from another build

Run as root. Measures and reports; never asserts a timing.
"""
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import multiprocessing
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
import conftest  # noqa: E402  (the integration harness: Daemon, UnixHTTPConnection)

NS = [int(x) for x in os.environ.get("BENCH_SCALE_N", "0 100 1000").split()]
NET = os.environ.get("BENCH_SCALE_NET", "1") != "0"
LIST_RUNS = int(os.environ.get("BENCH_LIST_RUNS", "7"))
RUNS = int(os.environ.get("BENCH_RUNS", "41"))
CREATE_RUNS = int(os.environ.get("BENCH_CREATE_RUNS", "11"))
RESTART = os.environ.get("BENCH_RESTART", "1") != "0"
GROW_WINDOW = 20  # creates per median in the growth figures
DENSITY = [(k, int(n)) for k, n in (x.split(":") for x in
                                    os.environ.get("BENCH_DENSITY", "").split())]
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "4"))
SETTLE = float(os.environ.get("BENCH_SETTLE", "5"))


class Conn:
    """One keep-alive connection to the daemon (reconnects if the daemon closed it)."""

    def __init__(self, sock):
        self.sock = sock
        self.c = None

    def request(self, method, path, body=None, expect=(200,)):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            if self.c is None:
                self.c = conftest.UnixHTTPConnection(self.sock, timeout=3600)
            try:
                t0 = time.perf_counter()
                self.c.request(method, path, body=data, headers=headers)
                r = self.c.getresponse()
                payload = r.read()
                dt = time.perf_counter() - t0
                break
            except (OSError, conftest.http.client.HTTPException):
                self.c.close()
                self.c = None
                if attempt:
                    raise
        if r.status not in expect:
            raise RuntimeError("%s %s: %d %s" % (method, path, r.status, payload[:300]))
        return dt, payload

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


def create_body(name, kind):
    body = {"name": name, "kind": kind}
    if kind == "computer":
        body["network"] = {"mode": "open"}
    return body


def fmt(s):
    if s is None:
        return "-"
    return "%.2f ms" % (s * 1e3) if s < 0.01 else "%.1f ms" % (s * 1e3) if s < 1 else "%.2f s" % s


def med(xs):
    return statistics.median(xs) if xs else None


def cgroup_mode():
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "v2"
    return "v1 hybrid" if os.path.isdir("/sys/fs/cgroup/unified") else "v1"


def probe_loop(sock, path, stop, out):
    """In a process of its own (no GIL shared with the client it watches): GET path back to
    back, then send the (start, latency) pairs."""
    conn = Conn(sock)
    samples = []
    while not stop.is_set():
        t0 = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        dt, _ = conn.request("GET", path)
        samples.append((t0, dt))
    conn.close()
    out.send(samples)


class Prober:
    def __init__(self, sock, name):
        self.stop = multiprocessing.Event()
        self.rx, tx = multiprocessing.Pipe(duplex=False)
        self.p = multiprocessing.Process(target=probe_loop,
                                         args=(sock, "/v1/envs/" + name, self.stop, tx))
        self.samples = None

    def start(self):
        self.p.start()

    def finish(self):
        self.stop.set()
        self.samples = self.rx.recv()
        self.p.join()
        return self.samples


def loop_turn_max(c):
    """paddock_loop_turn_max_seconds: the daemon's longest loop turn since the last scrape."""
    for line in c.request("GET", "/metrics")[1].decode().splitlines():
        if line.startswith("paddock_loop_turn_max_seconds "):
            return float(line.split()[1])
    return None


def stall(d, c, path):
    """While c sends GET path LIST_RUNS times: the daemon's longest loop turn (its own
    measure, paddock_loop_turn_max_seconds), and the slowest answer a second client (inspect,
    back to back, in its own process) got, minus that client's idle median."""
    p = Prober(d.sock, "probe")
    p.start()
    time.sleep(0.5)
    t_idle = time.perf_counter()
    loop_turn_max(c)  # starts the daemon's count again
    windows = []
    for _ in range(LIST_RUNS):
        time.sleep(0.05)
        t0 = time.perf_counter()
        dt, _ = c.request("GET", path)
        windows.append((t0, t0 + dt))
    turn = loop_turn_max(c)
    time.sleep(0.05)
    samples = p.finish()
    idle = [dt for t, dt in samples if t + dt < t_idle]
    during = [dt for t, dt in samples if any(a <= t + dt and t <= b for a, b in windows)]
    return turn, (max(during) - (med(idle) or 0) if during else None)


KERNEL_MEM = ("SUnreclaim", "KernelStack", "PageTables")


def meminfo():
    """(MemAvailable, SUnreclaim + KernelStack + PageTables) in bytes: the second is what the
    kernel keeps for namespaces, mounts, cgroups, sockets and processes, and moves less with
    other work on the machine than MemAvailable (page cache)."""
    vals = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            vals[k] = int(v.split()[0]) * 1024
    return vals["MemAvailable"], sum(vals.get(k, 0) for k in KERNEL_MEM)


def daemon_rss_fds(d):
    rss = None
    with open("/proc/%d/status" % d.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir("/proc/%d/fd" % d.pid))


def daemon_cpu(d):
    """paddockd's own CPU time (user + system), in seconds."""
    with open("/proc/%d/stat" % d.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memcg_sum(c, names):
    """Σ paddock_env_memory_bytes over names (their memcg usage, as the daemon reads it)."""
    want = set(names)
    total = 0
    for line in c.request("GET", "/metrics")[1].decode().splitlines():
        if line.startswith("paddock_env_memory_bytes{"):
            env = line.split('env="', 1)[1].split('"', 1)[0]
            if env in want:
                total += float(line.rsplit(" ", 1)[1])
    return total


def in_parallel(sock, method, paths_bodies, expect):
    """paths_bodies split among CLIENTS threads, each with its own keep-alive connection;
    returns the wall time from the first request to the last answer."""
    import threading
    parts = [paths_bodies[i::CLIENTS] for i in range(CLIENTS)]
    errors = []
    go = threading.Barrier(CLIENTS + 1)

    def client(part):
        conn = Conn(sock)
        try:
            go.wait()
            for path, body in part:
                conn.request(method, path, body, expect)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return took


def density(d, c, kind, n):
    """Creates/s and destroys/s serial and with CLIENTS clients, memory per environment,
    paddockd's RSS and fds, for n environments of kind."""
    names = ["d%s%d" % (kind[0], i) for i in range(n)]
    row = {"kind": kind, "n": n}
    time.sleep(SETTLE)
    with open("/proc/loadavg") as f:
        row["load"] = f.read().split()[0]
    avail0, kern0 = meminfo()
    row["rss0"], row["fds0"] = daemon_rss_fds(d)
    t0, cpu0 = time.perf_counter(), daemon_cpu(d)
    for name in names:
        c.request("POST", "/v1/envs", create_body(name, kind), (201,))
    row["create_serial"] = n / (time.perf_counter() - t0)
    row["cpu_create"] = (daemon_cpu(d) - cpu0) / n
    row["rss1"], row["fds1"] = daemon_rss_fds(d)
    time.sleep(SETTLE)
    avail1, kern1 = meminfo()
    row["avail_create"] = (avail0 - avail1) / n
    row["kern_create"] = (kern1 - kern0) / n
    row["memcg_per_env"] = memcg_sum(c, names) / n
    t0, cpu0 = time.perf_counter(), daemon_cpu(d)
    for name in names:
        c.request("DELETE", "/v1/envs/%s?force=1" % name)
    row["destroy_serial"] = n / (time.perf_counter() - t0)
    row["cpu_destroy"] = (daemon_cpu(d) - cpu0) / n
    time.sleep(SETTLE)
    avail2, kern2 = meminfo()
    row["avail_destroy"] = (avail2 - avail1) / n
    row["kern_destroy"] = (kern1 - kern2) / n
    took = in_parallel(d.sock, "POST", [("/v1/envs", create_body(x, kind)) for x in names],
                       (201,))
    row["create_parallel"] = n / took
    row["rss2"], row["fds2"] = daemon_rss_fds(d)
    took = in_parallel(d.sock, "DELETE", [("/v1/envs/%s?force=1" % x, None) for x in names],
                       (200,))
    row["destroy_parallel"] = n / took
    time.sleep(SETTLE)
    row["rss3"], row["fds3"] = daemon_rss_fds(d)
    return row


def mib(b):
    return "%.2f MiB" % (b / 2**20)


def print_density(rows):
    if not rows:
        return
    print()
    print("| environments | creates/s serial | creates/s %d clients | destroys/s serial "
          "| destroys/s %d clients | paddockd's CPU per create / destroy (serial) | host memory per environment: MemAvailable fell by "
          "(rose by, at their destroy) | kernel memory per environment, %s: grew by (fell by) "
          "| memcg per environment | paddockd RSS before → with them → after | paddockd fds "
          "before → with them → after | load at start |" % (CLIENTS, CLIENTS, " + ".join(KERNEL_MEM)))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        what = "%d %s" % (r["n"], "sandboxes" if r["kind"] == "sandbox"
                          else "networked computers")
        print("| %s | %.0f | %.0f | %.0f | %.0f | %.1f / %.1f ms | %s (%s) | %s (%s) | %s | %s → %s → %s "
              "| %d → %d → %d | %s |" % (
            what, r["create_serial"], r["create_parallel"], r["destroy_serial"],
            r["destroy_parallel"], r["cpu_create"] * 1e3, r["cpu_destroy"] * 1e3,
            mib(r["avail_create"]), mib(r["avail_destroy"]),
            mib(r["kern_create"]), mib(r["kern_destroy"]), mib(r["memcg_per_env"]),
            mib(r["rss0"]), mib(r["rss1"]), mib(r["rss3"]), r["fds0"], r["fds1"], r["fds3"], r["load"]))


def measure(d, c, n):
    row = {"n": n}
    row["ls"] = med([c.request("GET", "/v1/envs")[0] for _ in range(LIST_RUNS)])
    row["inspect"] = med([c.request("GET", "/v1/envs/probe")[0] for _ in range(RUNS)])
    ex = {"cmd": ["true"]}
    row["exec"] = med([c.request("POST", "/v1/envs/probe/exec", ex)[0] for _ in range(RUNS)])

    c.request("GET", "/metrics")
    row["metrics"] = med([c.request("GET", "/metrics")[0] for _ in range(LIST_RUNS)])
    row["stall_metrics"] = stall(d, c, "/metrics")
    row["stall_ls"] = stall(d, c, "/v1/envs")

    mk_s, mk_c, rm, ced = [], [], [], []
    for _ in range(CREATE_RUNS):
        mk_s.append(c.request("POST", "/v1/envs", create_body("extra-s", "sandbox"), (201,))[0])
        rm.append(c.request("DELETE", "/v1/envs/extra-s?force=1")[0])
        if NET:
            mk_c.append(c.request("POST", "/v1/envs", create_body("extra-c", "computer"),
                                  (201,))[0])
            c.request("DELETE", "/v1/envs/extra-c?force=1")
        t0 = time.perf_counter()
        c.request("POST", "/v1/envs", create_body("ced", "sandbox"), (201,))
        c.request("POST", "/v1/envs/ced/exec", ex)
        c.request("DELETE", "/v1/envs/ced?force=1")
        ced.append(time.perf_counter() - t0)
    row.update(create_s=med(mk_s), create_c=med(mk_c), destroy=med(rm), ced=med(ced))

    row["restart"] = None
    if RESTART and n:
        c.close()
        d.stop(timeout=600)
        t1 = time.perf_counter()
        d.start(timeout=600)
        row["restart"] = time.perf_counter() - t1
    return row


def main():
    if os.geteuid() != 0:
        sys.exit("bench/scale.py runs as root")
    img = tempfile.mkdtemp(prefix="paddock-scale-img-", dir="/var/tmp")
    rootfs = os.path.join(img, "rootfs")
    subprocess.run([os.path.join(REPO, "scripts", "busybox-rootfs.sh"), rootfs], check=True,
                   stdout=subprocess.DEVNULL)
    d = None
    rows = []
    drows = []
    try:
        d = conftest.Daemon(rootfs)
        c = Conn(d.sock)
        c.request("POST", "/v1/envs", create_body("probe", "sandbox"), (201,))
        have = 0
        grown = []  # each networked computer's create while growing, in order
        grown_cpu = []  # the same creates' CPU time of paddockd's main thread
        grown_ticks = []  # its user and system time in creates (ticks, summed), after each
        in_creates = [0, 0]
        for n in NS:
            t0 = time.perf_counter()
            for i in range(have, n):
                kind = "computer" if NET and i % 2 == 0 else "sandbox"
                cpu0, ticks0 = loop_cpu(d), loop_ticks(d)
                took = c.request("POST", "/v1/envs", create_body("e%d" % i, kind), (201,))[0]
                # only the creates' own: not measure()'s requests nor a restart between
                ticks = loop_ticks(d)
                in_creates = [in_creates[0] + ticks[0] - ticks0[0],
                              in_creates[1] + ticks[1] - ticks0[1]]
                if kind == "computer":
                    grown.append(took)
                    grown_cpu.append(loop_cpu(d) - cpu0)
                    grown_ticks.append(tuple(in_creates))
            grow = time.perf_counter() - t0
            have = max(have, n)
            envs = json.loads(c.request("GET", "/v1/envs")[1])["envs"]
            assert len(envs) == have + 1, len(envs)
            row = measure(d, c, have)
            rows.append(row)
            print("N=%d (grown in %.0f s): %s" % (have, grow, ", ".join(
                "%s %s" % (k, "/".join(fmt(x) for x in v) if isinstance(v, tuple) else fmt(v))
                for k, v in row.items() if k != "n")),
                file=sys.stderr, flush=True)
        for kind, n in DENSITY:
            row = density(d, c, kind, n)
            drows.append(row)
            print("density %s:%d: %s" % (kind, n, ", ".join(
                "%s %s" % (k, ("%.0f" % v) if isinstance(v, float) else v)
                for k, v in row.items() if k not in ("kind", "n"))),
                file=sys.stderr, flush=True)
        c.close()
    finally:
        if d is not None:
            t0 = time.perf_counter()
            problems = d.teardown()
            print("teardown: %.0f s%s" % (time.perf_counter() - t0,
                                          "; problems: %s" % problems if problems else ""),
                  file=sys.stderr)
        shutil.rmtree(img, ignore_errors=True)

    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("%s, kernel %s, %d cores, cgroup %s, load %s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), platform.release(), os.cpu_count(),
        cgroup_mode(), load), end="")
    if not rows:
        print("; density only (%s), %d parallel clients, readings %.0f s after the creates" % (
            " ".join("%s:%d" % x for x in DENSITY), CLIENTS, SETTLE))
        print_density(drows)
        return
    print("; N environments = %s; "
          "ls/metrics median of %d, inspect/exec of %d, create/destroy/c-e-d of %d" % (
              "half open computers, half sandboxes" if NET else "sandboxes",
              LIST_RUNS, RUNS, CREATE_RUNS))
    print()
    print("| N | ls | inspect | exec | create sandbox | create computer | destroy sandbox "
          "| create→exec→destroy | /metrics | loop's longest turn (probe's worst wait) during "
          "/metrics | the same during ls | restart |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %s |" % (r["n"], " | ".join(
            "%s (%s)" % (fmt(r[k][0]), fmt(r[k][1])) if isinstance(r[k], tuple) else fmt(r[k])
            for k in ("ls", "inspect", "exec", "create_s", "create_c", "destroy", "ced",
                      "metrics", "stall_metrics", "stall_ls", "restart"))))
    print_growth(grown, grown_cpu, grown_ticks)
    print_density(drows)


def print_growth(grown, grown_cpu, grown_ticks):
    """The creates of networked computers while the population grew: the first GROW_WINDOW,
    the last GROW_WINDOW, and every 500th computer's neighbourhood (the issue's measure: the
    2,000th create within 1.5x the first); wall time and paddockd's main thread's CPU time
    (its event loop: steadier than wall time on a shared machine; without the environment's
    own setup process)."""
    if len(grown) < 2 * GROW_WINDOW:
        return
    w = GROW_WINDOW
    print()
    for what, xs in (("wall", grown), ("paddockd's loop CPU", grown_cpu)):
        marks = [(1, med(xs[:w]))]
        for k in range(500, len(xs) - w + 1, 500):
            marks.append((k, med(xs[k - w:k])))
        if marks[-1][0] != len(xs):
            marks.append((len(xs), med(xs[-w:])))
        print("Networked computers created while growing (every other environment; median of "
              "%d creates around the k-th computer), %s: %s; last / first = %.2f" % (
                  w, what, ", ".join("k=%d: %s" % (k, fmt(v)) for k, v in marks),
                  marks[-1][1] / marks[0][1]))
        print()
    # Which side of the loop's CPU grows: its own code (user) or the kernel's work in its
    # system calls. Ticks are 10 ms: summed over every create (both kinds) between two marks.
    spans = []
    for a, b in zip([0] + list(range(500, len(grown_ticks), 500)),
                    list(range(500, len(grown_ticks), 500)) + [len(grown_ticks)]):
        if b - a < GROW_WINDOW:
            continue
        first = max(a, 1)  # from just after the first-th computer's create
        (u0, s0), (u1, s1) = grown_ticks[first - 1], grown_ticks[b - 1]
        per = TICK / (2 * (b - first))  # each computer and the sandbox before it
        spans.append("%d-%d: %s user, %s system" % (a + 1, b, fmt((u1 - u0) * per),
                                                    fmt((s1 - s0) * per)))
    print("paddockd's loop CPU per create while growing (computers k..k', and the sandboxes "
          "between them), user / system: %s" % "; ".join(spans))
    print()


TICK = 1.0 / os.sysconf("SC_CLK_TCK")


def loop_ticks(d):
    """paddockd's main thread's user and system time so far, in clock ticks."""
    with open("/proc/%d/task/%d/stat" % (d.pid, d.pid)) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def loop_cpu(d):
    """CPU time of paddockd's main thread (the event loop), in seconds: /proc/PID/schedstat's
    nanoseconds (not the 10 ms ticks of /proc/PID/stat)."""
    with open("/proc/%d/schedstat" % d.pid) as f:
        return int(f.read().split()[0]) / 1e9


if __name__ == "__main__":
    main()
