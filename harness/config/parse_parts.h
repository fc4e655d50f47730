// The parsers parse.cpp's two entry points call, one .cpp file per subject. Private to
// harness/config, like reader.h. Each parser reads one key's value, records every problem
// through the reader and returns (or fills in) only what was valid.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/config/reader.h"
#include "harness/config/spec.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

// parse_environment.cpp: what a run gets around it.
// limits: {wall, cpu, memory, pids, disk, output}; `what` names the key in messages.
limits_spec parse_limits(reader& r, const YAML::Node& n, std::string_view what);
// network: none | {allow: [host:port, ...]}
network_spec parse_network(reader& r, const YAML::Node& n, std::string_view what);
// environment: {image: REF, workdir: /dir}
std::optional<environment_spec> parse_environment(reader& r, const YAML::Node& n);
// workspace: {git: URL-or-PATH, commit: SHA}
std::optional<git_workspace_spec> parse_git_workspace(reader& r, const YAML::Node& n);
// A suite's images: {REF: SOURCE} and harbor: {threshold: X} (Harbor tasks, docs/harbor.md).
void parse_images(reader& r, const YAML::Node& n, const std::filesystem::path& base_dir,
                  suite_spec& spec);
void parse_harbor(reader& r, const YAML::Node& n, suite_spec& spec);

// parse_mounts.cpp: `mounts:`, `bundles:` and `caches:` (fixture or suite), their targets each
// once and none inside another.
void parse_inputs(reader& r, const fields& f, std::vector<mount_spec>& mounts,
                  std::vector<bundle_spec>& bundles, std::vector<cache_spec>& caches);

// parse_checks.cpp: a fixture's checks: [...], each of one kind, ids unique, some weight > 0.
void parse_checks(reader& r, const YAML::Node& list, fixture_spec& spec);

// parse_candidates.cpp: a suite's credentials, candidates and baseline, in that order (each
// refers to the one before).
void parse_credentials(reader& r, const YAML::Node& n, const std::filesystem::path& base_dir,
                       suite_spec& spec);
void parse_candidates(reader& r, const YAML::Node& list, const std::filesystem::path& base_dir,
                      std::span<const std::string> adapters, suite_spec& spec);
// Refuses max_concurrent > 1 on a credential a candidate uses as a login file (candidates are
// parsed first).
void check_shared_credentials(reader& r, const suite_spec& spec);
void parse_baseline(reader& r, const YAML::Node& n, suite_spec& spec);

// parse_judges.cpp: a suite's judges: {NAME: {...}} and prices: {MODEL: {...}}.
void parse_judges(reader& r, const YAML::Node& n, const std::filesystem::path& base_dir,
                  suite_spec& spec);
void parse_prices(reader& r, const YAML::Node& n, suite_spec& spec);
// parse_gateway.cpp: `budget:` (suite, candidate, fixture, suite_budget) and a candidate's
// `gateway:` (its upstream checked, ca_files made absolute against `base_dir`).
budget_spec parse_budget(reader& r, const YAML::Node& n, const std::string& what);
std::optional<gateway_spec> parse_gateway(reader& r, const YAML::Node& n, const std::string& what,
                                          const std::filesystem::path& base_dir);

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
