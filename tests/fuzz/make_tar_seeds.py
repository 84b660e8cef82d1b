#!/usr/bin/env python3
"""Write the seed corpus of tests/fuzz/fuzz_tar.c: small image layers, one edge each.

Run from anywhere: python3 tests/fuzz/make_tar_seeds.py. Output is reproducible (fixed times,
owners and gzip header; zstd from the zstd command). The layer is applied in AREA/root, next
to AREA/sentinel (must stay empty) and AREA/outside (must stay untouched), so "../sentinel"
and "../outside" are the names an escape would reach.
"""
import gzip
import io
import os
import subprocess
import tarfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_tar")


def entry(name, kind=tarfile.REGTYPE, data=b"", link="", mode=None, uid=0, gid=0,
          devmajor=0, devminor=0):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mtime = 1700000000
    ti.uid, ti.gid = uid, gid
    ti.uname = ti.gname = ""
    ti.mode = mode if mode is not None else (0o755 if kind == tarfile.DIRTYPE else 0o644)
    ti.linkname = link
    ti.devmajor, ti.devminor = devmajor, devminor
    ti.size = len(data) if kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    return ti, data


def d(name, **kw):
    return entry(name, tarfile.DIRTYPE, **kw)


def f(name, data=b"x\n", **kw):
    return entry(name, tarfile.REGTYPE, data=data, **kw)


def sym(name, target):
    return entry(name, tarfile.SYMTYPE, link=target, mode=0o777)


def hard(name, target):
    return entry(name, tarfile.LNKTYPE, link=target)


def tar_bytes(entries, fmt=tarfile.GNU_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if ti.size else None)
    # Drop tarfile's padding to a 10 KiB record: the entries and the two zero end blocks.
    raw = buf.getvalue().rstrip(b"\0")
    return raw + b"\0" * (-len(raw) % 512 + 1024)


SEEDS = {
    "plain": [d("etc"), f("etc/hostname", b"paddock\n")],
    "whiteout": [d("a"), f("a/x"), f("a/y"), f("a/.wh.x"), f(".wh.gone"), d("b"), f("b/keep"),
                 f(".wh.b")],
    "opaque": [d("a"), f("a/.wh..wh..opq"), f("a/new"), d("a/sub"), f("a/sub/.wh..wh..opq")],
    "whiteout_odd": [d("a"), f("a/.wh.."), f("a/.wh."), f("a/.wh..wh..opq/x"), f("../.wh.outside"),
                     f(".wh...")],
    "hardlink": [f("file", b"data\n"), hard("link", "file"), d("d"), hard("d/link2", "link")],
    "hardlink_out": [hard("escape", "../outside"), hard("abs", "/etc/passwd"),
                     f("escape", b"overwritten\n")],
    "symlink_write": [sym("link", "../sentinel"), f("link/x", b"escaped\n"),
                      sym("file", "../outside"), f("file", b"replaced\n")],
    "symlink_dir_whiteout": [sym("s", "../sentinel"), f("s/.wh.x"), sym("r", "/"),
                             f("r/.wh.etc"), sym("up", ".."), f("up/.wh.outside")],
    "symlink_mountpoint": [sym("etc", "../sentinel"), sym("tmp", "/tmp"), d("dev"),
                           sym("dev/pts", "../../sentinel")],
    "dotdot": [f("../sentinel/x", b"escaped\n"), f("a/../../outside", b"escaped\n")],
    "absolute": [f("/etc/paddock-fuzz-escape", b"escaped\n"), d("/tmp/paddock-fuzz-escape")],
    "device": [entry("dev/sda", tarfile.CHRTYPE, devmajor=8, devminor=0),
               entry("blk", tarfile.BLKTYPE, devmajor=7, devminor=0),
               entry("fifo", tarfile.FIFOTYPE)],
    "owner": [f("big", uid=70000, gid=70000), d("dir", uid=65536, gid=4294967295),
              f("ok", uid=65535, gid=65534)],
    # base-256 negative owners (GNU format): chown would take -n as 2^32 - n (a finding)
    "owner_negative": [f("neg", uid=-5, gid=-5), d("dev", uid=-0x30303000, gid=0)],
    "replace_dir": [d("a"), d("a/b"), f("a/b/c"), f("a", b"now a file\n")],
    "pax_long": [f("p/" + "n" * 200, b"long\n")],
}

# pax only: a hard link that carries data (written into the file it names), aimed at a symlink
# to the file outside and at a file whose parent is a symlink to the sentinel.
PAX_SEEDS = {
    "hardlink_data": [sym("s", "../outside"), hard("h", "s"), sym("d", "../sentinel"),
                      f("t"), hard("d/x", "t"), entry("h2", tarfile.LNKTYPE, link="s")],
}


def raw_ustar(name, typ, mode, size, link=""):
    """One ustar header by hand, for fields tarfile will not write (mode is 8 raw bytes)."""
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    h[100:108] = mode
    h[108:124] = b"0000000\0" * 2
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"13000000000\0"
    h[156] = ord(typ)
    h[157:157 + len(link)] = link.encode()
    h[257:265] = b"ustar\x0000"
    h[148:156] = b"%06o\0 " % (sum(h[:148]) + 8 * 32 + sum(h[156:]))
    return bytes(h)


# A finding: a hard link to a symlink, with data and a mode libarchive's reader keeps, made
# libarchive chmod() through the symlink (image.c now gives hard links no size).
RAW_SEEDS = {
    "hardlink_symlink_mode": raw_ustar("s", "2", b"0000777\0", 0, "../outside")
    + raw_ustar("h", "1", b"0\xd900644\0", 9, "s") + b"escaped!\n".ljust(512, b"\0")
    + bytes(1024),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    mixed = []
    for name, entries in SEEDS.items():
        data = tar_bytes(entries)
        with open(os.path.join(OUT, name + ".tar"), "wb") as out:
            out.write(data)
        mixed += entries
    for name, entries in PAX_SEEDS.items():
        # tarfile writes no data for a link: give the last one some by hand.
        ti, _ = entries[-1]
        ti.size = 9
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            for e, data in entries[:-1]:
                t.addfile(e, io.BytesIO(data) if e.size else None)
            t.addfile(ti, io.BytesIO(b"escaped!\n"))
        raw = buf.getvalue().rstrip(b"\0")
        with open(os.path.join(OUT, name + ".tar"), "wb") as out:
            out.write(raw + b"\0" * (-len(raw) % 512 + 1024))
    for name, data in RAW_SEEDS.items():
        with open(os.path.join(OUT, name + ".tar"), "wb") as out:
            out.write(data)
    mixed_tar = tar_bytes(mixed, tarfile.PAX_FORMAT)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as z:
        z.write(mixed_tar)
    with open(os.path.join(OUT, "mixed.tar.gz"), "wb") as out:
        out.write(gz.getvalue())
    zst = subprocess.run(["zstd", "-q", "-19", "-c"], input=mixed_tar, check=True,
                         stdout=subprocess.PIPE).stdout
    with open(os.path.join(OUT, "mixed.tar.zst"), "wb") as out:
        out.write(zst)


if __name__ == "__main__":
    main()
