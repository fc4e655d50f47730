// The image store: images imported once, their layers unpacked once and shared, kept on disk
// under the state root, and handed to runs as an ordered list of read-only overlay lowers.
//
// Layout (<state>/images/, 0700):
//   store.json                 {"schema": "evalbox.image-store.v1", owner_uid, owner_gid,
//                               whiteout}: written once; a store made for another owner is an
//                               error, never silently reused
//   layers/<hex>/              a finished layer, immutable: tree/ (what the overlay stacks,
//                              every entry owned by the owner) and layer.json (sizes, digests);
//                              <hex> is the layer's diff_id (sha256 of its uncompressed tar) —
//                              or, in a store whose whiteout form is "copy", the chain id of a
//                              whole image flattened onto one tree (docs/environments.md)
//   layers/.tmp-<hex>-<rand>/  a layer being unpacked; renamed to <hex> only when both digests
//                              matched and it is complete (and synced): a crash leaves only
//                              .tmp-* names, which nothing reads and gc removes
//   layers/.del-<hex>-<rand>/  a layer being removed (renamed out of the way first)
//   locks/<hex>.use            flock: SHARED by every holder of the layer (an image_use — a run —
//                              for its whole life; an import while it works); EXCLUSIVE, non-
//                              blocking, by gc and rm to remove it: a layer in use is never
//                              removed
//   locks/<hex>.unpack         flock EXCLUSIVE while unpacking: a second importer of the same
//                              layer (thread or process) waits, then finds it finished
//   records/<id-hex>.json      an image: id (config digest), manifest digests, references,
//                              config summary, ordered layers, sizes (evalbox.image.v1)
//   records/<id-hex>.used      its mtime is the image's last use (touched, not rewritten)
//
// Lifecycle for a run (what the preparer does): store::open(options) → acquire(reference,
// base_dir) → image_use (holds every layer shared; lower_dirs() top-most first for
// fsconfig "lowerdir+") → the run → the image_use is destroyed (locks released).
//
// Thread-safety: a store object may be used from several threads; every cross-process
// guarantee is an flock on a file of its own open file description.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/unique_fd.h"
#include "sandbox/image/oci.h"
#include "sandbox/image/pull.h"
#include "sandbox/image/tree_writer.h"
#include "sandbox/sys/probe.h"

namespace evalbox::sandbox::image {

struct store_options {
  std::filesystem::path state_root;  // the store is <state_root>/images
  // Who owns every unpacked entry: preparer_options.sandbox_uid/gid (the host id the sandbox's
  // root maps to; 60000 as root, the invoking user rootless).
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
  layer_limits limits;  // see parse_limits()
  // The whiteout form for a new store; unset: probed (char_device as root).
  std::optional<sys::whiteout_form> whiteout;
  // syncfs before a layer is published, so a power loss cannot leave a "finished" layer with
  // missing content.
  bool durable = true;
};

// The limits with EVALBOX_IMAGE_MAX_LAYER_BYTES (`max_bytes`, a size: "32GiB") and
// EVALBOX_IMAGE_MAX_LAYER_ENTRIES (`max_entries`, a count) as given applied over `base`; ""
// leaves a limit as it is. A malformed value is an error that names its variable. The texts
// come from the edge, read once into preparer_options (default_preparer_options).
result<layer_limits> parse_limits(std::string_view max_bytes, std::string_view max_entries,
                                  layer_limits base = {});

struct layer_info {
  std::string diff_id;  // "sha256:<hex>"
  std::string digest;   // the blob it came from ("" when the source named none)
  std::string compression;
  uint64_t blob_bytes = 0;
  uint64_t bytes = 0;  // file content unpacked
  uint64_t entries = 0;
  // Device nodes the layer carries, none of them created (tree_writer.h).
  uint64_t devices_skipped = 0;
  std::filesystem::path dir;  // <store>/layers/<hex>/tree: the overlay lower
};

struct image_info {
  std::string id;  // the config's digest ("sha256:<hex>"): same image, same id, whatever the
                   // transport or compression it came in
  std::vector<std::string> manifest_digests;
  std::vector<std::string> references;  // canonical reference texts it was imported as
  image_config config;
  std::vector<layer_info> layers;  // base first
  uint64_t bytes = 0;              // sum of its layers' unpacked bytes
  int64_t created = 0;             // unix seconds of the first import
  int64_t last_used = 0;           // unix seconds

  // The layer trees, top-most first: the order overlayfs takes lowers in (fsconfig
  // "lowerdir+" one by one, or lowerdir=a:b:c).
  [[nodiscard]] std::vector<std::filesystem::path> lower_dirs() const;
  [[nodiscard]] json to_json() const;  // evalbox.image.v1
};

struct import_event {
  enum class kind { resolved, layer_present, layer_start, layer_progress, layer_done };
  kind what = kind::resolved;
  size_t index = 0;  // 0-based layer index
  size_t count = 0;  // layers in the image
  std::string diff_id;
  uint64_t blob_bytes = 0;  // read so far / in total
  int64_t blob_size = -1;   // when known
  double seconds = 0;       // layer_done: time spent
};

struct registry_settings;  // registry.h

struct import_options {
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by SIGINT): stop, remove the partial
  // Called from the importing thread and, for a registry's layers, from download threads (one
  // call at a time).
  std::function<void(const import_event&)> progress;
  pull_policy pull = pull_policy::missing;
  // How docker:// references are pulled (must outlive the call); unset: read from the host
  // (registry_settings_from_host) when one is needed.
  const registry_settings* registry = nullptr;
};

struct import_result {
  image_info image;
  std::string reference;        // the canonical reference text it was imported as
  std::string manifest_digest;  // the manifest this import went through ("" for rootfs and
                                // docker-archive, which name none)
  // docker://: the digest the reference resolved to (the index's for a multi-platform tag),
  // and whether the registry was asked (false: the store's copy, under --pull missing).
  std::string reference_digest;
  bool pulled = false;
  size_t layers_unpacked = 0;  // by this call
  size_t layers_present = 0;   // already in the store
  uint64_t blob_bytes = 0;     // downloaded or read by this call
  // Device nodes not created, summed over the layers this call unpacked (each layer's own
  // count: image.layers).
  uint64_t devices_skipped = 0;
};

// Holds an image's layers for a run: a shared flock on each layer's lock file, so gc and rm
// leave them alone. Move-only; destruction releases.
class image_use {
 public:
  image_use() = default;
  image_use(image_use&&) noexcept = default;
  image_use& operator=(image_use&&) noexcept = default;

  [[nodiscard]] const image_info& image() const noexcept { return info_; }
  [[nodiscard]] std::vector<std::filesystem::path> lower_dirs() const { return info_.lower_dirs(); }
  [[nodiscard]] bool held() const noexcept { return !locks_.empty(); }
  void release() noexcept { locks_.clear(); }

 private:
  friend class store;
  image_info info_;
  std::vector<locked_fd> locks_;
};

struct gc_report {
  int images_removed = 0;
  int layers_removed = 0;
  int temporaries_removed = 0;
  int images_in_use = 0;  // would have been removed for space, but a run holds them
  uint64_t bytes_freed = 0;
  uint64_t bytes_after = 0;
  std::vector<std::string> errors;
};

class store {
 public:
  // Creates the store on first use; checks the owner of an existing one.
  static result<store> open(store_options options);

  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }
  [[nodiscard]] sys::whiteout_form whiteout() const noexcept { return whiteout_; }
  [[nodiscard]] const store_options& options() const noexcept { return options_; }

  // Imports `reference` (see reference.h; relative paths against `base_dir`). Idempotent:
  // layers already present are not read again (only the metadata is), so a second import is
  // O(metadata).
  result<import_result> import(std::string_view reference, const std::filesystem::path& base_dir,
                               const import_options& options = {});
  // import() and hold the image for a run, with no window in which gc could remove a layer.
  result<image_use> acquire(std::string_view reference, const std::filesystem::path& base_dir,
                            const import_options& options = {});
  // Holds an image already imported, named by reference text, id or manifest digest.
  result<image_use> use(std::string_view query, const std::filesystem::path& base_dir = {});

  // Finds an image by reference (as imported), id ("sha256:<hex>" or a unique hex prefix of at
  // least 8) or manifest digest. not_found says how to import it.
  result<image_info> lookup(std::string_view query, const std::filesystem::path& base_dir = {});
  // Every image, most recently used first.
  result<std::vector<image_info>> list();
  // Removes an image and the layers no other image uses. busy when a run holds it.
  status remove(std::string_view query, const std::filesystem::path& base_dir = {});
  // Removes temporaries nobody holds and layers no image names; then, with `max_bytes`,
  // least recently used images (never one a run holds) until the store is at most that big.
  result<gc_report> gc(std::optional<uint64_t> max_bytes);
  // Unpacked bytes of every finished layer.
  result<uint64_t> size();

 private:
  store() = default;
  result<import_result> import_held(std::string_view reference,
                                    const std::filesystem::path& base_dir,
                                    const import_options& options, std::vector<locked_fd>& locks);
  result<std::optional<import_result>> from_store(std::string_view reference,
                                                  const std::filesystem::path& base_dir,
                                                  const import_options& options,
                                                  std::vector<locked_fd>& locks);
  // Removes `reference` from every record but `keep_id`'s (a tag that moved).
  status forget_reference(const std::string& reference, const std::string& keep_id);
  class importer;  // one import's passes (store.cpp)
  result<std::vector<image_info>> read_records();
  result<image_info> read_record(const std::filesystem::path& file);
  result<layer_info> read_layer(const std::string& diff_id);
  status delete_layer(const std::string& hex);
  // gc's passes, in order (store.cpp).
  void collect_temporaries(const std::vector<std::filesystem::path>& entries, gc_report& report);
  status collect_unnamed_layers(const std::vector<std::filesystem::path>& entries,
                                gc_report& report);
  void collect_orphan_locks();
  result<uint64_t> collect_least_recently_used(uint64_t max_bytes, gc_report& report);

  store_options options_;
  std::filesystem::path root_;
  sys::whiteout_form whiteout_ = sys::whiteout_form::char_device;
};

}  // namespace evalbox::sandbox::image
