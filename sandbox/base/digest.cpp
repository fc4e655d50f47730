// SHA-256 over OpenSSL EVP, and the deterministic tree digest.
#include "sandbox/base/digest.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

#include "sandbox/base/unique_fd.h"

namespace evalbox {

namespace {

// SHA-256 from the default provider, fetched once. OpenSSL's configuration file is not read:
// it selects providers and engines for TLS and keys, and loading it (with every algorithm
// name it registers) was most of the first digest's cost, paid by every evalbox process.
const EVP_MD* sha256_md() {
  static const EVP_MD* md = [] {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
    EVP_MD* m = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
    if (!m) std::abort();
    return m;
  }();
  return md;
}

}  // namespace

struct sha256::impl {
  EVP_MD_CTX* ctx = nullptr;
  ~impl() { EVP_MD_CTX_free(ctx); }
};

sha256::sha256() : impl_(std::make_unique<impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, sha256_md(), nullptr) != 1) std::abort();
}
sha256::~sha256() = default;
sha256::sha256(sha256&&) noexcept = default;
sha256& sha256::operator=(sha256&&) noexcept = default;

sha256& sha256::update(std::span<const std::byte> bytes) {
  EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size());
  return *this;
}

sha256& sha256::update(std::string_view text) {
  EVP_DigestUpdate(impl_->ctx, text.data(), text.size());
  return *this;
}

std::string sha256::hex_digest() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md.data(), &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
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
      entries.push_back({it->path().lexically_relative(root).generic_string(), it->path()});
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
    if (S_ISREG(st.st_mode)) {
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

}  // namespace evalbox
