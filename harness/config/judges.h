// The judges of a suite against the judge checks of its fixtures: every check names a judge
// the suite defines, and every HTTP judge's key variable is set on the host. Checked when a
// suite loads (so `evalbox validate` and `evalbox run` report it, FILE:LINE:COL) and by
// `evalbox fixture test` for the fixtures it is given.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "harness/config/spec.h"

namespace evalbox::harness {
inline namespace config {

// Looks a variable up on the host (std::getenv by default; tests pass their own).
using env_lookup = std::function<const char*(const char*)>;

// Every problem, at the check's `judge:` (an unknown judge) or at the judge (a key variable
// that is unset or empty). A fixture with judge checks and no judges at all is one problem per
// check, saying to give the suite's `judges:`. The key's value is never part of a message.
std::vector<config_error> check_judges(const std::map<std::string, judge_spec>& judges,
                                       std::span<const fixture_spec> fixtures,
                                       const env_lookup& getenv = {});

// True when some check of `f` is a judge check.
bool has_judge_checks(const fixture_spec& f);

}  // namespace config
}  // namespace evalbox::harness
