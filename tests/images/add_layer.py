#!/usr/bin/env python3
"""Adds a layer to an image in an OCI image layout, under a new tag (for tests).

  add_layer.py LAYOUT FROM_TAG NEW_TAG DIR TARGET

The new image is FROM_TAG's with one uncompressed layer on top that holds DIR's files at TARGET
(an absolute path in the image; its parents are created). Blobs are only added and index.json is
replaced by a rename, so a layout whose files are hard links to another's leaves that one as it
was. Files are written with fixed times and owners (root).
"""
import hashlib
import io
import json
import os
import pathlib
import sys
import tarfile

EPOCH = 1700000000


def blob(layout: pathlib.Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest
    if not path.exists():
        path.write_bytes(data)
    return {"digest": "sha256:" + digest, "size": len(data)}


def read_blob(layout: pathlib.Path, digest: str) -> bytes:
    algo, hexdigest = digest.split(":", 1)
    return (layout / "blobs" / algo / hexdigest).read_bytes()


def layer_tar(source: pathlib.Path, target: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
            i = tarfile.TarInfo(name)
            i.type, i.mode, i.mtime = kind, mode, EPOCH
            i.uid = i.gid = 0
            i.uname = i.gname = "root"
            return i
        parts = target.strip("/").split("/")
        for n in range(1, len(parts) + 1):
            tar.addfile(info("/".join(parts[:n]), tarfile.DIRTYPE, 0o755))
        for root, dirs, files in os.walk(source):
            dirs.sort()
            rel = pathlib.Path(root).relative_to(source)
            base = "/".join(parts + ([str(rel)] if str(rel) != "." else []))
            for d in dirs:
                tar.addfile(info(f"{base}/{d}", tarfile.DIRTYPE, 0o755))
            for f in sorted(files):
                path = pathlib.Path(root) / f
                if path.is_symlink():
                    i = info(f"{base}/{f}", tarfile.SYMTYPE, 0o777)
                    i.linkname = os.readlink(path)
                    tar.addfile(i)
                    continue
                data = path.read_bytes()
                i = info(f"{base}/{f}", tarfile.REGTYPE, 0o755 if os.access(path, os.X_OK) else 0o644)
                i.size = len(data)
                tar.addfile(i, io.BytesIO(data))
    return out.getvalue()


def main():
    layout, from_tag, new_tag = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    source, target = pathlib.Path(sys.argv[4]), sys.argv[5]
    index = json.loads((layout / "index.json").read_text())
    ref = "org.opencontainers.image.ref.name"
    entry = next(m for m in index["manifests"] if m.get("annotations", {}).get(ref) == from_tag)
    manifest = json.loads(read_blob(layout, entry["digest"]))
    config = json.loads(read_blob(layout, manifest["config"]["digest"]))

    tar_bytes = layer_tar(source, target)
    layer = blob(layout, tar_bytes)
    layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar"
    config["rootfs"]["diff_ids"].append(layer["digest"])
    config.setdefault("history", []).append({"created": "2023-11-14T22:13:20Z",
                                             "created_by": "add_layer.py"})
    config_desc = blob(layout, json.dumps(config, sort_keys=True).encode())
    config_desc["mediaType"] = manifest["config"]["mediaType"]
    manifest["config"] = config_desc
    manifest["layers"] = manifest["layers"] + [layer]
    manifest_desc = blob(layout, json.dumps(manifest, sort_keys=True).encode())
    manifest_desc["mediaType"] = entry.get("mediaType", "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["annotations"] = {ref: new_tag}
    if "platform" in entry:
        manifest_desc["platform"] = entry["platform"]
    index["manifests"] = [m for m in index["manifests"]
                          if m.get("annotations", {}).get(ref) != new_tag] + [manifest_desc]
    tmp = layout / "index.json.tmp"
    tmp.write_text(json.dumps(index, sort_keys=True))
    tmp.rename(layout / "index.json")


if __name__ == "__main__":
    main()
