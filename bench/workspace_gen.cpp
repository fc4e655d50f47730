// Deterministic benchmark workspaces: same names, sizes and bytes on every machine.
#include "bench/workspace_gen.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "base/fs.h"
#include "base/unique_fd.h"

namespace evalbox::bench {
namespace {
namespace fs = std::filesystem;

// Bump when the layout changes, so stale caches are regenerated.
constexpr std::string_view generator_version = "evalbox-bench-workspace-v1";

struct splitmix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

status write_bytes(const fs::path& path, uint64_t size, splitmix64& rng) {
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) return sys_error(errno, "open({})", path.string());
  std::vector<uint64_t> buf(8192);
  while (size > 0) {
    for (auto& w : buf) w = rng.next();
    const size_t n = std::min<uint64_t>(size, buf.size() * sizeof(uint64_t));
    if (::write(fd.get(), buf.data(), n) != static_cast<ssize_t>(n))
      return sys_error(errno, "write({})", path.string());
    size -= n;
  }
  return {};
}

// Leaf directories of the tree, e.g. d3/d1/d7, in a fixed order.
std::vector<fs::path> leaf_dirs(const workspace_shape& s) {
  std::vector<fs::path> dirs{fs::path()};
  for (int level = 0; level < s.depth; ++level) {
    std::vector<fs::path> next;
    for (const auto& d : dirs)
      for (int i = 0; i < s.fanout; ++i) next.push_back(d / fmt::format("d{}", i));
    dirs = std::move(next);
  }
  return dirs;
}

status generate(const workspace_shape& s, const fs::path& root) {
  splitmix64 rng{0x5eed0000ull + s.files};
  EB_TRY(make_dirs(root, 0755));
  int files_left = s.files;
  uint64_t bytes_left = s.bytes;
  auto next_size = [&]() -> uint64_t {
    // Sizes vary between 1/2 and 3/2 of the mean; the last file takes the remainder.
    if (files_left == 1) return bytes_left;
    const uint64_t mean = bytes_left / static_cast<uint64_t>(files_left);
    const uint64_t size = mean / 2 + (mean ? rng.next() % (mean + 1) : 0);
    return std::min(size, bytes_left);
  };
  auto add_file = [&](const fs::path& path) -> status {
    const uint64_t size = next_size();
    EB_TRY(write_bytes(path, size, rng));
    bytes_left -= size;
    --files_left;
    return {};
  };
  if (s.with_git) {
    // A plausible .git: a tenth of the files are loose objects under objects/xx/.
    const fs::path git = root / ".git";
    for (const char* d : {"refs/heads", "refs/tags", "info", "hooks"})
      EB_TRY(make_dirs(git / d, 0755));
    EB_TRY(write_file(git / "HEAD", "ref: refs/heads/main\n"));
    EB_TRY(write_file(git / "config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"));
    EB_TRY(write_file(git / "refs/heads/main", "0123456789abcdef0123456789abcdef01234567\n"));
    files_left -= 3;
    const int objects = s.files / 10;
    for (int i = 0; i < objects; ++i) {
      const uint64_t id = rng.next();
      const fs::path dir = git / "objects" / fmt::format("{:02x}", id & 0xff);
      EB_TRY(make_dirs(dir, 0755));
      EB_TRY(add_file(dir / fmt::format("{:038x}", id >> 8)));
    }
  }
  const auto dirs = leaf_dirs(s);
  for (const auto& d : dirs) EB_TRY(make_dirs(root / d, 0755));
  static constexpr std::string_view exts[] = {".c", ".h", ".py", ".md", ".json", ".txt"};
  for (int i = 0; files_left > 0; ++i) {
    const fs::path& d = dirs[static_cast<size_t>(i) % dirs.size()];
    EB_TRY(add_file(root / d / fmt::format("f{:05}{}", i, exts[i % 6])));
  }
  return {};
}

}  // namespace

fs::path cache_dir() {
  if (const char* env = std::getenv("EVALBOX_BENCH_CACHE"); env && *env) return env;
  return EVALBOX_BENCH_CACHE_DEFAULT;
}

const workspace_shape* find_shape(std::string_view name) {
  for (const auto* s : {&small_workspace, &medium_workspace, &large_workspace})
    if (s->name == name) return s;
  return nullptr;
}

result<fs::path> ensure_workspace(const workspace_shape& shape) {
  const fs::path dir = cache_dir();
  const fs::path final_dir = dir / std::string(shape.name);
  const fs::path stamp = dir / fmt::format("{}.stamp", shape.name);
  const std::string want =
      fmt::format("{} files={} bytes={}\n", generator_version, shape.files, shape.bytes);
  if (auto have = read_file(stamp); have && *have == want && fs::is_directory(final_dir))
    return final_dir;
  EB_TRY(make_dirs(dir, 0755));
  // The sandbox id must be able to traverse to the workspace (it is an idmapped lower).
  ::chmod(dir.c_str(), 0755);
  const fs::path tmp = dir / fmt::format("{}.tmp-{}", shape.name, ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::remove_all(final_dir, ec);
  fs::remove(stamp, ec);
  fmt::print(stderr, "generating the {} workspace ({} files, {} MiB) in {}\n", shape.name,
             shape.files, shape.bytes >> 20, final_dir.string());
  EB_TRY(generate(shape, tmp));
  fs::rename(tmp, final_dir, ec);
  if (ec) return sys_error(ec.value(), "rename({})", tmp.string());
  ::sync();
  EB_TRY(write_file(stamp, want));
  return final_dir;
}

}  // namespace evalbox::bench
