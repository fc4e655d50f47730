// `evalbox cache warm|ls|rm`: the cache store — directories a fixture or suite names under
// `caches:`, filled once by their warm commands and seen by every run as a read-only lower
// under a writable upper of its own (docs/fixture-format.md, "caches").
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/suite_command.h"
#include "harness/runner/caches.h"
#include "sandbox/prepare/caches.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {

namespace {

// The state root: --state-dir, else EVALBOX_STATE_DIR or the standard location.
std::filesystem::path state_root(const std::string& state_dir) {
  return state_dir.empty() ? sandbox::default_preparer_options().state_root
                           : std::filesystem::path(state_dir);
}

int do_ls(const std::string& state_dir, bool as_json) {
  const auto state = state_root(state_dir);
  auto caches = sandbox::list_caches(state);
  if (!caches) {
    fmt::print(stderr, "evalbox cache ls: {}\n", caches.error().message);
    return static_cast<int>(exit_status_of_error(caches.error()));
  }
  if (as_json) {
    json list = json::array();
    for (const auto& c : *caches) {
      json entry = sandbox::to_json(c);
      entry.erase("schema");
      entry["digest"] = "sha256:" + c.digest;
      entry["tree"] = c.tree.string();
      list.push_back(std::move(entry));
    }
    fmt::print("{}\n", json{{"schema", "evalbox.cache-list.v1"},
                            {"state_root", state.string()},
                            {"caches", std::move(list)}}
                           .dump(2));
    return exit_ok;
  }
  if (caches->empty()) {
    fmt::print(stderr, "evalbox: no caches in {} (evalbox cache warm SUITE fills them)\n",
               state.string());
    return exit_ok;
  }
  fmt::print("{:<12}  {:<12}  {:>8}  {:>9}  {:<16}  {}\n", "KEY", "NAME", "FILES", "SIZE", "WARMED",
             "TARGET (ORIGIN)");
  for (const auto& c : *caches)
    fmt::print("{:<12}  {:<12}  {:>8}  {:>9}  {:<16}  {} ({})\n", c.key.substr(0, 12), c.meta.name,
               c.files, format_bytes(c.bytes), format_local_minute(c.created), c.meta.target,
               c.meta.origin);
  return exit_ok;
}

int do_rm(const std::string& state_dir, const std::vector<std::string>& queries, bool all_of_them) {
  const auto state = state_root(state_dir);
  auto caches = sandbox::list_caches(state);
  if (!caches) {
    fmt::print(stderr, "evalbox cache rm: {}\n", caches.error().message);
    return static_cast<int>(exit_status_of_error(caches.error()));
  }
  std::vector<sandbox::stored_cache> chosen;
  if (all_of_them) chosen = *caches;
  for (const auto& q : queries) {
    auto found = sandbox::caches_named(*caches, q);
    if (found.empty()) {
      fmt::print(stderr,
                 "evalbox cache rm: no cache is named or keyed '{}' (evalbox cache ls lists "
                 "them; give a name, a key, or 6+ of its first hex digits)\n",
                 q);
      return exit_usage;
    }
    chosen.insert(chosen.end(), found.begin(), found.end());
  }
  std::set<std::string> done;
  int failed = 0;
  for (const auto& c : chosen) {
    if (!done.insert(c.key).second) continue;
    if (auto s = sandbox::remove_cache(state, c.key); !s) {
      fmt::print(stderr, "evalbox cache rm: {} ({}): {}\n", c.key.substr(0, 12), c.meta.name,
                 s.error().message);
      ++failed;
      continue;
    }
    fmt::print("removed {} ({}, {})\n", c.key.substr(0, 12), c.meta.name, format_bytes(c.bytes));
  }
  return failed ? exit_execution_failed : exit_ok;
}

}  // namespace

void register_cache(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "cache",
      "Caches a fixture or suite names under `caches:` (a pip or npm cache, a model's weights): "
      "filled once by their warm commands in a sandbox, kept in the state directory under the "
      "key of what filled them, and seen by every run at their target as a read-only lower "
      "under a writable upper of its own — a run's writes never reach the cache or another "
      "run. `evalbox run` warms what is missing; these commands do it ahead and manage the "
      "store.\n"
      "\n"
      "  evalbox cache warm suite.yaml              fill every cache the suite's fixtures name\n"
      "  evalbox cache warm suite.yaml --cache pip  only that one (--force: fill it again)\n"
      "  evalbox cache ls                           what is stored, by key\n"
      "  evalbox cache rm pip                       remove by name, key or key prefix");
  cmd->require_subcommand(1);
  auto state = std::make_shared<std::string>();
  cmd->add_option("--state-dir", *state,
                  "state root holding the store (default: EVALBOX_STATE_DIR or the standard "
                  "location)");

  auto* warm = cmd->add_subcommand(
      "warm",
      "Fill the caches of SUITE's fixtures that the store does not hold yet: each cache's warm "
      "commands run in /workspace (its context, the fixture's workspace, or an empty "
      "directory) with the cache empty at its target and the network the cache declares, in "
      "the fixture's environment and limits. A warm command that fails stores nothing and "
      "prints the end of its output. Ctrl-C stops it cleanly.");
  struct warm_args {
    std::string suite;
    std::vector<std::string> caches;
    bool force = false;
    image_args images;
  };
  auto wa = std::make_shared<warm_args>();
  warm->add_option("SUITE", wa->suite, "the suite file")->required();
  warm->add_option("--cache", wa->caches, "only the caches of this name (repeatable)");
  warm->add_flag("--force", wa->force,
                 "fill them again even when stored, replacing what is there (refused while a "
                 "running suite uses it)");
  add_image_options(warm, wa->images);
  warm->fallthrough();  // `evalbox cache warm SUITE --state-dir DIR` works too
  warm->callback([&out, wa, state] {
    out = [wa, state] {
      auto suite = load_runnable_suite(wa->suite);
      if (!suite) return suite.error();
      std::set<std::string> only(wa->caches.begin(), wa->caches.end());
      // Before any image is resolved: a mistyped name costs no pull or build.
      if (auto known = harness::check_cache_names(*suite, only); !known) {
        fmt::print(stderr, "evalbox cache warm: --cache: {}\n", known.error().message);
        return static_cast<int>(exit_usage);
      }
      if (only.empty() && harness::declared_cache_names(*suite).empty()) {
        fmt::print(stderr, "evalbox: {} names no caches: nothing to warm\n", wa->suite);
        return static_cast<int>(exit_ok);
      }
      if (int rc = resolve_suite_images(*suite, wa->images); rc != exit_ok) return rc;
      return warm_suite_caches(*suite, only, wa->force, state_root(*state));
    };
  });

  auto* ls = cmd->add_subcommand(
      "ls", "List stored caches: key, name, files, size, when warmed, target and origin.");
  auto ls_json = std::make_shared<bool>(false);
  ls->add_flag("--json", *ls_json, "print evalbox.cache-list.v1 JSON");
  ls->fallthrough();
  ls->callback(
      [&out, ls_json, state] { out = [ls_json, state] { return do_ls(*state, *ls_json); }; });

  auto* rm = cmd->add_subcommand(
      "rm",
      "Remove stored caches; the next run (or cache warm) fills them again. A cache a running "
      "suite uses is refused (busy) and kept.");
  auto queries = std::make_shared<std::vector<std::string>>();
  auto rm_all = std::make_shared<bool>(false);
  rm->add_option("CACHE", *queries,
                 "a name (every cache of it), a key, or 6+ of its first hex "
                 "digits");
  rm->add_flag("--all", *rm_all, "every stored cache");
  rm->fallthrough();
  rm->callback([&out, queries, rm_all, state] {
    out = [queries, rm_all, state] {
      if (queries->empty() && !*rm_all) {
        fmt::print(stderr, "evalbox cache rm: name a cache (evalbox cache ls), or give --all\n");
        return static_cast<int>(exit_usage);
      }
      return do_rm(*state, *queries, *rm_all);
    };
  });
}

}  // namespace evalbox::harness::cli
