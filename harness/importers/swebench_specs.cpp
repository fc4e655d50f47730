// SWE-bench's per-repository specs and test directives (swebench_specs.h).
#include "harness/importers/swebench_specs.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>

#include "base/fs.h"

namespace evalbox::harness {
inline namespace importers {

namespace {

// Upstream's test commands (TEST_PYTEST is "pytest -rA": its later definition wins).
constexpr std::string_view pytest_cmd = "pytest -rA";
constexpr std::string_view django_cmd =
    "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1";

// One repository: its usual command and parser, and the versions where the command or the
// commands before it differ. The versions are upstream's keys, compared as strings.
struct version_rule {
  std::vector<std::string_view> versions;
  std::string_view test_command;  // "" keeps the repository's
  std::vector<std::string_view> setup;
};

struct repo_row {
  std::string_view repo, test_command, log_format;
  bool django_directives = false;
  std::vector<version_rule> rules = {};
};

// Django 1.7 to 2.2 and 3.0 to 3.2: the eval script sets a UTF-8 locale first (3.x generates it
// then; the older images were built with it).
const std::vector<std::string_view> django_old_locale = {
    "export LANG=en_US.UTF-8", "export LC_ALL=en_US.UTF-8", "export PYTHONIOENCODING=utf8",
    "export LANGUAGE=en_US:en"};
const std::vector<std::string_view> django_3_locale = {
    "sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen", "export LANG=en_US.UTF-8",
    "export LANGUAGE=en_US:en", "export LC_ALL=en_US.UTF-8"};

const std::array<repo_row, 12>& repo_table() {
  static const std::array<repo_row, 12> rows{{
      {"astropy/astropy",
       pytest_cmd,
       "pytest-v2",
       false,
       {{{"0.1", "0.2", "0.3", "0.4", "1.1", "1.2", "1.3"},
         "pytest -rA -vv -o console_output_style=classic --tb=no",
         {}}}},
      {"django/django",
       django_cmd,
       "django",
       true,
       {{{"1.7", "1.8", "1.10", "1.11", "2.0", "2.1", "2.2"}, "", django_old_locale},
        {{"1.9"}, "./tests/runtests.py --verbosity 2", django_old_locale},
        {{"3.0", "3.1", "3.2"}, "", django_3_locale}}},
      {"matplotlib/matplotlib", pytest_cmd, "matplotlib"},
      {"mwaskom/seaborn", "pytest --no-header -rA", "seaborn"},
      {"pallets/flask", pytest_cmd, "pytest"},
      {"psf/requests", pytest_cmd, "pytest-options"},
      {"pydata/xarray", pytest_cmd, "pytest"},
      {"pylint-dev/pylint", pytest_cmd, "pytest-options"},
      {"pytest-dev/pytest", pytest_cmd, "pytest"},
      {"scikit-learn/scikit-learn", pytest_cmd, "pytest-v2"},
      {"sphinx-doc/sphinx", "tox --current-env -epy39 -v --", "pytest-v2"},
      {"sympy/sympy",
       "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose", "sympy"},
  }};
  return rows;
}

// Upstream's NON_TEST_EXTS, compared as suffixes ("csv" without its dot, as upstream has it).
constexpr std::string_view non_test_suffixes[] = {".json", ".png", "csv",  ".txt",  ".md",  ".jpg",
                                                  ".jpeg", ".pkl", ".yml", ".yaml", ".toml"};

}  // namespace

std::optional<swebench_repo_spec> swebench_spec(std::string_view repo, std::string_view version) {
  for (const repo_row& row : repo_table()) {
    if (row.repo != repo) continue;
    swebench_repo_spec spec{
        std::string(row.test_command), {}, std::string(row.log_format), row.django_directives};
    for (const version_rule& rule : row.rules) {
      if (std::find(rule.versions.begin(), rule.versions.end(), version) == rule.versions.end())
        continue;
      if (!rule.test_command.empty()) spec.test_command = rule.test_command;
      spec.setup.assign(rule.setup.begin(), rule.setup.end());
    }
    return spec;
  }
  return std::nullopt;
}

std::vector<std::string> swebench_test_directives(std::string_view test_patch,
                                                  bool django_modules) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < test_patch.size()) {
    size_t end = test_patch.find('\n', start);
    if (end == std::string_view::npos) end = test_patch.size();
    std::string_view line = test_patch.substr(start, end - start);
    start = end + 1;
    // "diff --git a/X b/Y": Y follows the line's last " b/", as upstream's greedy regex reads it.
    if (!line.starts_with("diff --git a/")) continue;
    const size_t b = line.rfind(" b/");
    if (b == std::string_view::npos || b < 13) continue;
    std::string path(line.substr(b + 3));
    while (!path.empty() && (path.back() == '\r' || path.back() == ' ')) path.pop_back();
    if (path.empty() || !is_safe_relative(std::filesystem::path(path))) continue;
    if (std::any_of(std::begin(non_test_suffixes), std::end(non_test_suffixes),
                    [&](std::string_view s) { return path.ends_with(s); }))
      continue;
    if (django_modules) {
      if (path.ends_with(".py")) path.resize(path.size() - 3);
      if (path.starts_with("tests/")) path.erase(0, 6);
      std::replace(path.begin(), path.end(), '/', '.');
    }
    out.push_back(std::move(path));
  }
  return out;
}

std::string swebench_official_image(std::string_view instance_id, std::string_view prefix) {
  std::string key = "sweb.eval.x86_64.";
  for (char c : instance_id) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  key += ":latest";
  for (size_t at = key.find("__"); at != std::string::npos; at = key.find("__", at + 6))
    key.replace(at, 2, "_1776_");
  return std::string(prefix) + key;
}

}  // namespace importers
}  // namespace evalbox::harness
