// YAML text -> fixture_spec / suite_spec. The only place evalbox reads YAML (yaml-cpp stays in
// the .cpp files). Parsing is strict: unknown keys, wrong types, missing fields and bad values
// are each a config_error at FILE:LINE:COL with a hint, and every problem is collected.
// Directory-level work (workspace/, digests, loading a suite's fixtures) is harness/fixture's.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/config/spec.h"

namespace evalbox::harness {
inline namespace config {

// fixture.yaml's text without the keys that grade a run (checks, threshold), emitted again:
// what a fixture's task digest counts of it. Text that is no YAML mapping is returned as it is.
std::string fixture_task_text(std::string_view text);

// Parses the text of a fixture.yaml. `display` names the file in messages. Touches no file;
// the returned spec has no dir, digest or has_* flags. Problems are appended to `errors`; the
// spec is meaningful only when none were added.
fixture_spec parse_fixture_yaml(std::string_view text, std::string_view display,
                                std::vector<config_error>& errors);

// Parses the text of a suite file. Paths (home_files, credentials, results) resolve against
// `base_dir` (the suite file's directory) and home_files sources must exist. The `fixtures:`
// entries are kept as written (fixture_entries): harness/fixture resolves them to directories
// and loads them (load.h). A candidate's `adapter:` must be one of `adapters` — the names the
// composition root registered; this layer knows none itself.
suite_spec parse_suite_yaml(std::string_view text, std::string_view display,
                            const std::filesystem::path& base_dir,
                            std::span<const std::string> adapters,
                            std::vector<config_error>& errors);

// The schema named by a YAML document's top-level `schema:` key, or "" when there is none or
// the text is not YAML (used by `evalbox validate` to tell fixtures from suites).
std::string peek_schema(std::string_view text);

}  // namespace config
}  // namespace evalbox::harness
