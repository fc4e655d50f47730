// record.h: how a run ended, read from its record whatever shape the record has.
#include "harness/results/record.h"

#include <gtest/gtest.h>

#include "base/json.h"

namespace evalbox::harness {
namespace {

json record(std::string_view verdict, std::string_view exec_status = "ok",
            std::string_view grading_status = "ok") {
  return json{{"schema", "evalbox.run.v1"},
              {"run_id", "r1"},
              {"fixture", {{"id", "off-by-one"}}},
              {"candidate", {{"id", "oracle"}}},
              {"trial", 2},
              {"verdict", verdict},
              {"execution", {{"status", exec_status}}},
              {"grading",
               {{"status", grading_status},
                {"checks",
                 {{{"id", "tests"}, {"passed", true}, {"detail", "ok"}},
                  {{"id", "lint"}, {"passed", false}, {"detail", "line 3\nline 4"}}}}}}};
}

TEST(RecordedRun, ReadsWhoWhichTrialAndEachCheck) {
  auto r = read_recorded_run(record("failed"));
  EXPECT_EQ(r.run_id, "r1");
  EXPECT_EQ(r.fixture_id, "off-by-one");
  EXPECT_EQ(r.candidate_id, "oracle");
  EXPECT_EQ(r.trial, 2);
  ASSERT_EQ(r.checks.size(), 2u);
  EXPECT_EQ(r.checks[0].id, "tests");
  EXPECT_TRUE(r.checks[0].passed);
  EXPECT_FALSE(r.checks[1].passed);
  EXPECT_EQ(r.checks[1].detail, "line 3\nline 4");
}

TEST(RecordedRun, AnExecutionErrorOutranksTheGradingAndTheVerdict) {
  auto j = record("not_assessed", "error", "error");
  j["execution"]["error"] = "setup failed";
  j["grading"]["error"] = "grader crashed";
  auto r = read_recorded_run(j);
  EXPECT_EQ(r.ending, run_ending::execution_error);
  EXPECT_EQ(r.error, "setup failed");
  EXPECT_FALSE(r.assessed());
}

TEST(RecordedRun, AGradingErrorIsNotATaskFailure) {
  auto j = record("not_assessed", "ok", "error");
  j["grading"]["error"] = "grader crashed";
  auto r = read_recorded_run(j);
  EXPECT_EQ(r.ending, run_ending::grader_error);
  EXPECT_EQ(r.error, "grader crashed");
  EXPECT_FALSE(r.assessed());
}

TEST(RecordedRun, OnlyAPassedVerdictPasses) {
  EXPECT_EQ(read_recorded_run(record("passed")).ending, run_ending::passed);
  EXPECT_EQ(read_recorded_run(record("failed")).ending, run_ending::task_failed);
  EXPECT_TRUE(read_recorded_run(record("failed")).assessed());
  EXPECT_EQ(read_recorded_run(record("PASSED")).ending, run_ending::task_failed);
  auto j = record("passed");
  j.erase("verdict");
  EXPECT_EQ(read_recorded_run(j).ending, run_ending::task_failed) << "no verdict is no pass";
}

// Records come from disk: any shape reads as absent fields, never as an exception or a pass.
TEST(RecordedRun, AHostileRecordReadsAsAbsentFields) {
  for (const char* text :
       {R"(null)", R"([1,2])", R"("passed")", R"({"verdict": true})",
        R"({"verdict": "passed", "execution": "error"})", R"({"fixture": 5, "trial": 1e300})",
        R"({"trial": -1e300, "grading": {"checks": [1, null, {"id": 7, "passed": "yes"}]}})"}) {
    const json j = json::parse(text);
    recorded_run r;
    ASSERT_NO_THROW(r = read_recorded_run(j)) << text;
    EXPECT_EQ(r.trial, 0) << text;
    for (const auto& c : r.checks) EXPECT_FALSE(c.passed) << text;
  }
  EXPECT_EQ(read_recorded_run(json::parse(R"({"verdict": "passed", "execution": "error"})")).ending,
            run_ending::passed)
      << "an execution that is not an object says nothing of an error";
  EXPECT_EQ(
      read_recorded_run(json::parse(R"({"grading": {"checks": [1, {"id": 7}]}})")).checks.size(),
      2u);
}

TEST(EndingTally, TheWorstEndingWins) {
  ending_tally t;
  EXPECT_EQ(t.worst(), run_ending::passed) << "no runs: nothing failed";
  t.add(run_ending::passed);
  EXPECT_EQ(t.worst(), run_ending::passed);
  t.add(run_ending::task_failed);
  EXPECT_EQ(t.worst(), run_ending::task_failed);
  t.add(run_ending::grader_error);
  EXPECT_EQ(t.worst(), run_ending::grader_error);
  t.add(run_ending::execution_error);
  t.add(run_ending::passed);
  EXPECT_EQ(t.worst(), run_ending::execution_error);
}

}  // namespace
}  // namespace evalbox::harness
