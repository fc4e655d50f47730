// Image references: where an image comes from, as a fixture or the command line names it.
//
//   oci:DIR[:TAG]                  an OCI image layout directory (index.json, blobs/)
//   oci-archive:FILE[:TAG]         the same layout inside a tar (podman save --format oci-archive)
//   docker-archive:FILE[:NAME:TAG] docker save / podman save output (manifest.json, layer tars)
//   rootfs:DIR                     a plain root filesystem directory, imported as one layer
//   docker://NAME[:TAG][@DIGEST]   an image in a registry, named as Docker names it (pulled,
//                                  registry.h)
//
// A registry name is normalized as Docker does: no domain means docker.io (the first component
// is a domain when it holds a '.' or a ':' or is "localhost"), a docker.io name of one
// component is under library/, index.docker.io is docker.io, and no tag and no digest means
// :latest. Its canonical text is docker://DOMAIN/PATH[:TAG][@sha256:HEX].
//
// As in skopeo, the path ends at the first ':' after the transport (a path containing ':'
// cannot be named). A relative path is resolved against the directory of the file that named
// the image (the caller passes it), never against the process's working directory by chance.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace evalbox::sandbox::image {

enum class transport { oci, oci_archive, docker_archive, rootfs, docker };
std::string_view to_string(transport t) noexcept;

struct reference {
  transport kind = transport::oci;
  std::filesystem::path path;  // absolute, lexically normalized
  std::string tag;  // oci/oci-archive: the ref.name; docker-archive: "NAME:TAG"; may be empty;
                    // docker: the tag ("latest" when neither tag nor digest was given)
  // docker only:
  std::string domain;      // "docker.io", "ghcr.io", "localhost:5000"
  std::string repository;  // "library/python", "org/env"
  std::string digest;      // "sha256:<hex>" when named by digest (over the tag)

  // The canonical text ("oci:/abs/dir:tag"): how the store records and matches it.
  [[nodiscard]] std::string str() const;
  // docker: the same image named by `digest` alone (docker://DOMAIN/PATH@sha256:HEX).
  [[nodiscard]] std::string pinned(std::string_view manifest_digest) const;
  // docker: "DOMAIN/PATH" (what credentials and mirrors are keyed by).
  [[nodiscard]] std::string name() const { return domain + "/" + repository; }
};

// Parses `text`; a relative path is resolved against `base_dir` (which must be absolute, or
// empty for the current directory). Errors name the reference and say what is accepted.
result<reference> parse_reference(std::string_view text, const std::filesystem::path& base_dir);

// A registry reference with or without "docker://" ("python:3.13", "ghcr.io/org/env@sha256:…"):
// what `evalbox image pull` and a Harbor task's docker_image name. `aliases` maps short names
// (registries.conf [aliases], e.g. "python" -> "docker.io/library/python") before the default
// domain applies.
result<reference> parse_registry_reference(
    std::string_view text, const std::vector<std::pair<std::string, std::string>>& aliases = {});

}  // namespace evalbox::sandbox::image
