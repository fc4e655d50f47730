// A suite's caches warmed where they are not stored, and held for its runs (caches.h).
#include "harness/runner/caches.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/runner/request.h"
#include "harness/runner/sandbox_exec.h"

namespace evalbox::harness {
inline namespace runner {

namespace fs = std::filesystem;

json cache_use::to_json() const {
  return {{"name", name},
          {"target", target},
          {"key", stored.key},
          {"digest", "sha256:" + stored.digest},
          {"bytes", stored.bytes}};
}

std::string cache_key(const cache_spec& cache, const fixture_spec& fixture,
                      const sandbox::image_summary* image, const std::string& workspace_digest) {
  const json identity = {
      {"schema", "evalbox.cache-key.v1"},
      {"target", cache.target},
      {"warm", cache.warm},
      {"network", cache.network.to_json()},
      {"max_bytes", cache.max_bytes},
      {"environment", image ? json(image->id) : json("host")},
      {"workdir", fixture.environment && fixture.environment->workdir
                      ? json(*fixture.environment->workdir)
                      : json(nullptr)},
      {"workspace", workspace_digest.empty() ? json(nullptr) : json(workspace_digest)},
  };
  return sha256_hex(identity.dump());
}

namespace {

// A temporary directory of the caller's, removed with it.
class scratch_dir {
 public:
  static result<scratch_dir> make() {
    std::error_code ec;
    std::string pattern = (fs::temp_directory_path(ec) / "evalbox-cache-XXXXXX").string();
    if (ec) return sys_error(ec.value(), "temporary directory");
    if (!::mkdtemp(pattern.data())) return sys_error(errno, "mkdtemp {}", pattern);
    return scratch_dir(pattern);
  }
  scratch_dir(scratch_dir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  scratch_dir& operator=(scratch_dir&&) = delete;
  ~scratch_dir() {
    if (!path_.empty()) (void)remove_tree(path_);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  explicit scratch_dir(fs::path p) : path_(std::move(p)) {}
  fs::path path_;
};

// The last `bytes` bytes of the file at `path` (all of a shorter one); "" when it cannot be read.
std::string file_tail(const fs::path& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(bytes) ? size - bytes : 0;
  in.seekg(from);
  std::string out(static_cast<size_t>(size - from), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// The last `lines` lines of `text`, indented, for an error.
std::string tail_of(const std::string& text, int lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int n = 0; n < lines && pos != std::string::npos && pos > 0; ++n)
    pos = text.rfind('\n', pos - 1);
  std::string tail = text.substr(pos == std::string::npos ? 0 : pos + (pos > 0 ? 1 : 0));
  std::string out;
  size_t start = 0;
  while (start < tail.size()) {
    size_t end = tail.find('\n', start);
    if (end == std::string::npos) end = tail.size();
    out += "\n  | " + tail.substr(start, end - start);
    start = end + 1;
  }
  return out;
}

// The host directory the warm commands of `cache` see at /workspace: its context, else a
// fixture's own cache sees the fixture's workspace; empty for the rest, which see the image's
// working directory, or an empty directory on the host's root.
fs::path warm_workspace(const cache_spec& cache, const fixture_spec& fixture) {
  if (!cache.context_path.empty()) return cache.context_path;
  if (!cache.from_suite && fixture.has_workspace) return fixture.workspace_dir();
  return {};
}

// "none", "host", or "allow a:443, b:443".
std::string network_text(const network_spec& n) {
  if (n.mode == network_spec::mode_kind::allow)
    return fmt::format("allow {}", fmt::join(n.allow, ", "));
  return n.mode == network_spec::mode_kind::host ? "host" : "none";
}

struct warm_job {
  const cache_spec& cache;
  const fixture_spec& fixture;
  const sandbox::image_summary* image;
  fs::path workspace;  // empty: the image's working directory
  std::string key;
};

// Runs the warm commands in a throwaway sandbox and stores what they left at the target.
result<sandbox::stored_cache> warm_one(const warm_job& job, sandbox::preparer& prep,
                                       const cache_options& o) {
  const cache_spec& c = job.cache;
  const std::string what =
      fmt::format("cache {} of fixture {} ({})", c.name, job.fixture.id, c.where.to_string());
  auto scratch = EB_TRY_CTX(scratch_dir::make(), what);
  const fs::path empty = scratch.path() / "empty";
  const fs::path log_path = scratch.path() / "warm.log";
  EB_TRY(make_dirs(empty, 0755));
  std::string script = "set -e\n";
  for (const auto& cmd : c.warm) script += cmd + "\n";
  exec_request_inputs in{fmt::format("cache-{}-{}", job.key.substr(0, 12), ::getpid()),
                         {"/bin/sh", "-c", script},
                         job.workspace,
                         job.image,
                         {},
                         effective_limits(o.suite_limits, job.fixture),
                         to_policy(c.network),
                         true};
  if (in.workspace.empty() && !in.image) in.workspace = empty;
  auto req = EB_TRY_CTX(make_exec_request(in), what);
  if (in.workspace.empty()) {
    req.workspace.target = workspace_target(job.fixture, job.image);
    req.workspace.image_dir = req.workspace.target;
  }
  req.protected_roots = o.protected_roots;
  req.mounts.push_back(
      {empty, c.target, sandbox::mount_access::ephemeral_write, c.max_bytes, std::string()});
  auto session = EB_TRY_CTX(prep.prepare(req), what + ": prepare");
  sandbox::launch_options lo;
  lo.label = "warm";
  lo.stdout_path = log_path;
  lo.stderr_path = log_path;
  const auto t0 = std::chrono::steady_clock::now();
  auto rec = sandbox::launch_in(session, lo, o.cancel);
  const auto warm_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  auto fail = [&](std::string why) -> std::unexpected<error> {
    const std::string out = file_tail(log_path, 16 << 10);
    (void)session.close();
    // The fixture's doing, like a setup command that fails: exit 64, nothing run.
    return std::unexpected(error{
        error_kind::invalid_argument,
        fmt::format("{}: {}; nothing was stored{}", what, why,
                    out.empty() ? std::string() : "; the end of its output:" + tail_of(out, 15)),
        0});
  };
  if (!rec) return fail(fmt::format("the sandbox failed: {}", rec.error().message));
  if (rec->outcome == sandbox::outcome_kind::cancelled)
    return std::unexpected(error{error_kind::cancelled, what + ": warming cancelled", 0});
  if (!rec->ok()) return fail(fmt::format("the sandbox failed: {}", rec->error));
  if (const int code = exec_exit_status(*rec); code != 0) {
    std::string why = fmt::format("its warm commands exited with status {}", code);
    if (rec->outcome == sandbox::outcome_kind::timed_out)
      why = "its warm commands hit the wall limit";
    if (rec->disk_limit_hit)
      why += fmt::format(" (the cache reached max_bytes {})", format_bytes(c.max_bytes));
    return fail(why);
  }
  const auto& mounts = session.mounts();
  auto it = std::find_if(mounts.begin(), mounts.end(), [&](const sandbox::bind_mount& m) {
    return m.target == fs::path(c.target);
  });
  if (it == mounts.end()) return fail("the prepared session holds no mount at the target");
  const sandbox::cache_meta meta{c.name, c.target, c.where.file, warm_ms};
  auto stored = sandbox::store_cache(prep.options().state_root, job.key, it->source, meta, o.force);
  if (auto closed = session.close(); !closed)
    log::warn("{}: teardown: {}", what, closed.error().message);
  if (!stored) return std::unexpected(std::move(stored).error().with_context(what));
  return stored;
}

}  // namespace

std::set<std::string> declared_cache_names(const suite_spec& suite) {
  std::set<std::string> names;
  for (const auto& f : suite.fixtures)
    for (const auto& c : f.caches) names.insert(c.name);
  return names;
}

status check_cache_names(const suite_spec& suite, const std::set<std::string>& names) {
  const std::set<std::string> declared = declared_cache_names(suite);
  for (const auto& n : names)
    if (!declared.contains(n))
      return make_error(
          error_kind::not_found, "no fixture of suite {} names a cache {}{}", suite.name, n,
          declared.empty() ? std::string(" (it names none)")
                           : fmt::format(" (it names: {})", fmt::join(declared, ", ")));
  return {};
}

result<suite_caches> ensure_caches(const suite_spec& suite,
                                   const std::vector<std::optional<sandbox::image_summary>>& images,
                                   const std::vector<bool>& used, sandbox::preparer& prep,
                                   const cache_options& o) {
  suite_caches out;
  out.per_fixture.resize(suite.fixtures.size());
  const fs::path state_root = prep.options().state_root;
  std::map<std::string, sandbox::stored_cache> done;  // key -> stored (this call)
  std::map<fs::path, std::string> workspace_digests;  // a fixture's workspace -> its digest
  for (size_t i = 0; i < suite.fixtures.size(); ++i) {
    if (i < used.size() && !used[i]) continue;
    const fixture_spec& f = suite.fixtures[i];
    const sandbox::image_summary* image = i < images.size() && images[i] ? &*images[i] : nullptr;
    for (const auto& c : f.caches) {
      if (!o.only.empty() && !o.only.contains(c.name)) continue;  // cache warm --cache OTHER
      const fs::path ws = warm_workspace(c, f);
      std::string ws_digest;
      if (!c.context_digest.empty()) {
        ws_digest = c.context_digest;
      } else if (!ws.empty()) {
        auto found = workspace_digests.find(ws);
        if (found == workspace_digests.end()) {
          auto d = tree_digest(ws);
          if (!d)
            return std::unexpected(std::move(d).error().with_context(
                fmt::format("fixture {}: digest its workspace for cache {}", f.id, c.name)));
          found = workspace_digests.emplace(ws, *d).first;
        }
        ws_digest = found->second;
      }
      const std::string key = cache_key(c, f, image, ws_digest);
      auto it = done.find(key);
      if (it == done.end()) {
        std::optional<sandbox::stored_cache> stored;
        if (!o.force) stored = EB_TRY(sandbox::find_cache(state_root, key));
        if (!stored) {
          // Whoever else warms it first, this one waits for, then finds it stored.
          auto lock = EB_TRY(sandbox::lock_cache_warm(state_root, key));
          if (!o.force) stored = EB_TRY(sandbox::find_cache(state_root, key));
          // Refused before its commands run, not after: the refill could not be stored.
          if (o.force && EB_TRY(sandbox::cache_in_use(state_root, key)))
            return make_error(error_kind::busy,
                              "cache {} of fixture {} (key {}) is in use by a running suite: "
                              "warm it again with --force once that suite ends",
                              c.name, f.id, key.substr(0, 12));
          if (!stored) {
            if (o.say)
              o.say(fmt::format("warming cache {} for fixture {} ({} command{}, network {})",
                                c.name, f.id, c.warm.size(), c.warm.size() == 1 ? "" : "s",
                                network_text(c.network)));
            stored = EB_TRY(warm_one({c, f, image, ws, key}, prep, o));
            ++out.warmed;
            if (o.say)
              o.say(fmt::format("cache {} warmed: {} file{}, {} in {} (key {})", c.name,
                                stored->files, stored->files == 1 ? "" : "s",
                                format_bytes(stored->bytes),
                                format_duration_ms(stored->meta.warm_ms), key.substr(0, 12)));
          }
        }
        out.holds.push_back(EB_TRY(sandbox::hold_cache(state_root, key)));
        it = done.emplace(key, std::move(*stored)).first;
      }
      out.per_fixture[i].push_back({c.name, c.target, c.max_bytes, it->second});
    }
  }
  return out;
}

}  // namespace runner
}  // namespace evalbox::harness
