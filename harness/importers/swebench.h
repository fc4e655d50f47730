// `evalbox import swebench`: SWE-bench-style instances (a JSONL file, one instance per line, or
// a JSON array) -> one fixture directory per instance and a suite over them
// (docs/swebench.md). Each fixture's workspace is the instance's repository at base_commit
// (`workspace: {git, commit}`), its prompt the problem statement, its check a `tests:` check
// that applies test_patch and grades FAIL_TO_PASS / PASS_TO_PASS, and its oracle the gold
// patch. Nothing is fetched here: `evalbox validate` and `evalbox run` fetch the repositories.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
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
  // The test command for instances without eval_script; {test_files} becomes the files
  // test_patch touches (shell-quoted).
  std::string test_command = "python3 -m pytest -rA -p no:cacheprovider {test_files}";
  std::string suite_name;  // default: the out directory's name
  // Called after each instance (done so far, total, its id).
  std::function<void(size_t, size_t, const std::string&)> progress;
  const std::atomic<bool>* cancel = nullptr;  // set: stop after the current instance
};

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
