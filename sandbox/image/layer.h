// Unpacking one layer blob, streaming, with both of its digests verified while it is read:
//
//   blob bytes ──sha256 (manifest's layer digest)──► reader 1: libarchive "raw" format,
//   gzip / zstd / no filter, detected from the bytes (not trusted from the media type)
//   ──sha256 (config's diff_id)──► reader 2: libarchive tar ──► tree_writer (tree_writer.h)
//
// Nothing is read twice and no temporary copy is made. The digests are known only at the end,
// so the caller unpacks into a temporary directory and renames it into place only when this
// returns success (see store.h); on any error the temporary is removed. After the tar's end
// the rest of both streams is still read and hashed: the digests cover every byte.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "base/error.h"
#include "base/unique_fd.h"
#include "sandbox/image/tree_writer.h"

namespace evalbox::sandbox::image {

// A stream of bytes: a blob file, or an entry of an outer archive (docker-archive).
class byte_source {
 public:
  virtual ~byte_source() = default;
  // Reads up to buf.size() bytes; 0 at the end.
  virtual result<size_t> read(std::span<std::byte> buf) = 0;
};

class fd_source final : public byte_source {
 public:
  explicit fd_source(unique_fd fd) : fd_(std::move(fd)) {}
  result<size_t> read(std::span<std::byte> buf) override;

 private:
  unique_fd fd_;
};

struct layer_expect {
  std::string digest;  // "sha256:<hex>" of the blob as stored; empty when the source names none
  int64_t size = -1;   // the blob's size; -1 when unknown
  // "sha256:<hex>" of the uncompressed tar (the config's rootfs.diff_ids); empty for a tar that
  // is verified otherwise (a bundle: by the tree digest of what it unpacks to)
  std::string diff_id;
};

struct layer_result {
  std::string compression;  // "none", "gzip", "zstd"
  uint64_t blob_bytes = 0;  // as stored
  uint64_t tar_bytes = 0;   // uncompressed stream
  uint64_t bytes = 0;       // file content written
  uint64_t entries = 0;
  uint64_t whiteouts = 0;
  uint64_t devices_skipped = 0;  // device nodes not created (tree_writer.h)
};

struct unpack_control {
  const std::atomic<bool>* cancel = nullptr;  // set -> error_kind::cancelled, soon
  // Called now and then with the blob bytes read so far (for progress lines).
  std::function<void(uint64_t blob_bytes)> progress;
};

// Unpacks `blob` through `out` (ending the layer: out.end_layer(); the caller finishes the
// tree). Errors: invalid_argument for bad
// content (named entry, digest or size mismatch, corrupt or truncated compression, limits),
// cancelled, io.
result<layer_result> unpack_layer(byte_source& blob, const layer_expect& expect, tree_writer& out,
                                  const unpack_control& control);

}  // namespace evalbox::sandbox::image
