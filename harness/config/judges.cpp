// Judge references and key variables (see judges.h).
#include "harness/config/judges.h"

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace evalbox::harness {
inline namespace config {

bool has_judge_checks(const fixture_spec& f) {
  for (const auto& c : f.checks)
    if (c.kind == check_kind::judge) return true;
  return false;
}

std::vector<config_error> check_judges(const std::map<std::string, judge_spec>& judges,
                                       std::span<const fixture_spec> fixtures,
                                       const env_lookup& getenv) {
  std::vector<config_error> errors;
  std::vector<std::string> names;
  for (const auto& [name, j] : judges) names.push_back(name);
  for (const auto& f : fixtures)
    for (const auto& c : f.checks) {
      if (c.kind != check_kind::judge || judges.contains(c.judge.judge)) continue;
      errors.push_back({c.judge.judge_where,
                        fmt::format("check {} uses judge '{}', which the suite does not define",
                                    c.id, c.judge.judge),
                        names.empty()
                            ? std::string("give the suite (or `evalbox fixture test --suite`) a "
                                          "`judges:` entry of that name")
                            : fmt::format("the suite's judges are: {}", fmt::join(names, ", "))});
    }
  for (const auto& [name, j] : judges) {
    if (j.api_key_env.empty()) continue;
    const char* value = getenv ? getenv(j.api_key_env.c_str()) : std::getenv(j.api_key_env.c_str());
    if (!value || !*value)
      errors.push_back({j.where,
                        fmt::format("judge {}: the key variable {} is not set in evalbox's "
                                    "environment",
                                    name, j.api_key_env),
                        fmt::format("export {} before running evalbox (its value is read "
                                    "here and never recorded)",
                                    j.api_key_env)});
  }
  return errors;
}

}  // namespace config
}  // namespace evalbox::harness
