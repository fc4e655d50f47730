// One session: its incarnations, snapshots, resets and fork points (session.h).
#include "harness/session/session.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <ctime>
#include <random>

#include "base/fs.h"
#include "base/log.h"
#include "base/units.h"
#include "sandbox/live/layers.h"

namespace evalbox::harness {
inline namespace sessions {
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const time_t secs = std::chrono::system_clock::to_time_t(t);
  tm parts{};
  ::gmtime_r(&secs, &parts);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return buf;
}

}  // namespace

std::string new_session_id() {
  std::random_device rd;  // the kernel's random source
  std::uniform_int_distribution<uint64_t> d(0, (1ull << 48) - 1);
  return fmt::format("ses-{:012x}", d(rd));
}

// ---- family ----

family::~family() {
  if (auto r = remove_tree(dir_); !r)
    log::warn("remove session layers {}: {}", dir_.string(), r.error().message);
}

fs::path family::next_layer(std::string_view tree) {
  std::lock_guard lock(m_);
  return dir_ / fmt::format("{}-{}", ++next_, tree);
}

std::optional<layer_stack> family::find(const std::string& name) const {
  std::lock_guard lock(m_);
  auto it = snapshots_.find(name);
  if (it == snapshots_.end()) return std::nullopt;
  return it->second;
}

bool family::add(const std::string& name, layer_stack stack, fs::path commands) {
  std::lock_guard lock(m_);
  if (!snapshots_.emplace(name, std::move(stack)).second) return false;
  if (!commands.empty()) commands_[name] = std::move(commands);
  return true;
}

fs::path family::commands_of(const std::string& name) const {
  std::lock_guard lock(m_);
  auto it = commands_.find(name);
  return it == commands_.end() ? fs::path() : it->second;
}

std::vector<std::string> family::names() const {
  std::lock_guard lock(m_);
  std::vector<std::string> out;
  for (const auto& [name, stack] : snapshots_) out.push_back(name);
  return out;
}

// ---- session ----

session::session(session_setup setup, sandbox::prepared_session& prepared,
                 std::unique_ptr<sandbox::prepared_session> owned)
    : setup_(std::move(setup)), owned_(std::move(owned)), prepared_(&prepared) {}

session::~session() {
  auto r = stop();
  // A session whose start failed has no record: its error was said where it failed.
  if (!r && record_) log::warn("session {}: {}", setup_.id, r.error().message);
}

result<std::shared_ptr<session>> session::start(session_setup setup,
                                                sandbox::prepared_session& prepared,
                                                std::unique_ptr<sandbox::prepared_session> owned,
                                                std::optional<layer_stack> start) {
  std::shared_ptr<session> s(new session(std::move(setup), prepared, std::move(owned)));
  if (start) {
    s->start_ = std::move(*start);
  } else {
    s->start_.workspace = {prepared.workspace_dir()};
    s->start_.home = {prepared.home_dir()};
  }
  {
    std::lock_guard base(s->setup_.fam->base_m);
    if (s->setup_.fam->base_of_workspace.empty() && !start) {
      s->setup_.fam->base_of_workspace = prepared.workspace_dir();
      s->setup_.fam->base_of_home = prepared.home_dir();
    }
  }
  std::unique_lock lock(s->m_);
  EB_TRY(s->launch(s->start_));
  return s;
}

status session::launch(const layer_stack& stack) {
  sandbox::launch_options o = setup_.options;
  const fs::path dir =
      EB_TRY(sandbox::stack_layers(*prepared_, stack, fmt::format("live-{}", ++incarnation_), o));
  auto live = sandbox::live_sandbox::start(*prepared_, std::move(o));
  if (!live) {
    (void)remove_tree(dir);
    return std::unexpected(std::move(live.error()));
  }
  live_ = std::move(*live);
  current_ = stack;
  uppers_ = dir;
  return {};
}

result<std::shared_ptr<sandbox::live_sandbox>> session::acquire() {
  std::shared_lock lock(m_);
  if (stopped_ || !live_) return make_error(error_kind::cancelled, "the session has ended");
  if (live_->ended())
    return make_error(error_kind::cancelled,
                      "the session's sandbox has ended (a limit, or its pid 1 was killed)");
  return live_;
}

bool session::ended() const {
  std::shared_lock lock(m_);
  return stopped_ || !live_ || live_->ended();
}

result<layer_stack> session::self_contained(const layer_stack& stack) {
  family& f = *setup_.fam;
  std::lock_guard lock(f.base_m);
  const bool names_own =
      std::find(stack.workspace.begin(), stack.workspace.end(), f.base_of_workspace) !=
          stack.workspace.end() ||
      std::find(stack.home.begin(), stack.home.end(), f.base_of_home) != stack.home.end() ||
      (stack.root.empty() && prepared_->image());
  if (!names_own) return stack;
  if (!f.base) {
    // Once per family: the first session's own trees (its setup's work) into the store.
    layer_stack b;
    const fs::path ws = f.dir() / "base-workspace";
    const fs::path home = f.dir() / "base-home";
    EB_TRY_CTX(sandbox::freeze_layer(f.base_of_workspace, ws), "copy the session's workspace");
    EB_TRY_CTX(sandbox::freeze_layer(f.base_of_home, home), "copy the session's home");
    b.workspace = {ws};
    b.home = {home};
    if (prepared_->image()) {
      const fs::path root = f.dir() / "base-root";
      EB_TRY_CTX(sandbox::freeze_layer(prepared_->image()->upper, root), "copy the session's root");
      b.root = {root};
    }
    f.base = std::move(b);
  }
  layer_stack out = stack;
  auto swap = [](std::vector<fs::path>& v, const fs::path& own, const std::vector<fs::path>& base) {
    auto it = std::find(v.begin(), v.end(), own);
    if (it == v.end()) return;
    it = v.erase(it);
    v.insert(it, base.begin(), base.end());
  };
  swap(out.workspace, f.base_of_workspace, f.base->workspace);
  swap(out.home, f.base_of_home, f.base->home);
  // The first session's root stack is empty (its own upper is below it): the copy of that upper.
  if (out.root.empty() && prepared_->image() && !setup_.parent.size()) out.root = f.base->root;
  return out;
}

result<layer_stack> session::freeze(uint64_t& bytes, uint64_t& entries) {
  layer_stack stack = EB_TRY(self_contained(current_));
  family& f = *setup_.fam;
  auto one = [&](const char* tree, std::vector<fs::path>& v) -> status {
    const fs::path to = f.next_layer(tree);
    auto frozen = EB_TRY_CTX(sandbox::freeze_layer(uppers_ / tree / "upper", to),
                             fmt::format("freeze the session's {}", tree));
    bytes += frozen.bytes;
    entries += frozen.entries;
    v.insert(v.begin(), to);
    return {};
  };
  EB_TRY(one("workspace", stack.workspace));
  EB_TRY(one("home", stack.home));
  if (prepared_->image()) EB_TRY(one("root", stack.root));
  return stack;
}

result<json> session::snapshot(const std::string& name) {
  const auto t0 = clock_type::now();
  std::shared_lock lock(m_);
  if (stopped_ || !live_) return make_error(error_kind::cancelled, "the session has ended");
  if (setup_.fam->find(name))
    return make_error(error_kind::invalid_argument, "a snapshot named '{}' exists already", name);
  uint64_t bytes = 0, entries = 0;
  layer_stack stack = EB_TRY(freeze(bytes, entries));
  const fs::path commands = EB_TRY(keep_commands());
  if (!setup_.fam->add(name, std::move(stack), commands))
    return make_error(error_kind::invalid_argument, "a snapshot named '{}' exists already", name);
  return json{{"name", name}, {"bytes", bytes}, {"files", entries}, {"ms", ms_since(t0)}};
}

result<layer_stack> session::fork_point(const std::optional<std::string>& from,
                                        fs::path* commands) {
  if (from) {
    auto s = setup_.fam->find(*from);
    if (!s) return make_error(error_kind::not_found, "no snapshot named '{}'", *from);
    if (commands) *commands = setup_.fam->commands_of(*from);
    return *s;
  }
  std::shared_lock lock(m_);
  if (stopped_ || !live_) return make_error(error_kind::cancelled, "the session has ended");
  uint64_t bytes = 0, entries = 0;
  auto stack = EB_TRY(freeze(bytes, entries));
  if (commands) *commands = EB_TRY(keep_commands());
  return stack;
}

result<fs::path> session::keep_commands() {
  const fs::path to = setup_.fam->next_layer("commands.jsonl");
  std::lock_guard lock(transcript_m_);
  const fs::path from = setup_.dir / "transcript.jsonl";
  std::error_code ec;
  if (fs::exists(from, ec)) {
    fs::copy_file(from, to, ec);
    if (ec) return make_error(error_kind::io, "copy the session's transcript: {}", ec.message());
  } else {
    EB_TRY(write_file(to, ""));
  }
  return to;
}

result<json> session::grade() {
  if (!setup_.grader)
    return make_error(error_kind::unsupported,
                      "grade: this session has no checks to grade with (start it with --fixture)");
  const auto t0 = clock_type::now();
  layer_stack stack;
  {
    std::shared_lock lock(m_);
    if (stopped_ || !live_) return make_error(error_kind::cancelled, "the session has ended");
    uint64_t bytes = 0, entries = 0;
    stack = EB_TRY(freeze(bytes, entries));
  }
  json out = EB_TRY(setup_.grader(stack, setup_.dir / "transcript.jsonl"));
  out["ms"] = ms_since(t0);
  return out;
}

result<json> session::reset(const std::optional<std::string>& to) {
  const auto t0 = clock_type::now();
  layer_stack target = start_;
  if (to) {
    auto s = setup_.fam->find(*to);
    if (!s) return make_error(error_kind::not_found, "no snapshot named '{}'", *to);
    target = std::move(*s);
  }
  std::unique_lock lock(m_);
  if (stopped_ || !live_) return make_error(error_kind::cancelled, "the session has ended");
  // Every process of the sandbox goes with pid 1; then its uppers.
  auto rec = live_->stop();
  live_.reset();
  (void)remove_tree(uppers_);
  if (!rec) log::warn("session {}: reset: {}", setup_.id, rec.error().message);
  EB_TRY_CTX(launch(target), "restart the session's sandbox");
  return json{{"ms", ms_since(t0)}, {"to", to ? json(*to) : json(nullptr)}};
}

void session::record(const exec_event& e) {
  json j{{"schema", "evalbox.session-event.v1"},
         {"time", rfc3339(std::chrono::system_clock::now())},
         {"op", "exec"},
         {"argv", e.argv},
         {"cwd", e.cwd},
         {"exit_code", e.exit_code ? json(*e.exit_code) : json(nullptr)},
         {"signal", e.signal ? json(*e.signal) : json(nullptr)},
         {"timed_out", e.timed_out},
         {"cancelled", e.cancelled},
         {"truncated", e.truncated},
         {"stdout_bytes", e.stdout_bytes},
         {"stderr_bytes", e.stderr_bytes},
         {"duration_ms", e.duration_ms}};
  if (!e.error.empty()) j["error"] = e.error;
  std::lock_guard lock(transcript_m_);
  if (auto a = append_durable(setup_.dir / "transcript.jsonl",
                              j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
      !a)
    log::warn("session {}: transcript: {}", setup_.id, a.error().message);
}

json session::info() const {
  json j{
      {"schema", "evalbox.session.v1"},
      {"id", setup_.id},
      {"socket", (setup_.dir / "socket").string()},
      {"dir", setup_.dir.string()},
      {"created", rfc3339(created_)},
      {"expires", rfc3339(setup_.expires)},
      {"expires_unix",
       std::chrono::duration_cast<std::chrono::seconds>(setup_.expires.time_since_epoch()).count()},
      {"owner", setup_.owner ? json(*setup_.owner) : json(nullptr)},
      {"server_pid", ::getpid()},
      {"source", setup_.source},
      {"parent", setup_.parent.empty() ? json(nullptr) : json(setup_.parent)},
      {"workspace", prepared_->workspace_target().string()},
      {"snapshots", setup_.fam->names()}};
  if (const auto* img = prepared_->image())
    j["image"] = {{"reference", img->reference}, {"id", img->id}};
  return j;
}

result<sandbox::run_record> session::stop() {
  std::unique_lock lock(m_);
  if (!stopped_) {
    stopped_ = true;
    if (live_) {
      record_ = live_->stop();
      live_.reset();
    }
    if (!uppers_.empty()) (void)remove_tree(uppers_);
    if (owned_) {
      if (auto c = owned_->close(); !c)
        log::warn("session {}: teardown: {}", setup_.id, c.error().message);
    }
  }
  if (!record_) return make_error(error_kind::internal, "the session never started");
  return *record_;
}

}  // namespace sessions
}  // namespace evalbox::harness
