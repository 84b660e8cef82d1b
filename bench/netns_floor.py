#!/usr/bin/python3
"""The kernel's floor under a networked create: what creating one more networked environment
costs the kernel alone, without paddockd, as the number that already exist grows.

Per environment it performs the kernel operations a networked create of paddockd performs
(src/lib/spawn.c, src/lib/rootfs.c, src/lib/netlink.c, src/daemon/network.c), in the same
order, with no firewall and no daemon:

  child (paddockd's clone3; here a fork that unshares the same namespaces):
    unshare    CLONE_NEWNS|NEWPID|NEWUTS|NEWIPC|NEWNET (setup_net of a new network namespace)
    sysctl     /proc/sys/net/ipv4/ip_unprivileged_port_start = 0 and ping_group_range (the
               new namespace's first /proc/sys/net lookup)
    mounts     / private (recursive), a new procfs and a new read-only sysfs (the sysfs
               superblock of the new namespace: sget over every sysfs superblock)
    lo up      SIOCSIFFLAGS
  daemon side (paddockd's netlink_veth_create, apply_policy without nftables):
    env open   setns into the environment's namespace, its five IPv6 knobs (default+all
               disable_ipv6, default addr_gen_mode, accept_ra, autoconf), an rtnetlink socket
               there, setns back
    env lo     RTM_GETLINK lo, RTM_SETLINK up (inside)
    veth       RTM_NEWLINK veth "pdkfN", its peer "eth0" born in the environment's namespace
               (IFLA_NET_NS_FD), MTU 1500 both
    host side  the four IPv6 knobs of the host end, RTM_GETLINK, 10.x gateway/32,
               fe80::1/64 NODAD (no prefix route), up, route to the environment /32
               (prefsrc gateway), its /128
    env side   RTM_GETLINK eth0, address /32, v6 /128 NODAD, up, route to the gateway /32,
               default route via it, v6 default via fe80::1
    localnet   route_localnet = 1 of the host end, relative to a conf/ directory fd opened once

The /proc/sys/net knobs are written two ways, one run each (FLOOR_SYSCTL, default "path
dirfd"): "path", each by its full path (what paddockd did before 2026-12-02: 11 lookups of
/proc/sys/net per environment, and each lookup compares against every namespace's "net"
dentry under /proc/sys, so it grows with the number of namespaces); "dirfd", each namespace's
/proc/sys/net looked up once by whoever writes in it (the child for ipv4, the daemon for the
IPv6 knobs) and the host end's knobs relative to a directory fd opened once: 2 lookups, the
fewest that the kernel's interfaces allow for this split of the work (paddockd now does 3:
spawn.c's child still writes its two knobs by path).

Not done here: paddockd's cgroups, user namespace, overlay/idmapped root, /dev, /tmp, the
environment's init process (it is the other helper's and the engine's part), tc (a link
lookup and a qdisc delete with no bandwidth limit), nftables (what bench/scale.py measures
on top of this).

Everything happens inside a network namespace made for the run ("pdk-floor-PID", like the
integration tests' daemons): the host ends of the veths live there, never in the machine's
own namespace. Each environment's namespaces are kept alive by file descriptors (its network
and mount namespaces), as a running environment's PID 1 keeps them. The environments are made
one after another up to each N in FLOOR_N (default "1000 2000"); the timings of the first
FLOOR_WINDOW (20) environments and of the last FLOOR_WINDOW before each N are reported as
medians, per step and in total. Then every host end is deleted (which deletes its peer) and the
fds closed, timed the same way, and the run's namespace deleted.

    sudo flock /tmp/paddock-it.lock /usr/bin/python3 bench/netns_floor.py
    FLOOR_N="300 1000" ... bench/netns_floor.py

Run as root. Measures and reports; never asserts a timing. Standard library only.
"""
import ctypes
import ctypes.util
import json
import os
import platform
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

NS = [int(x) for x in os.environ.get("FLOOR_N", "1000 2000").split()]
WINDOW = int(os.environ.get("FLOOR_WINDOW", "20"))
# "path": every /proc/sys/net knob written by its path, as paddockd did before 2026-12-02 and
# spawn.c's child still does; "dirfd": /proc/sys/net looked up once per namespace (the child's
# first write) and the rest written relative to directory fds: the fewest lookups the kernel
# allows (each lookup of "net" under /proc/sys compares against every namespace's "net")
MODES = os.environ.get("FLOOR_SYSCTL", "path dirfd").split()

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18

# rtnetlink
RTM_NEWLINK, RTM_DELLINK, RTM_GETLINK, RTM_SETLINK = 16, 17, 18, 19
RTM_NEWADDR, RTM_NEWROUTE = 20, 24
NLM_F_REQUEST, NLM_F_ACK, NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 1, 4, 0x100, 0x200, 0x400
NLMSG_ERROR = 2
NETLINK_CAP_ACK = 10
IFLA_IFNAME, IFLA_MTU, IFLA_LINKINFO, IFLA_NET_NS_FD, IFLA_EXT_MASK = 3, 4, 18, 28, 29
IFLA_INFO_KIND, IFLA_INFO_DATA, VETH_INFO_PEER = 1, 2, 1
RTEXT_FILTER_SKIP_STATS = 1 << 3
IFA_ADDRESS, IFA_LOCAL, IFA_FLAGS, IFA_F_NODAD, IFA_F_NOPREFIXROUTE = 1, 2, 8, 0x02, 0x200
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PREFSRC = 1, 4, 5, 7
RT_TABLE_MAIN, RTPROT_STATIC, RTN_UNICAST = 254, 4, 1
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253
IFF_UP = 1

GATEWAY = socket.inet_aton("10.79.0.1")
GATEWAY6 = socket.inet_pton(socket.AF_INET6, "fe80::1")
STEPS = ["unshare", "sysctl", "mounts", "lo up", "env open", "env lo", "veth", "host side",
         "env side", "localnet"]


def check(rc, what):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def setns(fd, nstype):
    check(libc.setns(fd, nstype), "setns")


def write_sysctl(path, value, dir_fd=None):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def env_addr(i):
    """10.79.0.0/16 like paddock's default 10.77/16: hosts from .2 on."""
    return struct.pack("!I", (10 << 24 | 79 << 16) + 2 + i)


def env_addr6(i):
    return socket.inet_pton(socket.AF_INET6, "fd77:a4f::%x" % (2 + i))


class Rtnl:
    """One rtnetlink socket (made in the caller's current network namespace), one request at a
    time, each acknowledged (like src/lib/netlink.c's nl_talk)."""

    def __init__(self):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                               socket.NETLINK_ROUTE)
        self.s.bind((0, 0))
        self.s.setsockopt(270, NETLINK_CAP_ACK, 1)  # SOL_NETLINK
        self.seq = int(time.time())

    def close(self):
        self.s.close()

    def talk(self, type_, flags, body):
        self.seq += 1
        msg = struct.pack("=IHHII", 16 + len(body), type_, NLM_F_REQUEST | flags, self.seq, 0)
        self.s.send(msg + body)
        ifindex = None
        while True:
            data = self.s.recv(65536)
            off = 0
            while off + 16 <= len(data):
                ln, t, _, seq, _ = struct.unpack_from("=IHHII", data, off)
                if seq == self.seq:
                    if t == NLMSG_ERROR:
                        err = struct.unpack_from("=i", data, off + 16)[0]
                        if err:
                            raise OSError(-err, os.strerror(-err))
                        return ifindex
                    if t == RTM_NEWLINK:
                        ifindex = struct.unpack_from("=BxHiII", data, off + 16)[2]
                off += (ln + 3) & ~3


def attr(type_, payload):
    ln = 4 + len(payload)
    return struct.pack("=HH", ln, type_) + payload + b"\0" * (((ln + 3) & ~3) - ln)


def strz(type_, s):
    return attr(type_, s.encode() + b"\0")


def u32(type_, v):
    return attr(type_, struct.pack("=I", v))


def ifinfo(index=0, flags=0, change=0):
    return struct.pack("=BxHiII", 0, 0, index, flags, change)


def link_get(nl, name):
    return nl.talk(RTM_GETLINK, NLM_F_ACK,
                   ifinfo() + strz(IFLA_IFNAME, name) + u32(IFLA_EXT_MASK,
                                                             RTEXT_FILTER_SKIP_STATS))


def link_up(nl, index):
    nl.talk(RTM_SETLINK, NLM_F_ACK, ifinfo(index, IFF_UP, IFF_UP))


def addr_add(nl, index, a):
    nl.talk(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK,
            struct.pack("=BBBBI", socket.AF_INET, 32, 0, RT_SCOPE_UNIVERSE, index)
            + attr(IFA_LOCAL, a) + attr(IFA_ADDRESS, a))


def addr6_add(nl, index, a, prefix):
    """As paddockd's: a link-local address (the gateway's) gets no fe80::/64 prefix route."""
    link_local = a[:2] == b"\xfe\x80"
    scope = RT_SCOPE_LINK if link_local else RT_SCOPE_UNIVERSE
    flags = IFA_F_NODAD | (IFA_F_NOPREFIXROUTE if link_local else 0)
    nl.talk(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK,
            struct.pack("=BBBBI", socket.AF_INET6, prefix, IFA_F_NODAD, scope, index)
            + attr(IFA_LOCAL, a) + attr(IFA_ADDRESS, a) + u32(IFA_FLAGS, flags))


def route_add(nl, family, oif, dst=None, dst_len=0, gateway=None, prefsrc=None):
    scope = RT_SCOPE_UNIVERSE if gateway or family == socket.AF_INET6 else RT_SCOPE_LINK
    body = struct.pack("=BBBBBBBBI", family, dst_len, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC,
                       scope, RTN_UNICAST, 0)
    if dst is not None and dst_len:
        body += attr(RTA_DST, dst)
    if gateway is not None:
        body += attr(RTA_GATEWAY, gateway)
    if prefsrc is not None:
        body += attr(RTA_PREFSRC, prefsrc)
    nl.talk(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, body + u32(RTA_OIF, oif))


def veth_add(nl, host_if, peer_if, netns_fd):
    peer = attr(VETH_INFO_PEER, ifinfo() + strz(IFLA_IFNAME, peer_if)
                + u32(IFLA_NET_NS_FD, netns_fd) + u32(IFLA_MTU, 1500))
    info = attr(IFLA_LINKINFO, strz(IFLA_INFO_KIND, "veth") + attr(IFLA_INFO_DATA, peer))
    nl.talk(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK,
            ifinfo() + strz(IFLA_IFNAME, host_if) + u32(IFLA_MTU, 1500) + info)


def link_del(nl, name):
    nl.talk(RTM_DELLINK, NLM_F_ACK, ifinfo() + strz(IFLA_IFNAME, name))


def child(wfd, rfd, mnt_dir, mode):
    """The environment's first process: its namespaces, sysctls, mounts, lo. Reports its
    step timings as JSON on wfd, then waits for the parent to have taken its namespaces."""
    try:
        t = [time.perf_counter()]
        check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC
                           | CLONE_NEWNET), "unshare")
        t.append(time.perf_counter())
        if mode == "path":
            write_sysctl("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0")
            write_sysctl("/proc/sys/net/ipv4/ping_group_range", "0 2147483647")
        else:
            d = os.open("/proc/sys/net/ipv4", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            write_sysctl("ip_unprivileged_port_start", "0", dir_fd=d)
            write_sysctl("ping_group_range", "0 2147483647", dir_fd=d)
            os.close(d)
        t.append(time.perf_counter())
        check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make-rprivate")
        check(libc.mount(b"proc", os.path.join(mnt_dir, "proc").encode(), b"proc",
                         MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount proc")
        check(libc.mount(b"sysfs", os.path.join(mnt_dir, "sys").encode(), b"sysfs",
                         MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount sysfs")
        t.append(time.perf_counter())
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        import fcntl
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack_from("16sH", fcntl.ioctl(s, 0x8913, req))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | IFF_UP))  # SIOCSIFFLAGS
        s.close()
        t.append(time.perf_counter())
        os.write(wfd, json.dumps([b - a for a, b in zip(t, t[1:])]).encode())
    except Exception as e:  # noqa: BLE001 (reported to the parent, which stops)
        os.write(wfd, json.dumps({"error": str(e)}).encode())
    os.read(rfd, 1)
    os._exit(0)


class Env:
    __slots__ = ("i", "host_if", "net_fd", "mnt_fd")


def make_env(i, mnt_dir, conf_fd, conf6_fd, mode):
    """One environment; returns (Env, [seconds per step])."""
    r1, w1 = os.pipe2(os.O_CLOEXEC)
    r2, w2 = os.pipe2(os.O_CLOEXEC)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r1)
        os.close(w2)
        child(w1, r2, mnt_dir, mode)
    os.close(w1)
    os.close(r2)
    data = b""
    while True:
        chunk = os.read(r1, 4096)
        if not chunk:
            break
        data += chunk
        if data.endswith(b"]") or data.endswith(b"}"):
            break
    steps = json.loads(data)
    if isinstance(steps, dict):
        os.close(w2)
        os.waitpid(pid, 0)
        raise RuntimeError("environment %d: %s" % (i, steps["error"]))
    e = Env()
    e.i = i
    e.host_if = "pdkf%s%d" % (mode[0], i)
    e.net_fd = os.open("/proc/%d/ns/net" % pid, os.O_RDONLY | os.O_CLOEXEC)
    e.mnt_fd = os.open("/proc/%d/ns/mnt" % pid, os.O_RDONLY | os.O_CLOEXEC)
    os.write(w2, b"x")
    os.close(w2)
    os.close(r1)
    os.waitpid(pid, 0)
    # the fork, the wait and the fd handling are the benchmark's, not the kernel's floor of
    # the steps: the steps are timed inside the child and below, one by one
    del t0

    t = [time.perf_counter()]
    self_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    setns(e.net_fd, CLONE_NEWNET)
    try:
        d = None
        if mode != "path":
            d = os.open("/proc/sys/net/ipv6/conf", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for path, v in (("default/disable_ipv6", "0"), ("all/disable_ipv6", "0"),
                        ("default/addr_gen_mode", "1"), ("default/accept_ra", "0"),
                        ("default/autoconf", "0")):
            write_sysctl(path if d is not None else "/proc/sys/net/ipv6/conf/" + path, v,
                         dir_fd=d)
        if d is not None:
            os.close(d)
        env_nl = Rtnl()
    finally:
        setns(self_fd, CLONE_NEWNET)
        os.close(self_fd)
    t.append(time.perf_counter())
    link_up(env_nl, link_get(env_nl, "lo"))
    t.append(time.perf_counter())
    host_nl = Rtnl()
    veth_add(host_nl, e.host_if, "eth0", e.net_fd)
    t.append(time.perf_counter())
    for knob, v in (("disable_ipv6", "0"), ("addr_gen_mode", "1"), ("accept_ra", "0"),
                    ("autoconf", "0")):
        if mode == "path":
            write_sysctl("/proc/sys/net/ipv6/conf/%s/%s" % (e.host_if, knob), v)
        else:
            write_sysctl("%s/%s" % (e.host_if, knob), v, dir_fd=conf6_fd)
    hi = link_get(host_nl, e.host_if)
    addr_add(host_nl, hi, GATEWAY)
    addr6_add(host_nl, hi, GATEWAY6, 64)
    link_up(host_nl, hi)
    route_add(host_nl, socket.AF_INET, hi, dst=env_addr(i), dst_len=32, prefsrc=GATEWAY)
    route_add(host_nl, socket.AF_INET6, hi, dst=env_addr6(i), dst_len=128)
    t.append(time.perf_counter())
    ei = link_get(env_nl, "eth0")
    addr_add(env_nl, ei, env_addr(i))
    addr6_add(env_nl, ei, env_addr6(i), 128)
    link_up(env_nl, ei)
    route_add(env_nl, socket.AF_INET, ei, dst=GATEWAY, dst_len=32)
    route_add(env_nl, socket.AF_INET, ei, gateway=GATEWAY)
    route_add(env_nl, socket.AF_INET6, ei, gateway=GATEWAY6)
    t.append(time.perf_counter())
    write_sysctl("%s/route_localnet" % e.host_if, "1", dir_fd=conf_fd)
    t.append(time.perf_counter())
    env_nl.close()
    host_nl.close()
    return e, steps + [b - a for a, b in zip(t, t[1:])]


def fmt(s):
    return "%.2f ms" % (s * 1e3) if s < 0.1 else "%.1f ms" % (s * 1e3)


def run(mode, mnt_dir, conf_fd, conf6_fd):
    """Grow to each N, then delete everything; returns (rows, link delete times)."""
    envs, timings, rows, down = [], [], [], []
    t_start = time.perf_counter()
    try:
        for n in NS:
            while len(envs) < n:
                e, steps = make_env(len(envs), mnt_dir, conf_fd, conf6_fd, mode)
                envs.append(e)
                timings.append(steps)
            if not rows:
                rows.append(("first %d" % WINDOW, timings[:WINDOW]))
            rows.append(("%d-%d" % (n - WINDOW + 1, n), timings[n - WINDOW:n]))
            print("floor (%s): %d environments in %.0f s" % (mode, n,
                                                             time.perf_counter() - t_start),
                  file=sys.stderr, flush=True)
        nl = Rtnl()
        while envs:
            e = envs.pop()
            t0 = time.perf_counter()
            link_del(nl, e.host_if)
            down.append(time.perf_counter() - t0)
            os.close(e.net_fd)
            os.close(e.mnt_fd)
        nl.close()
    finally:
        for e in envs:
            os.close(e.net_fd)
            os.close(e.mnt_fd)
    return rows, down


def main():
    if os.geteuid() != 0:
        sys.exit("bench/netns_floor.py runs as root")
    netns = "pdk-floor-%d" % os.getpid()
    mnt_dir = tempfile.mkdtemp(prefix="paddock-floor-", dir="/var/tmp")
    os.mkdir(os.path.join(mnt_dir, "proc"))
    os.mkdir(os.path.join(mnt_dir, "sys"))
    subprocess.run(["ip", "netns", "add", netns], check=True)
    results = []
    try:
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
        fd = os.open("/run/netns/" + netns, os.O_RDONLY | os.O_CLOEXEC)
        setns(fd, CLONE_NEWNET)  # from here on, the run's namespace is "the host"
        os.close(fd)
        write_sysctl("/proc/sys/net/ipv4/ip_forward", "1")
        conf_fd = os.open("/proc/sys/net/ipv4/conf", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        conf6_fd = os.open("/proc/sys/net/ipv6/conf", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        need = 2 * max(NS) + 64
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < need:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
        for k, mode in enumerate(MODES):
            if k:
                time.sleep(30)  # the previous namespaces' cleanup_net runs in the background
            results.append((mode,) + run(mode, mnt_dir, conf_fd, conf6_fd))
    finally:
        subprocess.run(["ip", "netns", "delete", netns], stderr=subprocess.DEVNULL)
        for sub in ("proc", "sys"):
            os.rmdir(os.path.join(mnt_dir, sub))
        os.rmdir(mnt_dir)

    sys.stderr.flush()
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print("%s, kernel %s, %d cores, load %s; kernel floor of a networked create (no paddockd), "
          "medians of %d environments" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                          platform.release(), os.cpu_count(), load, WINDOW))
    for mode, rows, down in results:
        print()
        print("/proc/sys/net knobs: %s" % (
            "each by its path (11 lookups of /proc/sys/net per environment)" if mode == "path"
            else "relative to directory fds (1 lookup of /proc/sys/net per environment, "
                 "+1 for the IPv6 knobs inside it)"))
        print()
        print("| environments | %s | all steps |" % " | ".join(STEPS))
        print("|---|%s---|" % ("---|" * len(STEPS)))
        first_total = None
        for label, ts in rows:
            per = [statistics.median(t[k] for t in ts) for k in range(len(STEPS))]
            total = statistics.median(sum(t) for t in ts)
            first_total = first_total or total
            print("| %s | %s | %s (%.2fx) |" % (label, " | ".join(fmt(x) for x in per),
                                               fmt(total), total / first_total))
        if down:
            print()
            print("Link delete (RTM_DELLINK of the host end), from the last made: first %d %s, "
                  "last %d %s" % (WINDOW, fmt(statistics.median(down[:WINDOW])), WINDOW,
                                  fmt(statistics.median(down[-WINDOW:]))), flush=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
