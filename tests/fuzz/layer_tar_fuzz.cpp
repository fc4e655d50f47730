// Fuzzes the unpacking of one image layer (sandbox/image/layer.h): the blob — plain tar, gzip
// or zstd, detected from the bytes — through libarchive into the tree writer, as the store
// unpacks every layer of an image it imports. A layer is untrusted: whatever it holds must end
// in an error or a tree under the writer's root, never a write outside it (the directory
// beside the root must stay empty) and never a crash. Each input is unpacked twice: with
// overlayfs whiteouts in their unprivileged form, and flattened (the store's copy fallback).
// A plain tar input is given its own digest as the diff_id, so the layer's end and the tree's
// finish run too; a compressed one ends at the digest check.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/digest.h"
#include "sandbox/image/layer.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using namespace evalbox;
using namespace evalbox::sandbox::image;

class memory_source final : public byte_source {
 public:
  explicit memory_source(std::string_view bytes) : bytes_(bytes) {}
  result<size_t> read(std::span<std::byte> buf) override {
    size_t n = std::min(buf.size(), bytes_.size() - at_);
    std::memcpy(buf.data(), bytes_.data() + at_, n);
    at_ += n;
    return n;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

bool compressed(std::string_view b) {
  return b.starts_with("\x1f\x8b") || b.starts_with("\x28\xb5\x2f\xfd");
}

// The writer may leave directories without write or search permission (their modes come from
// the layer): open them up before removing the tree. Symlinks are not followed.
void remove_tree(const fs::path& root) {
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(root, ec))) {
    ::chmod(root.c_str(), 0700);
    for (const auto& e : fs::directory_iterator(root, ec)) remove_tree(e.path());
  }
  fs::remove(root, ec);
}

void unpack_once(std::string_view bytes, bool flatten) {
  const fs::path& scratch = fuzz::scratch_dir();
  const fs::path root = scratch / "root";
  const fs::path beside = scratch / "beside";
  fs::create_directories(beside);
  fs::create_directory(root);
  writer_options o;
  o.owner_uid = ::getuid();
  o.owner_gid = ::getgid();
  o.whiteout =
      flatten ? evalbox::sys::whiteout_form::copy : evalbox::sys::whiteout_form::user_xattr;
  o.flatten = flatten;
  o.limits.max_bytes = 8u << 20;
  o.limits.max_entries = 4096;
  if (auto w = tree_writer::open(root, o)) {
    memory_source src(bytes);
    layer_expect expect;
    expect.diff_id =
        compressed(bytes) ? "sha256:" + std::string(64, '0') : "sha256:" + sha256_hex(bytes);
    if (unpack_layer(src, expect, *w, {})) (void)w->finish();
  }
  remove_tree(root);
  std::error_code ec;
  fuzz::check(fs::is_empty(beside, ec) && !ec, "nothing is written beside the layer's root");
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(scratch, ec)) {
    (void)e;
    ++entries;
  }
  fuzz::check(entries == 1, "the layer's root is all the writer made");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = evalbox::fuzz::as_text(data, size);
  unpack_once(bytes, false);
  unpack_once(bytes, true);
  return 0;
}
