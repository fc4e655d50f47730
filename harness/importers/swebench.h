// `evalbox import swebench`: SWE-bench-style instances (a JSONL file, one instance per line, or
// a JSON array) -> one fixture directory per instance and a suite over them
// (docs/swebench.md). Each fixture's workspace is the instance's repository at base_commit
// (`workspace: {git, commit}`), or with official images the image's /testbed; its prompt the
// problem statement, its check a `tests:` check that applies test_patch, runs the repository's
// test command and grades FAIL_TO_PASS / PASS_TO_PASS with the repository's log parser (SWE-bench's
// specs: swebench_specs.h), and its oracle the gold patch. Nothing is fetched here: `evalbox
// validate` and `evalbox run` fetch the repositories and images.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "harness/config/spec.h"

namespace evalbox::harness {
inline namespace importers {

struct swebench_import_options {
  std::filesystem::path input;  // the instances file
  std::filesystem::path out;    // the suite's directory (created)
  // Where `repo` ("owner/name") is fetched from: a directory of local clones or mirrors
  // (DIR/owner/name, DIR/owner__name or DIR/name, each with or without .git), else the URL
  // template with {repo}, {owner} and {name} replaced.
  std::optional<std::filesystem::path> repos_dir;
  std::string repo_url = "https://github.com/{repo}.git";
  // Image name (an instance's `image` / `image_name`) or instance_id -> evalbox image reference
  // (oci:DIR, docker-archive:FILE, ...), from --images MAP; paths relative to `images_base`.
  std::map<std::string, std::string> images;
  std::filesystem::path images_base;
  // --images official: each instance runs in the image SWE-bench publishes for it
  // (swebench_official_image with `images_prefix`), its workspace the image's /testbed, where
  // the repository is at base_commit; the check runs grader/eval.sh, written as upstream's eval
  // script (the test files reset, the test patch, the tests in the conda env `testbed`).
  bool official_images = false;
  std::string images_prefix = "docker://swebench/";
  // The test command for instances without eval_script; {test_files} becomes the test files
  // test_patch touches (swebench_test_directives: data files left out; shell-quoted where
  // needed), {test_directives} what upstream passes its command (for Django the test modules,
  // "a.b", else the same files). Empty: the repository's command from SWE-bench's specs
  // (swebench_specs.h) followed by the test directives, else `default_swebench_test_command`.
  std::string test_command;
  std::string suite_name;  // default: the out directory's name
  // Called after each instance (done so far, total, its id).
  std::function<void(size_t, size_t, const std::string&)> progress;
  const std::atomic<bool>* cancel = nullptr;  // set: stop after the current instance
};

// The test command of an instance of a repository SWE-bench's specs lack, without --test-cmd.
inline constexpr std::string_view default_swebench_test_command =
    "python3 -m pytest -rA -p no:cacheprovider {test_files}";

struct swebench_import_result {
  std::vector<std::string> imported;  // fixture ids, in file order
  std::vector<config_error> errors;   // one per bad instance, at its line
  std::filesystem::path suite;        // the suite file written
  bool cancelled = false;
};

// Imports every valid instance (each fixture written to a temporary directory and renamed into
// place: an interrupted import leaves whole fixtures only), then writes the suite. A bad
// instance is reported at FILE:LINE and skipped; an unreadable input or output is an error.
result<swebench_import_result> import_swebench(const swebench_import_options& options);

// Text as a YAML scalar that reads back exactly: a literal block for printable multi-line text,
// a JSON-style double-quoted string otherwise. `indent` is the indentation of the key.
std::string yaml_scalar(std::string_view text, int indent);

}  // namespace importers
}  // namespace evalbox::harness
