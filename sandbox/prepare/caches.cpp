// The cache store (caches.h): filled caches under the key of what filled them, each stored by
// one rename, held shared by the suites that mount it, removed only when nobody holds it.
#include "sandbox/prepare/caches.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>

#include <fmt/format.h>
#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/prepare/stores.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox {
inline namespace prepare {

namespace fs = std::filesystem;

namespace {

status check_key(std::string_view key) {
  if (!valid_cache_key(key))
    return make_error(error_kind::invalid_argument,
                      "cache key '{}' is not 64 lowercase hex characters: give a key as `evalbox "
                      "cache ls` prints it",
                      key);
  return {};
}

// Regular files' bytes and entries below `tree`, never following a link.
void count_tree(const fs::path& tree, uint64_t& bytes, uint64_t& files) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(tree, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    ++files;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      bytes += static_cast<uint64_t>(st.st_size);
  }
}

result<stored_cache> read_entry(const fs::path& dir, std::string_view key) {
  const std::string text = EB_TRY(read_file(dir / "cache.json", 1 << 20));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("schema", "") != "evalbox.cache.v1" ||
      j.value("key", "") != key)
    return make_error(error_kind::invalid_argument, "{}: not an evalbox.cache.v1 record of {}",
                      (dir / "cache.json").string(), key);
  stored_cache c;
  c.key = std::string(key);
  c.tree = dir / "tree";
  c.digest = j.value("digest", "");
  c.bytes = j.value("bytes", uint64_t{0});
  c.files = j.value("files", uint64_t{0});
  c.created = j.value("created", int64_t{0});
  c.meta.name = j.value("name", "");
  c.meta.target = j.value("target", "");
  c.meta.origin = j.value("origin", "");
  c.meta.warm_ms = j.value("warm_ms", uint64_t{0});
  return c;
}

// The pid in a leftover's name (".tmp-<key16>-<pid>-<n>"), or 0.
pid_t leftover_pid(std::string_view name) {
  const size_t first = name.find('-', 1);
  if (first == std::string_view::npos) return 0;
  const size_t second = name.find('-', first + 1);
  const size_t third = second == std::string_view::npos ? second : name.find('-', second + 1);
  if (third == std::string_view::npos) return 0;
  pid_t pid = 0;
  const auto text = name.substr(second + 1, third - second - 1);
  if (std::from_chars(text.data(), text.data() + text.size(), pid).ec != std::errc{}) return 0;
  return pid;
}

}  // namespace

json to_json(const stored_cache& c) {
  return {{"schema", "evalbox.cache.v1"},
          {"key", c.key},
          {"name", c.meta.name},
          {"target", c.meta.target},
          {"origin", c.meta.origin},
          {"digest", c.digest},
          {"bytes", c.bytes},
          {"files", c.files},
          {"created", c.created},
          {"warm_ms", c.meta.warm_ms}};
}

std::vector<stored_cache> caches_named(const std::vector<stored_cache>& all,
                                       std::string_view query) {
  std::vector<stored_cache> out;
  const bool hex = query.size() >= 6 && query.size() <= 64 &&
                   query.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  for (const auto& c : all)
    if ((hex && c.key.starts_with(query)) || c.meta.name == query) out.push_back(c);
  return out;
}

result<fs::path> make_store_temporary(const fs::path& state_root, const fs::path& store,
                                      std::string_view key, std::string_view kind) {
  static std::atomic<unsigned> temporaries{0};
  EB_TRY(make_dirs(state_root, 0700));
  EB_TRY(make_dirs(store, 0700));
  const fs::path tmp =
      store / fmt::format(".{}-{}-{}-{}", kind, key.substr(0, 16), ::getpid(), temporaries++);
  if (::mkdir(tmp.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", tmp.string());
  return tmp;
}

bool valid_cache_key(std::string_view key) noexcept {
  return key.size() == 64 && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

result<std::optional<stored_cache>> find_cache(const fs::path& state_root, std::string_view key) {
  EB_TRY(check_key(key));
  const fs::path dir = cache_store_dir(state_root) / std::string(key);
  std::error_code ec;
  if (!fs::is_directory(dir / "tree", ec)) return std::optional<stored_cache>{};
  return std::optional<stored_cache>{EB_TRY(read_entry(dir, key))};
}

result<std::vector<stored_cache>> list_caches(const fs::path& state_root) {
  std::vector<stored_cache> out;
  const fs::path store = cache_store_dir(state_root);
  std::error_code ec;
  if (!fs::is_directory(store, ec)) return out;
  for (const auto& e : fs::directory_iterator(store, ec)) {
    const std::string name = e.path().filename().string();
    if (!valid_cache_key(name)) continue;
    if (auto c = read_entry(e.path(), name)) out.push_back(std::move(*c));
  }
  if (ec) return sys_error(ec.value(), "list {}", store.string());
  std::sort(out.begin(), out.end(), [](const stored_cache& a, const stored_cache& b) {
    return std::tie(a.created, a.key) < std::tie(b.created, b.key);
  });
  return out;
}

result<stored_cache> store_cache(const fs::path& state_root, std::string_view key,
                                 const fs::path& filled, const cache_meta& meta, bool replace) {
  EB_TRY(check_key(key));
  const fs::path store = cache_store_dir(state_root);
  const fs::path final_dir = store / std::string(key);
  if (auto existing = EB_TRY(find_cache(state_root, key))) {
    if (!replace) return std::move(*existing);
    EB_TRY(remove_cache(state_root, key));
  }
  const fs::path tmp = EB_TRY(make_store_temporary(state_root, store, key, "tmp"));
  auto fail = [&](error e) -> std::unexpected<error> {
    (void)remove_tree(tmp);
    return std::unexpected(std::move(e));
  };
  const fs::path tree = tmp / "tree";
  if (::mkdir(tree.c_str(), 0755) != 0) return fail(sys_error(errno, "mkdir").error());
  if (auto s = copy_out(filled, tree); !s)
    return fail(std::move(s).error().with_context("store the cache"));
  stored_cache c;
  c.key = std::string(key);
  c.tree = final_dir / "tree";
  c.meta = meta;
  c.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  auto digest = tree_digest(tree);
  if (!digest) return fail(std::move(digest).error().with_context("digest the cache"));
  c.digest = *digest;
  count_tree(tree, c.bytes, c.files);
  if (auto s = write_file(tmp / "cache.json", to_json(c).dump(2) + "\n", 0644); !s)
    return fail(std::move(s).error());
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) {  // stored meanwhile by another: as good
      (void)remove_tree(tmp);
      auto theirs = EB_TRY(find_cache(state_root, key));
      if (theirs) return std::move(*theirs);
    }
    return fail(sys_error(errno, "rename {} to {}", tmp.string(), final_dir.string()).error());
  }
  return c;
}

status remove_cache(const fs::path& state_root, std::string_view key) {
  EB_TRY(check_key(key));
  const fs::path store = cache_store_dir(state_root);
  const fs::path dir = store / std::string(key);
  unique_fd fd(::open((dir / "tree").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return make_error(error_kind::not_found, "no cache {} is stored", key);
    return sys_error(errno, "open {}", (dir / "tree").string());
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return make_error(error_kind::busy,
                        "cache {} is in use by a running suite: remove it once that suite ends",
                        key);
    return sys_error(errno, "lock {}", (dir / "tree").string());
  }
  // Renamed over an empty temporary of its own: a crash mid-removal leaves a .rm-* name.
  const fs::path gone = EB_TRY(make_store_temporary(state_root, store, key, "rm"));
  if (::rename(dir.c_str(), gone.c_str()) != 0)
    return sys_error(errno, "rename {} to {}", dir.string(), gone.string());
  fd.reset();
  return remove_tree(gone);
}

result<bool> cache_in_use(const fs::path& state_root, std::string_view key) {
  EB_TRY(check_key(key));
  const fs::path tree = cache_store_dir(state_root) / std::string(key) / "tree";
  unique_fd fd(::open(tree.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return false;
    return sys_error(errno, "open {}", tree.string());
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return false;  // released as fd closes
  if (errno == EWOULDBLOCK) return true;
  return sys_error(errno, "lock {}", tree.string());
}

result<unique_fd> hold_cache(const fs::path& state_root, std::string_view key) {
  EB_TRY(check_key(key));
  const fs::path tree = cache_store_dir(state_root) / std::string(key) / "tree";
  unique_fd fd(::open(tree.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", tree.string());
  if (::flock(fd.get(), LOCK_SH) != 0) return sys_error(errno, "lock {}", tree.string());
  return fd;
}

result<unique_fd> lock_cache_warm(const fs::path& state_root, std::string_view key) {
  EB_TRY(check_key(key));
  const fs::path store = cache_store_dir(state_root);
  EB_TRY(make_dirs(state_root, 0700));
  EB_TRY(make_dirs(store, 0700));
  const fs::path path = store / fmt::format(".warm-{}.lock", key);
  unique_fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sys_error(errno, "open {}", path.string());
  while (::flock(fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) return sys_error(errno, "lock {}", path.string());
  return fd;
}

result<int> collect_store_leftovers(const fs::path& state_root) {
  int removed = 0;
  for (const fs::path& store : {cache_store_dir(state_root), bundle_store_dir(state_root)}) {
    std::error_code ec;
    if (!fs::is_directory(store, ec)) continue;
    for (const auto& e : fs::directory_iterator(store, ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with(".tmp-") || name.starts_with(".rm-")) {
        const pid_t pid = leftover_pid(name);
        if (pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;  // still at work
        EB_TRY(remove_tree(e.path()));
        ++removed;
      } else if (name.starts_with(".warm-") && name.ends_with(".lock")) {
        unique_fd fd(::open(e.path().c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
        if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // being warmed
        if (::unlink(e.path().c_str()) == 0) ++removed;
      }
    }
    if (ec) return sys_error(ec.value(), "list {}", store.string());
  }
  return removed;
}

}  // namespace prepare
}  // namespace evalbox::sandbox
