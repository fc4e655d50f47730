// Image references: where an image comes from, as a fixture or the command line names it.
//
//   oci:DIR[:TAG]                  an OCI image layout directory (index.json, blobs/)
//   oci-archive:FILE[:TAG]         the same layout inside a tar (podman save --format oci-archive)
//   docker-archive:FILE[:NAME:TAG] docker save / podman save output (manifest.json, layer tars)
//   rootfs:DIR                     a plain root filesystem directory, imported as one layer
//
// As in skopeo, the path ends at the first ':' after the transport (a path containing ':'
// cannot be named). A relative path is resolved against the directory of the file that named
// the image (the caller passes it), never against the process's working directory by chance.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "base/error.h"

namespace evalbox::sandbox::image {

enum class transport { oci, oci_archive, docker_archive, rootfs };
std::string_view to_string(transport t) noexcept;

struct reference {
  transport kind = transport::oci;
  std::filesystem::path path;  // absolute, lexically normalized
  std::string tag;  // oci/oci-archive: the ref.name; docker-archive: "NAME:TAG"; may be empty

  // The canonical text ("oci:/abs/dir:tag"): how the store records and matches it.
  [[nodiscard]] std::string str() const;
};

// Parses `text`; a relative path is resolved against `base_dir` (which must be absolute, or
// empty for the current directory). Errors name the reference and say what is accepted.
result<reference> parse_reference(std::string_view text, const std::filesystem::path& base_dir);

}  // namespace evalbox::sandbox::image
