"""Build OCI image layouts for the pull tests: umoci for ordinary layers, hand-made blobs for
what umoci 0.4 cannot make (an opaque-directory layer, a zstd layer, a multi-platform index).
Everything here runs on the host filesystem; pushing happens in the daemon's netns."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile


def run(*cmd):
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Layout:
    def __init__(self, path):
        self.path = path
        run("umoci", "init", "--layout", path)

    def ref(self, tag):
        return "%s:%s" % (self.path, tag)

    # ---- raw blob and index access

    def write_blob(self, data):
        d = sha256(data)
        with open(os.path.join(self.path, "blobs", "sha256", d[7:]), "wb") as f:
            f.write(data)
        return d

    def read_blob(self, digest):
        with open(os.path.join(self.path, "blobs", "sha256", digest[7:]), "rb") as f:
            return f.read()

    def _index(self):
        with open(os.path.join(self.path, "index.json")) as f:
            return json.load(f)

    def descriptor(self, tag):
        for m in self._index()["manifests"]:
            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
                return m
        raise KeyError(tag)

    def tag(self, tag, media_type, data):
        """Point tag at a new manifest or index blob."""
        digest = self.write_blob(data)
        idx = self._index()
        idx["manifests"] = [m for m in idx["manifests"]
                            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag]
        idx["manifests"].append({"mediaType": media_type, "digest": digest, "size": len(data),
                                 "annotations": {"org.opencontainers.image.ref.name": tag}})
        with open(os.path.join(self.path, "index.json"), "w") as f:
            json.dump(idx, f)
        return digest

    def manifest(self, tag):
        return json.loads(self.read_blob(self.descriptor(tag)["digest"]))

    # ---- umoci steps

    def new(self, tag, arch="amd64"):
        run("umoci", "new", "--image", self.ref(tag))
        if arch != "amd64":
            run("umoci", "config", "--image", self.ref(tag), "--architecture", arch)

    def commit_dir(self, base_tag, new_tag, bundle, change):
        """unpack base_tag, let change(rootfs) edit it, repack as new_tag (one new layer)."""
        run("umoci", "unpack", "--image", self.ref(base_tag), bundle)
        change(os.path.join(bundle, "rootfs"))
        run("umoci", "repack", "--image", self.ref(new_tag), bundle)
        run("rm", "-rf", bundle)

    def add_tar_layer(self, base_tag, new_tag, tar_bytes, compression="gzip"):
        """A hand-made layer on top of base_tag: gzip through umoci, zstd by hand."""
        if compression == "gzip":
            p = os.path.join(self.path, "..", "layer.tar")
            with open(p, "wb") as f:
                f.write(tar_bytes)
            run("umoci", "raw", "add-layer", "--image", self.ref(base_tag), "--tag", new_tag, p)
            os.unlink(p)
            return
        comp = subprocess.run(["zstd", "-q", "-c"], input=tar_bytes, stdout=subprocess.PIPE,
                              check=True).stdout
        m = self.manifest(base_tag)
        cfg = json.loads(self.read_blob(m["config"]["digest"]))
        cfg["rootfs"]["diff_ids"].append(sha256(tar_bytes))
        cfg_bytes = json.dumps(cfg).encode()
        m["config"] = {"mediaType": m["config"]["mediaType"], "digest": self.write_blob(cfg_bytes),
                       "size": len(cfg_bytes)}
        m["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd",
                            "digest": self.write_blob(comp), "size": len(comp)})
        self.tag(new_tag, "application/vnd.oci.image.manifest.v1+json", json.dumps(m).encode())

    def index(self, new_tag, entries):
        """An image index of (tag, arch) pairs, tagged new_tag."""
        manifests = []
        for tag, arch in entries:
            d = self.descriptor(tag)
            manifests.append({"mediaType": d["mediaType"], "digest": d["digest"],
                              "size": d["size"], "platform": {"os": "linux", "architecture": arch}})
        idx = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
               "manifests": manifests}
        return self.tag(new_tag, "application/vnd.oci.image.index.v1+json", json.dumps(idx).encode())


def make_tar(entries):
    """entries: (name, kind, data) with kind "file" | "dir"; owned by root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                t.addfile(ti)
            else:
                ti.mode = 0o644
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()
