#!/usr/bin/env python3
"""Builds the OCI layout that registry-env pushes into the test registry.

  registry_images.py BUSYBOX_OCI OUT

BUSYBOX_OCI is the busybox test image (`tests/images/make-images busybox`, its oci/ directory).
OUT becomes one OCI image layout holding four tags (blobs shared):

  busybox   the busybox image, byte for byte (same manifest digest)
  multi     an OCI image index: linux/amd64 -> busybox's manifest, linux/arm64/v8 -> the same
            layers with an arm64 config
  derived   busybox's two layers plus a small gzip layer (/etc/derived): its base is busybox's
  five      five gzip layers of about 3.3 MiB each (3 MiB pseudo-random + 3 MiB text), for the
            pull benchmark

and OUT/images.json: tag -> {digest, mediaType, layers}. Same inputs, same digests: every tar has
fixed times and owners, the pseudo-random bytes come from fixed seeds, gzip has no timestamp.
"""
import copy
import gzip
import hashlib
import io
import json
import pathlib
import random
import shutil
import sys
import tarfile

EPOCH = 1700000000
CREATED = "2023-11-14T22:13:20Z"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


class Layout:
    def __init__(self, out: pathlib.Path):
        self.out = out
        self.blobs = out / "blobs" / "sha256"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.refs = []  # index.json's descriptors, one per tag

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (self.blobs / digest).write_bytes(data)
        return "sha256:" + digest

    def get(self, digest: str) -> bytes:
        return (self.blobs / digest.split(":", 1)[1]).read_bytes()

    def descriptor(self, media_type: str, data: bytes) -> dict:
        return {"mediaType": media_type, "digest": self.put(data), "size": len(data)}

    def tag(self, name: str, descriptor: dict):
        ref = dict(descriptor, annotations={"org.opencontainers.image.ref.name": name})
        self.refs.append(ref)

    def image(self, config: dict, layers: list) -> dict:
        """Writes a config and its manifest; returns the manifest's descriptor."""
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                    "config": self.descriptor(OCI_CONFIG, canonical(config)), "layers": layers}
        return self.descriptor(OCI_MANIFEST, canonical(manifest))

    def finish(self):
        (self.out / "index.json").write_bytes(
            canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": self.refs}))
        (self.out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')


def tar_layer(files: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "root", "root"
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def add_gzip_layer(layout: Layout, config: dict, layers: list, files: dict, level: int = 6):
    tar = tar_layer(files)
    layers.append(layout.descriptor(OCI_LAYER_GZIP, gzip.compress(tar, level, mtime=0)))
    config["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(tar).hexdigest())
    config.setdefault("history", []).append({"created": CREATED,
                                             "created_by": "registry_images.py"})


def load_busybox(layout: Layout, source: pathlib.Path):
    """Copies busybox's blobs into the layout; returns its manifest descriptor and documents."""
    index = json.loads((source / "index.json").read_text())
    top = index["manifests"][0]
    for blob in (source / "blobs" / "sha256").iterdir():
        shutil.copyfile(blob, layout.blobs / blob.name)
    manifest = json.loads(layout.get(top["digest"]))
    config = json.loads(layout.get(manifest["config"]["digest"]))
    descriptor = {k: top[k] for k in ("mediaType", "digest", "size")}
    return descriptor, manifest, config


def build(source: pathlib.Path, out: pathlib.Path):
    layout = Layout(out)
    busybox, manifest, config = load_busybox(layout, source)
    layout.tag("busybox", busybox)

    # multi: the busybox manifest for amd64, the same layers under an arm64 config for arm64.
    arm64 = copy.deepcopy(config)
    arm64.update(architecture="arm64", variant="v8")
    arm64_manifest = layout.image(arm64, manifest["layers"])
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        dict(busybox, platform={"architecture": "amd64", "os": "linux"}),
        dict(arm64_manifest, platform={"architecture": "arm64", "os": "linux", "variant": "v8"}),
    ]}
    layout.tag("multi", layout.descriptor(OCI_INDEX, canonical(index)))

    # derived: busybox plus one small layer.
    derived = copy.deepcopy(config)
    layers = list(manifest["layers"])
    add_gzip_layer(layout, derived, layers, {
        "etc": None, "etc/derived": b"this image is busybox plus this layer\n"})
    derived["config"]["Env"] = derived["config"].get("Env", []) + ["EVALBOX_DERIVED=1"]
    layout.tag("derived", layout.image(derived, layers))

    # five: five layers of 6 MiB each that compress to about 3.3 MiB.
    five = {"architecture": "amd64", "os": "linux", "created": CREATED,
            "config": {"Env": ["PATH=/bin"]}, "rootfs": {"type": "layers", "diff_ids": []}}
    layers = []
    for n in range(5):
        noise = random.Random(n).randbytes(3 << 20)
        text = b"".join(b"layer %d line %06d of the evalbox five-layer image\n" % (n, i)
                        for i in range(3 << 20 >> 6))
        add_gzip_layer(layout, five, layers, {"data": None, f"data/layer{n}.bin": noise + text},
                       level=1)
    layout.tag("five", layout.image(five, layers))

    layout.finish()
    summary = {}
    for ref in layout.refs:
        doc = json.loads(layout.get(ref["digest"]))
        summary[ref["annotations"]["org.opencontainers.image.ref.name"]] = {
            "digest": ref["digest"], "mediaType": ref["mediaType"],
            "layers": [layer["digest"] for layer in doc.get("layers", [])]}
    (out / "images.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: registry_images.py BUSYBOX_OCI OUT")
    build(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))


if __name__ == "__main__":
    main()
