// The JSON documents of an image — OCI index, manifest and config (and their Docker v2
// schema-2 equivalents), and docker-archive's manifest.json — parsed into plain structs.
// Everything here is hostile input: sizes are bounded by the caller (max_json_bytes), every
// field is type-checked, digests must be sha256:<64 hex>, and an unknown media type is refused
// rather than guessed at. Platform selection (linux + this host's architecture) lives here too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace evalbox::sandbox::image {

// No index, manifest or config evalbox reads may be larger (real ones are a few KiB; a config
// with a long history stays well under 1 MiB).
inline constexpr size_t max_json_bytes = 4u << 20;
// Nested indexes (an index naming an index) are followed this deep.
inline constexpr int max_index_depth = 4;

struct platform {
  std::string os;
  std::string architecture;
  std::string variant;                    // may be empty
  [[nodiscard]] std::string str() const;  // "linux/amd64", "linux/arm/v7"
};

// "OS/ARCH[/VARIANT]" (`--platform linux/arm64`, "linux/arm/v7"): each part non-empty, letters,
// digits, '.', '_' and '-' only. Errors say what is expected.
result<platform> parse_platform(std::string_view text);

// linux + this machine's architecture in OCI/Go names (x86_64 -> amd64, aarch64 -> arm64).
platform host_platform();
bool platform_matches(const platform& image, const platform& host);

enum class media_kind { index, manifest, config, layer, unknown };
media_kind classify_media_type(std::string_view media_type);

struct descriptor {
  std::string media_type;
  std::string digest;  // "sha256:<hex>", validated
  int64_t size = -1;   // bytes, validated >= 0 where present
  std::optional<platform> plat;
  std::string ref_name;  // annotation org.opencontainers.image.ref.name (index entries)
};

struct index_doc {
  std::vector<descriptor> manifests;
};

struct manifest_doc {
  descriptor config;
  std::vector<descriptor> layers;
};

// What evalbox keeps of an image's config: how a run starts and which layers make it.
struct image_config {
  std::string architecture;
  std::string os;
  std::string variant;
  std::vector<std::string> env;  // "NAME=value"
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
  std::string working_dir;
  std::string user;
  std::vector<std::string> diff_ids;  // sha256 of each uncompressed layer tar, base first

  [[nodiscard]] json to_json() const;
  static result<image_config> from_json(const json& j);
};

// docker-archive's manifest.json: one entry per image in the archive.
struct docker_manifest_entry {
  std::string config;                  // path inside the tar
  std::vector<std::string> repo_tags;  // "localhost/app:latest"
  std::vector<std::string> layers;     // paths inside the tar, base first
};

// `what` names the document in errors ("index.json of oci:/x").
result<index_doc> parse_index(std::string_view text, std::string_view what);
result<manifest_doc> parse_manifest(std::string_view text, std::string_view what);
result<image_config> parse_config(std::string_view text, std::string_view what);
result<std::vector<docker_manifest_entry>> parse_docker_manifest(std::string_view text,
                                                                 std::string_view what);

// "sha256:<64 lowercase hex>" -> the hex. Other algorithms are unsupported (named in the error).
result<std::string> digest_hex(std::string_view digest, std::string_view what);

// Picks the descriptor to follow from an index: the entries whose ref.name is `tag` (all when
// `tag` is empty), then the one for `host`. Errors name the image: an unknown tag lists the
// tags there are; several images and no tag asks for one; only other platforms names them and
// the host's.
result<descriptor> select_manifest(const index_doc& index, std::string_view tag,
                                   const platform& host, std::string_view image);

}  // namespace evalbox::sandbox::image
