#!/usr/bin/env python3
"""Builds the OCI image layouts evalbox's image tests import (see make-images beside this file).

  oci_layout.py busybox OUT BUSYBOX     two layers: busybox + applet links + /etc/os-release
                                        (uncompressed), then a gzip layer with a whiteout of
                                        /etc/motd and an opaque /opt/data
  oci_layout.py rootfs OUT TAR          one zstd layer from a root filesystem tar (mmdebstrap's),
                                        device nodes (/dev/null, /dev/console, ...) kept, as
                                        base images made this way carry them

Every tar is written with fixed times and owners, so the same inputs give the same digests.
"""
import gzip
import hashlib
import io
import json
import os
import pathlib
import subprocess
import sys
import tarfile

EPOCH = 1700000000  # fixed mtime for everything the busybox image contains


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def add(tar, name, *, data=None, kind=tarfile.REGTYPE, mode=0o644, link=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.linkname = link
    if data is not None:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        tar.addfile(info)


class Layout:
    def __init__(self, out: pathlib.Path):
        self.out = out
        (out / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        self.layers = []  # (descriptor, diff_id)

    def blob(self, data: bytes) -> str:
        digest = sha256(data)
        (self.out / "blobs" / "sha256" / digest).write_bytes(data)
        return "sha256:" + digest

    def add_layer(self, tar_bytes: bytes, compression: str):
        diff_id = "sha256:" + sha256(tar_bytes)
        if compression == "gzip":
            data = gzip.compress(tar_bytes, compresslevel=6, mtime=0)
            media = "application/vnd.oci.image.layer.v1.tar+gzip"
        elif compression == "zstd":
            data = subprocess.run(["zstd", "-q", "-3", "-T2", "-c"], input=tar_bytes,
                                  check=True, stdout=subprocess.PIPE).stdout
            media = "application/vnd.oci.image.layer.v1.tar+zstd"
        else:
            data = tar_bytes
            media = "application/vnd.oci.image.layer.v1.tar"
        self.layers.append(({"mediaType": media, "digest": self.blob(data), "size": len(data)},
                            diff_id))

    def finish(self, tag: str, config_body: dict):
        config = {
            "architecture": "amd64", "os": "linux", "created": "2023-11-14T22:13:20Z",
            "config": config_body,
            "rootfs": {"type": "layers", "diff_ids": [d for _, d in self.layers]},
            "history": [{"created": "2023-11-14T22:13:20Z", "created_by": "oci_layout.py"}
                        for _ in self.layers],
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": self.blob(config_bytes), "size": len(config_bytes)},
            "layers": [d for d, _ in self.layers],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": self.blob(manifest_bytes), "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }],
        }
        (self.out / "index.json").write_text(json.dumps(index, sort_keys=True))
        (self.out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')


def busybox(out: pathlib.Path, busybox_bin: pathlib.Path):
    applets = subprocess.run([str(busybox_bin), "--list"], check=True, stdout=subprocess.PIPE,
                             text=True).stdout.split()
    layout = Layout(out)
    one = io.BytesIO()
    with tarfile.open(fileobj=one, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ["bin", "etc", "opt", "opt/data", "opt/data/sub", "tmp", "root"]:
            add(tar, d, kind=tarfile.DIRTYPE, mode=0o1777 if d == "tmp" else 0o755)
        add(tar, "bin/busybox", data=busybox_bin.read_bytes(), mode=0o755)
        for applet in sorted(set(applets)):
            if applet != "busybox":
                add(tar, f"bin/{applet}", kind=tarfile.SYMTYPE, link="busybox", mode=0o777)
        add(tar, "etc/os-release",
            data=b'NAME="evalbox test busybox"\nID=evalbox-busybox\n'
                 b'PRETTY_NAME="the evalbox test busybox"\n')
        add(tar, "etc/motd", data=b"whited out by layer 2\n")
        add(tar, "etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n")
        add(tar, "opt/data/old", data=b"hidden by the opaque directory in layer 2\n")
        add(tar, "opt/data/sub/deep", data=b"hidden too\n")
    layout.add_layer(one.getvalue(), "none")
    two = io.BytesIO()
    with tarfile.open(fileobj=two, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "etc", kind=tarfile.DIRTYPE, mode=0o755)
        add(tar, "etc/.wh.motd", data=b"")
        add(tar, "opt/data", kind=tarfile.DIRTYPE, mode=0o755)
        add(tar, "opt/data/new", data=b"layer 2\n")
        add(tar, "opt/data/.wh..wh..opq", data=b"")  # after a sibling: position must not matter
    layout.add_layer(two.getvalue(), "gzip")
    layout.finish("latest", {"Env": ["PATH=/bin", "EVALBOX_IMAGE=busybox"],
                             "Cmd": ["/bin/sh"], "WorkingDir": "/root"})


def rootfs(out: pathlib.Path, source: pathlib.Path):
    layout = Layout(out)
    buf = io.BytesIO()
    with tarfile.open(source, mode="r:*") as src, \
            tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for info in src:
            dst.addfile(info, src.extractfile(info) if info.isreg() else None)
    layout.add_layer(buf.getvalue(), "zstd")
    layout.finish("latest", {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                                     "/sbin:/bin"], "Cmd": ["/bin/bash"]})


def main():
    kind, out = sys.argv[1], pathlib.Path(sys.argv[2])
    if kind == "busybox":
        busybox(out, pathlib.Path(sys.argv[3]))
    elif kind == "rootfs":
        rootfs(out, pathlib.Path(sys.argv[3]))
    else:
        sys.exit(f"oci_layout.py: unknown kind {kind}")


if __name__ == "__main__":
    main()
