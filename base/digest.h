// SHA-256 digests (OpenSSL is used only in digest.cpp): of bytes, of files, and of trees.
// A tree digest covers each entry's relative path, type, permission bits and content (or link
// target), in byte order of the paths, so it is the same on every machine for the same tree.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace evalbox {
inline namespace base {

// An incremental SHA-256. Move-only.
class sha256 {
 public:
  sha256();
  ~sha256();
  sha256(sha256&&) noexcept;
  sha256& operator=(sha256&&) noexcept;

  sha256& update(std::span<const std::byte> bytes);
  sha256& update(std::string_view text);
  // Lowercase hex of 64 characters. The object must not be updated afterwards.
  std::string hex_digest();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

std::string sha256_hex(std::string_view bytes);
result<std::string> sha256_file(const std::filesystem::path& path);
// Digest of a directory tree (or a single file) as described above. Symlinks are hashed by
// their target text and never followed.
result<std::string> tree_digest(const std::filesystem::path& root);

// What a tree digest leaves out or counts differently: a fixture's task digest leaves its
// grader files out and counts fixture.yaml without its checks (harness/fixture/load.cpp).
struct tree_digest_options {
  std::vector<std::string> skip;               // relative paths left out, with all below them
  std::map<std::string, std::string> replace;  // relative path → text hashed as its content
};
result<std::string> tree_digest(const std::filesystem::path& root,
                                const tree_digest_options& options);

// True for exactly 64 lowercase hex characters.
bool is_sha256_hex(std::string_view text) noexcept;

}  // namespace base
}  // namespace evalbox
