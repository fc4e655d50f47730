// `evalbox import swebench FILE --out DIR`: SWE-bench-style instances -> fixtures and a suite
// (harness/importers/swebench.h, docs/swebench.md).
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>

#include "base/json.h"
#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/importers/swebench.h"

namespace evalbox::harness::cli {

namespace {

// Ctrl-C stops after the instance being written (each fixture appears whole or not at all).
std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};

extern "C" void on_stop(int sig) {
  stop_requested.store(true);
  stop_signal.store(sig);
}

struct import_args {
  std::string file, out, repos, repo_url = "https://github.com/{repo}.git", images;
  std::string images_prefix;
  std::string test_cmd;
  std::string name;
  bool quiet = false;
};

int import_swebench(const import_args& a) {
  harness::swebench_import_options o;
  o.input = a.file;
  o.out = a.out;
  if (!a.repos.empty()) o.repos_dir = std::filesystem::absolute(a.repos);
  o.repo_url = a.repo_url;
  o.test_command = a.test_cmd;
  o.suite_name = a.name;
  if (!a.images_prefix.empty() && a.images != "official") {
    log::error("--images-prefix names where the official images are: give --images official");
    return exit_usage;
  }
  if (a.images == "official") {
    o.official_images = true;
    if (!a.images_prefix.empty()) o.images_prefix = a.images_prefix;
  } else if (!a.images.empty()) {
    auto map = read_json_file(a.images);
    if (!map || !map->is_object()) {
      log::error("--images {}: {}", a.images,
                 map ? "must be a JSON object {\"IMAGE-NAME or instance_id\": \"oci:DIR\", ...}"
                     : map.error().message);
      return exit_usage;
    }
    for (const auto& [k, v] : map->items()) {
      if (!v.is_string()) {
        log::error("--images {}: the value of \"{}\" must be an image reference (oci:DIR, ...)",
                   a.images, k);
        return exit_usage;
      }
      o.images[k] = v.get<std::string>();
    }
    o.images_base = std::filesystem::absolute(a.images).parent_path();
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  if (!a.quiet)
    o.progress = [tty](size_t done, size_t total, const std::string& id) {
      if (tty)
        fmt::print(stderr, "\r\033[Kimporting {}/{} {}", done, total, id);
      else if (done % 100 == 0 || done == total)
        fmt::print(stderr, "importing {}/{}\n", done, total);
    };
  o.cancel = &stop_requested;
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  auto r = harness::import_swebench(o);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (tty && !a.quiet) fmt::print(stderr, "\n");
  if (!r) {
    log::error("import swebench: {}", r.error().message);
    return r.error().kind == error_kind::invalid_argument || r.error().kind == error_kind::not_found
               ? exit_usage
               : exit_execution_failed;
  }
  for (const auto& e : r->errors) fmt::print(stderr, "{}\n", e.message());
  fmt::print("imported {} instance(s) into {}{}\n", r->imported.size(), a.out,
             r->errors.empty() ? "" : fmt::format("; {} skipped (above)", r->errors.size()));
  if (!r->imported.empty())
    fmt::print(
        "next: evalbox validate {0}\n      evalbox fixture test {1}/<id>\n"
        "      evalbox run {0}\n",
        r->suite.string(), a.out);
  if (r->cancelled) return stop_signal.load() == SIGTERM ? exit_sigterm : exit_sigint;
  return r->errors.empty() && !r->imported.empty() ? exit_ok : exit_usage;
}

}  // namespace

void register_import(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand("import", "Bring a benchmark in another format in as fixtures.");
  cmd->require_subcommand(1);
  auto* sw = cmd->add_subcommand(
      "swebench",
      "Turn SWE-bench-style instances (JSONL, or a JSON array: instance_id, repo, base_commit, "
      "problem_statement, test_patch, FAIL_TO_PASS, PASS_TO_PASS, optional patch, image, "
      "eval_script) into one fixture per instance and a suite over them: the workspace is the "
      "repository at base_commit (with --images official, SWE-bench's image of the instance), "
      "the check applies test_patch, runs the repository's test command and grades "
      "FAIL_TO_PASS / PASS_TO_PASS with its log parser, as SWE-bench's harness does; the gold "
      "patch is the oracle. A bad instance is reported at FILE:LINE and skipped (exit 64). "
      "Nothing is fetched: `evalbox validate` fetches the repositories and images.");
  auto a = std::make_shared<import_args>();
  sw->add_option("file", a->file, "the instances (.jsonl, or .json holding an array)")->required();
  sw->add_option("--out", a->out, "directory to write the suite and its fixtures into")->required();
  sw->add_option("--repos", a->repos,
                 "directory of local clones: repo owner/name is DIR/owner/name, "
                 "DIR/owner__name or DIR/name (with or without .git); overrides --repo-url");
  sw->add_option("--repo-url", a->repo_url,
                 "URL template of the repositories; {repo}, {owner} and {name} are replaced")
      ->capture_default_str();
  sw->add_option(
      "--images", a->images,
      "`official`: each instance runs in SWE-bench's published image "
      "(docker://swebench/sweb.eval.x86_64.<id>:latest, \"__\" as \"_1776_\"), its "
      "workspace the image's /testbed; or a JSON file mapping an instance's image (or "
      "its instance_id) to an evalbox image reference, e.g. "
      "{\"sweb.eval.x86_64.django\": \"oci:images/django\"}; paths relative to the file");
  sw->add_option("--images-prefix", a->images_prefix,
                 "with --images official: what replaces docker://swebench/ in the image names, "
                 "for a mirror (e.g. docker://mirror.local:5000/swebench/)");
  sw->add_option("--test-cmd", a->test_cmd,
                 "test command of instances without eval_script; {test_files} becomes the test "
                 "files test_patch touches (data files left out), {test_directives} what SWE-bench "
                 "passes its command (Django: test modules, a.b). Default: SWE-bench's command "
                 "for the instance's repo and version, else python3 -m pytest -rA -p "
                 "no:cacheprovider {test_files}. Its output is read by the repository's log "
                 "parser (pytest's -rA lines for other repositories)");
  sw->add_option("--name", a->name, "the suite's name (default: the --out directory's name)");
  sw->add_flag("--quiet", a->quiet, "no progress on stderr");
  sw->callback([&out, a] { out = [a] { return import_swebench(*a); }; });
}

}  // namespace evalbox::harness::cli
