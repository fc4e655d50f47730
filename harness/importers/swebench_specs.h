// SWE-bench's per-repository evaluation specs, as its harness keeps them for the 12 repositories
// of SWE-bench (MAP_REPO_VERSION_TO_SPECS in swebench/harness/constants/python.py, and
// get_test_directives / make_eval_script_list_py in swebench/harness/test_spec/python.py): the
// test command by repository and version, what the eval script runs before it in the official
// image, which log parser reads the output, and how a test patch becomes the command's
// arguments; and the name of an instance's official image (docs/swebench.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evalbox::harness {
inline namespace importers {

struct swebench_repo_spec {
  std::string test_command;  // upstream's test_cmd, to be followed by the test directives
  // What upstream's eval script runs in the image before the tests (its eval_commands: locale
  // variables for old Django versions). Lines of bash.
  std::vector<std::string> setup;
  std::string log_format;          // a name of test_log_format_names (test_report.h)
  bool django_directives = false;  // the directives are test modules ("a.b"), not files
};

// The spec of `repo` ("owner/name", as instances write it) at `version` (an instance's
// `version`); a version upstream does not list gets the repository's usual command. nullopt for
// a repository that is not one of the 12.
std::optional<swebench_repo_spec> swebench_spec(std::string_view repo, std::string_view version);

// The arguments upstream's get_test_directives makes of a test patch: the new path of each file
// its "diff --git a/X b/Y" lines name, in order, but for files with an extension upstream takes
// for data (NON_TEST_EXTS: .json, .png, csv, .txt, .md, .jpg, .jpeg, .pkl, .yml, .yaml, .toml;
// pytest given one says "found no collectors" and runs nothing); with `django_modules`, each as
// the label Django's runtests.py takes ("tests/a/b.py" -> "a.b"). A path that is absolute or has
// ".." is left out.
std::vector<std::string> swebench_test_directives(std::string_view test_patch, bool django_modules);

// The reference of the image SWE-bench publishes for an instance: `prefix` (docker://swebench/
// for Docker Hub) + "sweb.eval.x86_64.<instance_id>:latest", with the name lowercased and every
// "__" written "_1776_", as upstream names it (swebench/harness/test_spec/test_spec.py; Docker
// Hub refuses "__" in a name).
std::string swebench_official_image(std::string_view instance_id, std::string_view prefix);

}  // namespace importers
}  // namespace evalbox::harness
