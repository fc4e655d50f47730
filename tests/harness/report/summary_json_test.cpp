// The contract of summary.json (schema evalbox.summary.v1): a fixed set of outcomes must give
// exactly the golden file. Regenerate deliberately with EVALBOX_UPDATE_GOLDEN=1 and review it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "base/fs.h"
#include "base/json.h"
#include "harness/report/stats.h"
#include "tests/support/golden.h"

namespace evalbox::harness::stats {
namespace {

using verdict = run_outcome::verdict;

const std::filesystem::path golden =
    std::filesystem::path(EVALBOX_SOURCE_DIR) / "tests/harness/report/golden/summary.v1.json";

// Two candidates and an oracle on three fixtures, with an infrastructure error, a flaky
// fixture, partial token and cost reports.
std::vector<run_outcome> example() {
  std::vector<run_outcome> o;
  // One letter per trial: P passed, F failed, E infrastructure error.
  auto add = [&](const std::string& candidate, const std::string& fixture, std::string_view runs) {
    for (size_t t = 0; t < runs.size(); ++t) {
      run_outcome r;
      r.candidate = candidate;
      r.fixture = fixture;
      r.trial = static_cast<int>(t);
      r.outcome = runs[t] == 'P'   ? verdict::passed
                  : runs[t] == 'F' ? verdict::failed
                                   : verdict::error;
      r.wall_ms = 1000.0 + 250.0 * static_cast<double>(o.size());
      if (r.outcome == verdict::error) r.error_message = "workspace: overlay mount failed: EINVAL";
      if (candidate != "oracle") {  // the oracle runs no model: no tokens, no cost
        r.input_tokens = 1000 + 10 * t;
        r.output_tokens = 200 + t;
        if (candidate == "tuned") r.cost_usd = 0.01 * static_cast<double>(t + 1);
      }
      o.push_back(std::move(r));
    }
  };
  add("oracle", "add-flag", "PPP");
  add("oracle", "fix-parser", "PPP");
  add("oracle", "rename-api", "PPP");
  add("baseline", "add-flag", "PFF");
  add("baseline", "fix-parser", "FFF");
  add("baseline", "rename-api", "PPP");
  add("tuned", "add-flag", "PPE");
  add("tuned", "fix-parser", "PFP");
  add("tuned", "rename-api", "PPP");
  return o;
}

// The summary of example() as the golden file has it (500 bootstrap samples).
result<summary> golden_summary() {
  options opts;
  opts.baseline = "baseline";
  opts.bootstrap_samples = 500;
  return summarize(example(), opts);
}

TEST(SummaryJsonContract, MatchesTheGoldenFile) {
  auto s = golden_summary();
  ASSERT_TRUE(s) << s.error().message;
  const json actual = to_json(*s);
  if (evalbox::testing::golden_update_requested()) {
    ASSERT_TRUE(write_file(golden, pretty_json(actual)));
  }
  auto expected = read_json_file(golden);
  ASSERT_TRUE(expected) << expected.error().message;
  EXPECT_EQ(actual, *expected) << "got:\n" << pretty_json(actual);
}

TEST(SummaryJsonContract, UnknownValuesAreNullNotZero) {
  options opts;
  opts.baseline = "baseline";
  auto s = summarize(example(), opts);
  ASSERT_TRUE(s);
  const json j = to_json(*s);
  const json& oracle = j["candidates"][1];
  ASSERT_EQ(oracle["candidate"], "oracle");
  EXPECT_TRUE(oracle["usage"]["cost_usd"]["known_total"].is_null());
  EXPECT_EQ(oracle["usage"]["cost_usd"]["unknown"], 9);
  EXPECT_TRUE(oracle["usage"]["input_tokens"]["p50"].is_null());
  EXPECT_EQ(j["usage"]["cost_usd"]["unknown"], 18);  // oracle + baseline runs
  EXPECT_FALSE(j["usage"]["cost_usd"]["known_total"].is_null());
}

std::string streamed(const summary& s) {
  std::ostringstream out;
  write_json(out, s);
  return std::move(out).str();
}

// summary.json is written as it is built (write_json); it must be the same file, byte for
// byte, as the whole document pretty-printed.
TEST(SummaryJsonContract, WrittenAsItIsBuiltIsTheSameFile) {
  auto s = golden_summary();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(streamed(*s), pretty_json(to_json(*s)));

  // Empty lists, and names that need escaping.
  std::vector<run_outcome> odd = example();
  for (auto& o : odd)
    if (o.candidate == "tuned") o.candidate = "tu\"ned\n<\xff>";
  auto t = summarize(odd, {});
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(t->comparisons.empty());
  EXPECT_EQ(streamed(*t), pretty_json(to_json(*t)));

  EXPECT_EQ(streamed(summary{}), pretty_json(to_json(summary{})));
}

}  // namespace
}  // namespace evalbox::harness::stats
