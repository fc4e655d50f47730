// Keeping a run's final workspace (keep_workspace.h).
#include "harness/runner/keep_workspace.h"

#include <fmt/format.h>

#include <system_error>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"
#include "base/units.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness {
inline namespace runner {
namespace fs = std::filesystem;

result<keep_policy> parse_keep_policy(std::string_view text) {
  if (text == "none") return keep_policy::none;
  if (text == "failed") return keep_policy::failed;
  if (text == "all") return keep_policy::all;
  return make_error(error_kind::invalid_argument,
                    "--keep-workspaces {}: expected failed, all or none", text);
}

std::string_view to_string(keep_policy policy) noexcept {
  switch (policy) {
    case keep_policy::none:
      return "none";
    case keep_policy::failed:
      return "failed";
    case keep_policy::all:
      return "all";
  }
  return "none";
}

bool should_keep(keep_policy policy, const attempt_state& st) {
  if (st.cancelled) return false;
  switch (policy) {
    case keep_policy::none:
      return false;
    case keep_policy::all:
      return true;
    case keep_policy::failed:
      return st.failed() || st.verdict != run_verdict::passed;
  }
  return false;
}

namespace {

// Walks `from` without following any symlink: f(entry, relative path, its status).
template <class F>
status walk(const fs::path& from, F&& f) {
  std::error_code ec;
  fs::recursive_directory_iterator it(from, fs::directory_options::none, ec), end;
  if (ec) return sys_error(ec.value(), "read {}", from.string());
  for (; it != end; it.increment(ec)) {
    if (ec) return sys_error(ec.value(), "read {}", from.string());
    const fs::file_status s = it->symlink_status(ec);
    if (ec) return sys_error(ec.value(), "stat {}", it->path().string());
    if (!f(*it, it->path().lexically_relative(from), s)) break;
  }
  if (ec) return sys_error(ec.value(), "read {}", from.string());
  return {};
}

}  // namespace

result<kept_tree> keep_tree(const fs::path& from, const fs::path& to, uint64_t max_bytes) {
  kept_tree out;
  // Measured first: above the bound nothing is written.
  bool over = false;
  EB_TRY(walk(from, [&](const fs::directory_entry& e, const fs::path&, fs::file_status s) {
    ++out.entries;
    if (fs::is_regular_file(s)) {
      std::error_code ec;
      const auto size = e.file_size(ec);
      if (!ec) out.bytes += size;
    }
    over = out.bytes > max_bytes;
    return !over;
  }));
  if (over) {
    out.skipped = fmt::format(
        "the workspace holds more than {} of files (the bound of a kept "
        "workspace): nothing was kept",
        format_bytes(max_bytes));
    return out;
  }
  // The sandbox's own tree copy (sandbox::copy_out): a file the agent made setuid must not
  // become one of root's on the host.
  EB_TRY(make_dirs(to, 0755));
  if (auto c = sandbox::copy_out(from, to); !c) {
    (void)remove_tree(to);
    return std::unexpected(std::move(c).error().with_context("keep the workspace"));
  }
  out.kept = true;
  return out;
}

kept_totals count_kept(const fs::path& results_root) {
  kept_totals t;
  std::error_code ec;
  for (fs::directory_iterator it(results_root / "runs", ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path kept = it->path() / kept_workspace_dir;
    if (!fs::is_directory(fs::symlink_status(kept, ec))) continue;
    ++t.runs;
    (void)walk(kept, [&](const fs::directory_entry& e, const fs::path&, fs::file_status s) {
      std::error_code size_ec;
      if (fs::is_regular_file(s)) {
        const auto size = e.file_size(size_ec);
        if (!size_ec) t.bytes += size;
      }
      return true;
    });
  }
  return t;
}

result<kept_run> find_kept_run(const fs::path& results_root, std::string_view run_id) {
  const fs::path run_dir = results_root / "runs" / run_id;
  if (run_id.empty() || run_id.find('/') != std::string_view::npos || run_id == "." ||
      run_id == ".." || !fs::exists(run_dir / "run.json"))
    return make_error(error_kind::invalid_argument, "no run {} in {} (no runs/{}/run.json)", run_id,
                      results_root.string(), run_id);
  auto record = EB_TRY(read_json_file(run_dir / "run.json"));
  const json& kept = json_member(record, "kept_workspace");
  if (!json_find<std::string>(kept, "path")) {
    const auto skipped = json_find<std::string>(kept, "skipped");
    return make_error(error_kind::invalid_argument,
                      "run {} kept no workspace{}; runs keep theirs with `evalbox run "
                      "--keep-workspaces failed` (or all)",
                      run_id, skipped ? fmt::format(" ({})", *skipped) : std::string());
  }
  kept_run out;
  out.workspace = run_dir / kept_workspace_dir;
  if (!fs::is_directory(out.workspace))
    return make_error(error_kind::invalid_argument, "run {}: {} is gone", run_id,
                      out.workspace.string());
  out.fixture_dir = json_find<std::string>(kept, "fixture_dir").value_or("");
  out.fixture_digest =
      json_find<std::string>(json_member(record, "fixture"), "digest").value_or("");
  return out;
}

}  // namespace runner
}  // namespace evalbox::harness
