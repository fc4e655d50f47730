// Where an image's files come from, and what they say: an OCI layout directory, an OCI layout
// or a docker save inside a tar, or a root filesystem directory. resolve() reads and verifies
// the metadata only (index, manifest, config: small, digests checked); for_each_layer() then
// streams the layer blobs the store still needs — from a tar in one pass in the tar's own
// order, whatever order the manifest lists them in (docker save writes manifest.json last).
//
// Every file is opened beneath the image's directory (openat2 RESOLVE_BENEATH) or looked up
// inside the tar (a member symlink is followed only within the tar), is bounded in size when it
// is JSON, and must match the digest that names it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "sandbox/image/layer.h"
#include "sandbox/image/oci.h"
#include "sandbox/image/reference.h"

namespace evalbox::sandbox::image {

struct layer_ref {
  std::string diff_id;     // "sha256:<hex>": the store's key for the unpacked layer
  std::string digest;      // the blob's digest; empty when the source does not name one
  int64_t size = -1;       // the blob's size, -1 when unknown
  std::string media_type;  // empty for docker-archive
  std::string location;    // path of the blob in the directory or tar
};

struct registry_settings;  // registry.h

struct resolved_image {
  reference ref;
  std::string manifest_digest;  // empty for docker-archive and rootfs
  // docker://: the digest the reference resolved to — the index's when the tag names an index
  // (what pins the reference for every platform), else the manifest's.
  std::string reference_digest;
  std::string config_digest;  // "sha256:<hex>": the image's id in the store
  image_config config;
  std::vector<layer_ref> layers;  // base first
};

class image_source {
 public:
  virtual ~image_source() = default;
  // Opens the source `ref` names (checks it exists and is the right kind of file). A docker://
  // reference is pulled with `registry` (which must outlive the source).
  static result<std::unique_ptr<image_source>> open(const reference& ref,
                                                    const registry_settings* registry = nullptr);

  // Reads and verifies the metadata. Errors name the reference.
  virtual result<resolved_image> resolve() = 0;

  // Calls `fn(index, blob)` once for each layer index in `wanted` (indexes into
  // resolved.layers); `blob` is valid only during the call. Stops at the first error.
  using layer_fn = std::function<status(size_t index, byte_source& blob)>;
  virtual status for_each_layer(const resolved_image& image, const std::vector<size_t>& wanted,
                                const layer_fn& fn) = 0;
};

// The layers of an image from its manifest and config (paired in order: the config's diff_ids
// name the manifest's blobs uncompressed), each blob at `location_prefix` + its digest's hex.
// A manifest and a config that disagree on the count are an error naming `image`.
result<std::vector<layer_ref>> layers_of(const manifest_doc& manifest, const image_config& config,
                                         std::string_view location_prefix, std::string_view image);

// docker://: a registry's image. resolve() fetches the manifest (index resolved to the platform)
// and config; for_each_layer() downloads the wanted blobs, settings.parallel at once, calling
// `fn` from several threads (each call on its own layer).
std::unique_ptr<image_source> make_registry_source(const reference& ref,
                                                   const registry_settings& settings);

// rootfs:DIR — a directory imported as one layer. Its key is a digest of its listing (paths,
// types, modes, sizes, mtimes, link targets), so a changed tree is a new layer while an
// unchanged one is recognized without reading file contents.
result<std::string> rootfs_digest(const std::filesystem::path& dir);
// Copies the tree through `out` (as one layer); symlinks are copied, never followed.
status copy_rootfs(const std::filesystem::path& dir, tree_writer& out,
                   const std::atomic<bool>* cancel);

}  // namespace evalbox::sandbox::image
