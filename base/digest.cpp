// SHA-256 over OpenSSL's SHA256_* functions, and the deterministic tree digest.
//
// Not EVP: OpenSSL 3's EVP fetches the digest from its default provider, and the first fetch
// in a process registers every algorithm name the provider has: 0.7 ms, paid by every evalbox
// process that digests anything (`evalbox sandbox exec` among them), against 0.01 ms for the
// first digest here. SHA256_Init/Update/Final are deprecated in OpenSSL 3.0 but kept
// throughout 3.x, and run the same assembly (SHA-NI where the CPU has it) on the same bytes.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "base/digest.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

#include "base/unique_fd.h"

namespace evalbox {
inline namespace base {

struct sha256::impl {
  SHA256_CTX ctx;
};

sha256::sha256() : impl_(std::make_unique<impl>()) {
  if (SHA256_Init(&impl_->ctx) != 1) std::abort();
}
sha256::~sha256() = default;
sha256::sha256(sha256&&) noexcept = default;
sha256& sha256::operator=(sha256&&) noexcept = default;

sha256& sha256::update(std::span<const std::byte> bytes) {
  SHA256_Update(&impl_->ctx, bytes.data(), bytes.size());
  return *this;
}

sha256& sha256::update(std::string_view text) {
  SHA256_Update(&impl_->ctx, text.data(), text.size());
  return *this;
}

std::string sha256::hex_digest() {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> md{};
  SHA256_Final(md.data(), &impl_->ctx);
  static constexpr char hex_digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(md.size() * 2);
  for (unsigned char b : md) {
    out.push_back(hex_digits[b >> 4]);
    out.push_back(hex_digits[b & 0xf]);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) { return sha256().update(bytes).hex_digest(); }

namespace {

result<void> hash_fd(int fd, sha256& h, const std::filesystem::path& path) {
  std::array<std::byte, 1 << 16> buf;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error(errno, "read {}", path.string());
    }
    if (n == 0) return {};
    h.update(std::span(buf.data(), static_cast<size_t>(n)));
  }
}

result<std::string> file_digest_nofollow(const std::filesystem::path& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return sys_error(errno, "open {}", path.string());
  sha256 h;
  EB_TRY(hash_fd(fd.get(), h, path));
  return h.hex_digest();
}

}  // namespace

result<std::string> sha256_file(const std::filesystem::path& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", path.string());
  sha256 h;
  EB_TRY(hash_fd(fd.get(), h, path));
  return h.hex_digest();
}

result<std::string> tree_digest(const std::filesystem::path& root) {
  return tree_digest(root, tree_digest_options{});
}

result<std::string> tree_digest(const std::filesystem::path& root,
                                const tree_digest_options& options) {
  struct entry {
    std::string rel;
    std::filesystem::path abs;
  };
  std::vector<entry> entries;
  struct stat st {};
  if (::lstat(root.c_str(), &st) != 0) return sys_error(errno, "lstat {}", root.string());
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    std::filesystem::recursive_directory_iterator it(root, std::filesystem::directory_options::none,
                                                     ec);
    if (ec) return sys_error(ec.value(), "open directory {}", root.string());
    for (auto end = std::filesystem::recursive_directory_iterator(); it != end; it.increment(ec)) {
      if (ec) return sys_error(ec.value(), "walk {}", root.string());
      std::string rel = it->path().lexically_relative(root).generic_string();
      if (std::find(options.skip.begin(), options.skip.end(), rel) != options.skip.end()) {
        it.disable_recursion_pending();
        continue;
      }
      entries.push_back({std::move(rel), it->path()});
    }
  } else {
    entries.push_back({".", root});
  }
  std::sort(entries.begin(), entries.end(),
            [](const entry& a, const entry& b) { return a.rel < b.rel; });

  sha256 h;
  h.update("evalbox.tree.v1\n");
  for (const auto& e : entries) {
    if (::lstat(e.abs.c_str(), &st) != 0) return sys_error(errno, "lstat {}", e.abs.string());
    std::string line;
    if (auto r = options.replace.find(e.rel); r != options.replace.end() && S_ISREG(st.st_mode)) {
      line = fmt::format("f {:o} {} {}\n", st.st_mode & 07777, sha256_hex(r->second), e.rel);
    } else if (S_ISREG(st.st_mode)) {
      std::string content = EB_TRY(file_digest_nofollow(e.abs));
      line = fmt::format("f {:o} {} {}\n", st.st_mode & 07777, content, e.rel);
    } else if (S_ISDIR(st.st_mode)) {
      line = fmt::format("d {:o} {}\n", st.st_mode & 07777, e.rel);
    } else if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      auto target = std::filesystem::read_symlink(e.abs, ec);
      if (ec) return sys_error(ec.value(), "readlink {}", e.abs.string());
      line = fmt::format("l {} -> {}\n", e.rel, target.string());
    } else {
      line = fmt::format("o {:o} {}\n", st.st_mode, e.rel);
    }
    h.update(line);
  }
  return h.hex_digest();
}

bool is_sha256_hex(std::string_view text) noexcept {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace base
}  // namespace evalbox
