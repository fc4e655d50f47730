// Streaming layer unpack with digest verification (see layer.h). The only file that turns
// libarchive entries into tree_writer entries.
#include "sandbox/image/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <vector>

#include "base/digest.h"
#include "base/log.h"

namespace evalbox::sandbox::image {

namespace {

constexpr size_t copy_block = 256u << 10;

struct archive_deleter {
  void operator()(struct archive* a) const noexcept { archive_read_free(a); }
};
using archive_ptr = std::unique_ptr<struct archive, archive_deleter>;

// Reader 1's input: the blob, hashed and counted as libarchive pulls it.
struct blob_feed {
  byte_source* src = nullptr;
  const unpack_control* control = nullptr;
  sha256 hash;
  uint64_t bytes = 0;
  uint64_t reported = 0;
  std::vector<std::byte> buf = std::vector<std::byte>(copy_block);
  std::optional<error> failure;

  // Returns bytes read (0 = end) or -1 with `failure` set.
  ssize_t pull() {
    if (control->cancel && control->cancel->load(std::memory_order_relaxed)) {
      failure = error{error_kind::cancelled, "cancelled", 0};
      return -1;
    }
    auto n = src->read(buf);
    if (!n) {
      failure = std::move(n).error();
      return -1;
    }
    hash.update(std::span<const std::byte>(buf.data(), *n));
    bytes += *n;
    if (control->progress && bytes - reported >= (8u << 20)) {
      reported = bytes;
      control->progress(bytes);
    }
    return static_cast<ssize_t>(*n);
  }
};

la_ssize_t read_blob(struct archive* a, void* data, const void** out) {
  auto* feed = static_cast<blob_feed*>(data);
  ssize_t n = feed->pull();
  if (n < 0) {
    archive_set_error(a, EIO, "%s", feed->failure->message.c_str());
    return -1;
  }
  *out = feed->buf.data();
  return n;
}

// Reader 2's input: reader 1's decompressed output, hashed (the diff_id) and bounded.
struct tar_feed {
  struct archive* decompressor = nullptr;  // reader 1
  bool at_end = false;                     // reader 1 has no entry at all (empty blob)
  sha256 hash;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;
  std::vector<std::byte> buf = std::vector<std::byte>(copy_block);
  std::optional<error> failure;
  blob_feed* blob = nullptr;

  ssize_t pull() {
    if (at_end) return 0;
    la_ssize_t n = archive_read_data(decompressor, buf.data(), buf.size());
    if (n < 0) {
      if (blob->failure) {
        failure = *blob->failure;
      } else {
        failure = error{
            error_kind::invalid_argument,
            fmt::format("corrupt or truncated compressed stream: {}",
                        archive_error_string(decompressor) ? archive_error_string(decompressor)
                                                           : "unknown error"),
            0};
      }
      return -1;
    }
    hash.update(std::span<const std::byte>(buf.data(), static_cast<size_t>(n)));
    bytes += static_cast<uint64_t>(n);
    if (bytes > max_bytes) {
      failure = error{error_kind::invalid_argument,
                      fmt::format("the uncompressed layer is larger than {} bytes (a "
                                  "decompression bomb, or raise EVALBOX_IMAGE_MAX_LAYER_BYTES)",
                                  max_bytes),
                      0};
      return -1;
    }
    return static_cast<ssize_t>(n);
  }
};

la_ssize_t read_tar(struct archive* a, void* data, const void** out) {
  auto* feed = static_cast<tar_feed*>(data);
  ssize_t n = feed->pull();
  if (n < 0) {
    archive_set_error(a, EIO, "%s", feed->failure->message.c_str());
    return -1;
  }
  *out = feed->buf.data();
  return n;
}

std::string compression_name(int code) {
  switch (code) {
    case ARCHIVE_FILTER_NONE:
      return "none";
    case ARCHIVE_FILTER_GZIP:
      return "gzip";
    case ARCHIVE_FILTER_ZSTD:
      return "zstd";
    default:
      return fmt::format("filter {}", code);
  }
}

// The most specific message: a failure our callbacks recorded, else libarchive's own.
error archive_failure(struct archive* a, const blob_feed& blob, const tar_feed& tar,
                      std::string_view doing) {
  if (blob.failure) return *blob.failure;
  if (tar.failure) return *tar.failure;
  const char* msg = archive_error_string(a);
  return error{error_kind::invalid_argument,
               fmt::format("{}: {}", doing, msg ? msg : "unknown libarchive error"), 0};
}

result<tree_entry> to_tree_entry(struct archive_entry* ae) {
  tree_entry e;
  const char* path = archive_entry_pathname(ae);
  if (!path) path = archive_entry_pathname_utf8(ae);
  if (!path)
    return make_error(error_kind::invalid_argument, "an entry without a readable path name");
  e.path = path;
  e.mode = archive_entry_mode(ae) & 07777;
  if (archive_entry_mtime_is_set(ae)) {
    e.mtime.tv_sec = archive_entry_mtime(ae);
    e.mtime.tv_nsec = archive_entry_mtime_nsec(ae);
  }
  e.size = archive_entry_size_is_set(ae) ? archive_entry_size(ae) : 0;
  if (const char* target = archive_entry_hardlink(ae)) {
    e.type = entry_type::hardlink;
    e.link = target;
  } else {
    switch (archive_entry_filetype(ae)) {
      case AE_IFREG:
        e.type = entry_type::regular;
        break;
      case AE_IFDIR:
        e.type = entry_type::directory;
        break;
      case AE_IFLNK: {
        e.type = entry_type::symlink;
        const char* t = archive_entry_symlink(ae);
        if (!t) t = archive_entry_symlink_utf8(ae);
        e.link = t ? t : "";
        break;
      }
      case AE_IFIFO:
        e.type = entry_type::fifo;
        break;
      case AE_IFCHR:
        e.type = entry_type::char_device;
        break;
      case AE_IFBLK:
        e.type = entry_type::block_device;
        break;
      case AE_IFSOCK:
        e.type = entry_type::socket;
        break;
      default:
        return make_error(error_kind::invalid_argument, "entry \"{}\": unknown file type {:o}",
                          e.path, static_cast<unsigned>(archive_entry_filetype(ae)));
    }
  }
  if (e.type == entry_type::char_device || e.type == entry_type::block_device) {
    e.dev_major = archive_entry_rdevmajor(ae);
    e.dev_minor = archive_entry_rdevminor(ae);
  }
  if (archive_entry_xattr_reset(ae) > 0) {
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    while (archive_entry_xattr_next(ae, &name, &value, &size) == ARCHIVE_OK) {
      if (e.xattrs.size() >= 1024)
        return make_error(error_kind::invalid_argument, "entry \"{}\": more than 1024 xattrs",
                          e.path);
      e.xattrs.emplace_back(name ? name : "", std::string(static_cast<const char*>(value), size));
    }
  }
  return e;
}

status check_digest(sha256& hash, const std::string& want, std::string_view what) {
  std::string got = "sha256:" + hash.hex_digest();
  if (got != want)
    return make_error(error_kind::invalid_argument, "{} mismatch: expected {}, got {}", what, want,
                      got);
  return {};
}

}  // namespace

result<size_t> fd_source::read(std::span<std::byte> buf) {
  while (true) {
    ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return sys_error(errno, "read blob");
  }
}

result<layer_result> unpack_layer(byte_source& src, const layer_expect& expect, tree_writer& out,
                                  const unpack_control& control) {
  blob_feed blob;
  blob.src = &src;
  blob.control = &control;
  tar_feed tar;
  tar.blob = &blob;
  layer_result res;

  archive_ptr r1(archive_read_new());
  if (!r1) return make_error(error_kind::internal, "archive_read_new failed");
  // Only these two filters (and none): no external programs, no exotic decoders.
  if (archive_read_support_filter_gzip(r1.get()) != ARCHIVE_OK ||
      archive_read_support_filter_zstd(r1.get()) != ARCHIVE_OK)
    return make_error(error_kind::unsupported,
                      "libarchive was built without gzip or zstd support (libarchive-dev)");
  archive_read_support_format_raw(r1.get());
  if (archive_read_open(r1.get(), &blob, nullptr, read_blob, nullptr) != ARCHIVE_OK)
    return std::unexpected(archive_failure(r1.get(), blob, tar, "read layer blob"));
  struct archive_entry* raw_entry = nullptr;
  int rc = archive_read_next_header(r1.get(), &raw_entry);
  if (rc == ARCHIVE_EOF) {
    tar.at_end = true;
  } else if (rc < ARCHIVE_WARN) {
    return std::unexpected(archive_failure(r1.get(), blob, tar, "read layer blob"));
  }
  res.compression = compression_name(archive_filter_code(r1.get(), 0));
  tar.decompressor = r1.get();
  // Content is bounded by the writer (declared sizes); the stream also carries a header of at
  // least 512 bytes (1536 with a pax header) per entry, and padding.
  tar.max_bytes = out.limits().max_bytes + out.limits().max_entries * 1536 + (64u << 20);

  archive_ptr r2(archive_read_new());
  if (!r2) return make_error(error_kind::internal, "archive_read_new failed");
  archive_read_support_format_tar(r2.get());
  archive_read_support_format_empty(r2.get());
  if (archive_read_open(r2.get(), &tar, nullptr, read_tar, nullptr) != ARCHIVE_OK) {
    error e = archive_failure(r2.get(), blob, tar, "read layer tar");
    if (!blob.failure && !tar.failure && res.compression == "none")
      e.message += " (not a tar stream; evalbox reads tar layers, plain, gzip or zstd)";
    return std::unexpected(std::move(e));
  }

  struct archive_entry* ae = nullptr;
  while (true) {
    rc = archive_read_next_header(r2.get(), &ae);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) {
      error e = archive_failure(r2.get(), blob, tar, "read layer tar");
      if (!blob.failure && !tar.failure && res.compression == "none" && out.entries() == 0)
        e.message += " (not a tar stream; evalbox reads tar layers, plain, gzip or zstd)";
      return std::unexpected(std::move(e));
    }
    if (control.cancel && control.cancel->load(std::memory_order_relaxed))
      return make_error(error_kind::cancelled, "cancelled");
    tree_entry entry = EB_TRY(to_tree_entry(ae));
    struct archive* reader = r2.get();
    content_reader content = [&]() -> result<std::optional<content_block>> {
      const void* buf = nullptr;
      size_t size = 0;
      la_int64_t offset = 0;
      int r = archive_read_data_block(reader, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) return std::optional<content_block>();
      if (r < ARCHIVE_WARN) {
        error e = archive_failure(reader, blob, tar, "read entry content");
        return std::unexpected(std::move(e).with_context(fmt::format("entry \"{}\"", entry.path)));
      }
      return std::optional<content_block>(content_block{buf, size, offset});
    };
    EB_TRY(out.add(entry, content));
  }
  // The digests cover every byte: drain what follows the tar's end marker, then the blob.
  while (true) {
    ssize_t n = tar.pull();
    if (n < 0) return std::unexpected(*tar.failure);
    if (n == 0) break;
  }
  while (true) {
    ssize_t n = blob.pull();
    if (n < 0) return std::unexpected(*blob.failure);
    if (n == 0) break;
  }
  if (expect.size >= 0 && blob.bytes != static_cast<uint64_t>(expect.size))
    return make_error(error_kind::invalid_argument,
                      "blob is {} bytes, its descriptor says {} (truncated or replaced)",
                      blob.bytes, expect.size);
  if (!expect.digest.empty()) EB_TRY(check_digest(blob.hash, expect.digest, "layer digest"));
  if (!expect.diff_id.empty())
    EB_TRY(check_digest(tar.hash, expect.diff_id, "diff_id (uncompressed layer digest)"));
  EB_TRY(out.end_layer());
  res.blob_bytes = blob.bytes;
  res.tar_bytes = tar.bytes;
  res.bytes = out.bytes();
  res.entries = out.entries();
  res.whiteouts = out.whiteouts();
  res.devices_skipped = out.devices_skipped();
  if (control.progress) control.progress(blob.bytes);
  return res;
}

}  // namespace evalbox::sandbox::image
