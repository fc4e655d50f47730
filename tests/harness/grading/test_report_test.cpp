// Test reports: pytest -rA and -v output and JUnit XML as pytest 7 writes them (data/ holds a
// real run of a small test file), hostile reports, and the FAIL_TO_PASS / PASS_TO_PASS grade.
#include "harness/grading/test_report.h"

#include <gtest/gtest.h>

#include "base/json.h"
#include "harness/grading/grading.h"

#include "base/fs.h"

namespace evalbox::harness {
namespace {

std::string data(const std::string& name) {
  return read_file(std::string(EVALBOX_SOURCE_DIR) + "/tests/harness/grading/data/" + name).value();
}

std::string status_of(const test_report& r, const std::string& id) {
  const test_status* s = r.find(id);
  return s ? std::string(to_string(*s)) : "missing";
}

TEST(PytestLog, ReadsEveryStatusOfTheShortSummary) {
  auto r = parse_pytest_log(data("pytest_ra.log"));
  EXPECT_EQ(status_of(r, "test_a.py::test_ok"), "PASSED");
  EXPECT_EQ(status_of(r, "test_a.py::test_bad"), "FAILED");
  EXPECT_EQ(status_of(r, "test_a.py::test_xf"), "XFAIL");
  EXPECT_EQ(status_of(r, "test_a.py::test_xp"), "XPASS");
  EXPECT_EQ(status_of(r, "test_a.py::test_err"), "ERROR");
  EXPECT_EQ(status_of(r, "test_a.py::test_p[c]"), "PASSED");
  // A parametrized id with a space, whole and as SWE-bench's whitespace split cuts it.
  EXPECT_EQ(status_of(r, "test_a.py::test_p[a b]"), "FAILED");
  EXPECT_EQ(status_of(r, "test_a.py::test_p[a"), "FAILED");
  // A skip names a location, not a test: it is no test of the report.
  EXPECT_EQ(status_of(r, "test_a.py::test_skip"), "missing");
  EXPECT_EQ(r.tests.size(), 7u);
}

TEST(PytestLog, ReadsVerboseLinesWithColours) {
  auto r = parse_pytest_log(data("pytest_v_color.log"));
  EXPECT_EQ(status_of(r, "test_a.py::test_ok"), "PASSED");
  EXPECT_EQ(status_of(r, "test_a.py::test_bad"), "FAILED");
  EXPECT_EQ(status_of(r, "test_a.py::test_skip"), "SKIPPED");
  EXPECT_EQ(status_of(r, "test_a.py::test_err"), "ERROR");
  EXPECT_EQ(status_of(r, "test_a.py::test_p[a b]"), "FAILED");
  EXPECT_EQ(status_of(r, "test_a.py::test_p[c]"), "PASSED");
}

TEST(PytestLog, TheLastLineAboutATestWins) {
  auto r = parse_pytest_log("PASSED t.py::x\nnoise\nFAILED t.py::x - assert 0\n");
  EXPECT_EQ(status_of(r, "t.py::x"), "FAILED");
}

TEST(PytestLog, GarbageYieldsNoTests) {
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk += static_cast<char>((i * 7919) % 256);
  auto r = parse_pytest_log(junk + "\nPASSED\nFAILED \n\x1b[\n::\n PASSED");
  EXPECT_TRUE(r.tests.empty());
  EXPECT_TRUE(parse_pytest_log("").tests.empty());
}

TEST(JunitXml, ReadsPytestsReport) {
  auto r = parse_junit_xml(data("pytest_junit.xml"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(status_of(*r, "test_a::test_ok"), "PASSED");
  EXPECT_EQ(status_of(*r, "test_a::test_bad"), "FAILED");
  EXPECT_EQ(status_of(*r, "test_a::test_err"), "ERROR");
  EXPECT_EQ(status_of(*r, "test_a::test_skip"), "SKIPPED");
  EXPECT_EQ(status_of(*r, "test_a::test_p[a b]"), "FAILED");
  // The other spellings of a case's id.
  EXPECT_EQ(status_of(*r, "test_a.test_ok"), "PASSED");
  EXPECT_EQ(status_of(*r, "test_bad"), "FAILED");
}

TEST(JunitXml, NestedSuitesAndCasesWithoutAClass) {
  auto r = parse_junit_xml(
      "<testsuites><testsuite><testsuite><testcase name=\"deep\"/></testsuite></testsuite>"
      "<testsuite><testcase classname=\"pkg.T\" name=\"m\"><failure/></testcase>"
      "<testcase/></testsuite></testsuites>");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(status_of(*r, "deep"), "PASSED");
  EXPECT_EQ(status_of(*r, "pkg.T::m"), "FAILED");
  EXPECT_EQ(status_of(*r, "pkg.T.m"), "FAILED");
  EXPECT_EQ(r->tests.size(), 2u);
}

TEST(JunitXml, NotXmlIsAnError) {
  for (std::string_view bad : {"", "not xml", "<testsuite><testcase name='x'>", "\xff\xfe<a/>"}) {
    auto r = parse_junit_xml(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("not XML"), std::string::npos) << r.error().message;
  }
}

TEST(JunitXml, EntitiesAreNeitherExpandedNorFetched) {
  // An external entity naming a host file: its content must not become a test name.
  auto r = parse_junit_xml(
      "<?xml version=\"1.0\"?><!DOCTYPE t [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
      "<testsuite><testcase name=\"a&x;\"/></testsuite>");
  if (r) {
    for (const auto& [id, s] : r->tests) EXPECT_EQ(id.find("root:"), std::string::npos) << id;
  }
  // Exponential entity expansion ("billion laughs") is refused or left unexpanded, quickly.
  std::string laughs = "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY l0 \"ha\">";
  for (int i = 1; i <= 30; ++i)
    laughs += "<!ENTITY l" + std::to_string(i) + " \"&l" + std::to_string(i - 1) + ";&l" +
              std::to_string(i - 1) + ";\">";
  laughs += "]><testsuite><testcase name=\"&l30;\"/></testsuite>";
  auto l = parse_junit_xml(laughs);
  if (l) {
    for (const auto& [id, s] : l->tests) EXPECT_LT(id.size(), 1u << 20);
  }
}

TEST(JunitXml, DeepNestingDoesNotCrash) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "<a>";
  for (int i = 0; i < 100000; ++i) deep += "</a>";
  auto r = parse_junit_xml(deep);  // nesting costs expat heap, not stack: no crash
  if (r) {
    EXPECT_TRUE(r->tests.empty());
  }
}

TEST(GradeTests, FullWhenEveryListedTestPasses) {
  auto r = parse_pytest_log("PASSED a::f1\nPASSED a::f2\nPASSED a::p1\nXFAIL a::p2\n");
  auto g = grade_tests(r, {"a::f1", "a::f2"}, {"a::p1", "a::p2"});
  EXPECT_EQ(g.resolution, "full");
  EXPECT_DOUBLE_EQ(g.score, 1.0);
  EXPECT_EQ(g.f2p_passed, 2u);
  EXPECT_EQ(g.p2p_passed, 2u);
}

TEST(GradeTests, PartialWhenSomeFailToPassTestsPassAndNothingBroke) {
  auto r = parse_pytest_log("PASSED a::f1\nFAILED a::f2 - x\nPASSED a::p1\n");
  auto g = grade_tests(r, {"a::f1", "a::f2"}, {"a::p1"});
  EXPECT_EQ(g.resolution, "partial");
  EXPECT_DOUBLE_EQ(g.score, 0.5);
  ASSERT_EQ(g.fail_to_pass.size(), 2u);
  EXPECT_EQ(g.fail_to_pass[1].status, "FAILED");
  EXPECT_FALSE(g.fail_to_pass[1].ok);
}

TEST(GradeTests, BreakingAPassingTestIsNoResolution) {
  auto r = parse_pytest_log("PASSED a::f1\nPASSED a::f2\nFAILED a::p1\nPASSED a::p2\n");
  auto g = grade_tests(r, {"a::f1", "a::f2"}, {"a::p1", "a::p2"});
  EXPECT_EQ(g.resolution, "none");
  EXPECT_DOUBLE_EQ(g.score, 0.5);  // all F2P, half of P2P
}

TEST(GradeTests, MissingAndSkippedTestsDoNotPass) {
  auto r = parse_pytest_log("SKIPPED a::f1\n");  // a -v style skip of a named test
  auto g = grade_tests(r, {"a::f1", "a::f2"}, {});
  EXPECT_EQ(g.resolution, "none");
  EXPECT_DOUBLE_EQ(g.score, 0.0);
  EXPECT_EQ(g.fail_to_pass[1].status, "missing");
}

TEST(PatchFiles, ListsEachFileOnceAndNoUnsafePath) {
  const std::string patch =
      "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1 @@\n"
      "diff --git a/tests/new.py b/tests/new.py\nnew file mode 100644\n--- /dev/null\n"
      "+++ b/tests/new.py\t2024-01-01\n"
      "--- a/../escape\n+++ b//etc/passwd\n";
  EXPECT_EQ(patch_files(patch), (std::vector<std::string>{"src/m.py", "tests/new.py"}));
}

// The tests check inside grade(): its score is the share of its weight it earns.
class TestsCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    check_spec tests;
    tests.id = "tests";
    tests.kind = check_kind::tests;
    tests.weight = 3;
    tests.tests.command = "pytest -rA";
    tests.tests.patch = "test.patch";
    tests.tests.fail_to_pass = {"t::f1", "t::f2"};
    tests.tests.pass_to_pass = {"t::p1"};
    check_spec other;
    other.id = "other";
    other.kind = check_kind::shell;
    other.shell = "true";
    fixture_.checks = {tests, other};
  }

  grading_result run(tests_check_outcome out) {
    return grade({fixture_,
                  transcript_,
                  "/nonexistent",
                  "/nonexistent",
                  [](const check_spec&) { return result<shell_check_outcome>(); },
                  {},
                  [out](const check_spec&) { return result<tests_check_outcome>(out); }});
  }

  fixture_spec fixture_;
  transcript transcript_;
};

TEST_F(TestsCheck, FullResolutionPassesTheCheck) {
  tests_check_outcome out;
  out.report = "PASSED t::f1\nPASSED t::f2\nPASSED t::p1\n";
  auto g = run(out);
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_TRUE(g.checks[0].passed);
  EXPECT_DOUBLE_EQ(g.score, 1.0);
  EXPECT_TRUE(g.passed);
  json j = g.to_json(1.0);
  EXPECT_EQ(j["checks"][0]["tests"]["resolution"], "full");
  EXPECT_EQ(j["checks"][0]["patch"], "applied");
  EXPECT_EQ(j["checks"][0]["tests"]["fail_to_pass"][1]["status"], "PASSED");
}

TEST_F(TestsCheck, PartialResolutionEarnsPartOfTheWeight) {
  tests_check_outcome out;
  out.report = "PASSED t::f1\nFAILED t::f2 - no\nPASSED t::p1\n";
  auto g = run(out);
  ASSERT_TRUE(g.ok) << g.error;
  EXPECT_FALSE(g.checks[0].passed);
  ASSERT_TRUE(g.checks[0].score);
  EXPECT_DOUBLE_EQ(*g.checks[0].score, 0.5);
  // (3 x 0.5 + 1) / 4
  EXPECT_DOUBLE_EQ(g.score, 2.5 / 4);
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.checks[0].detail.find("partial: fail_to_pass 1/2 pass"), std::string::npos)
      << g.checks[0].detail;
  EXPECT_NE(g.checks[0].detail.find("t::f2 FAILED"), std::string::npos) << g.checks[0].detail;
  json j = g.to_json(1.0);
  EXPECT_EQ(j["checks"][0]["tests"]["resolution"], "partial");
  EXPECT_DOUBLE_EQ(j["checks"][0]["score"].get<double>(), 0.5);
}

TEST_F(TestsCheck, APatchThatDoesNotApplyIsTheTasksFailure) {
  tests_check_outcome out;
  out.patch_applied = false;
  out.patch_output = "error: patch failed: tests/test_m.py:3";
  auto g = run(out);
  ASSERT_TRUE(g.ok) << "not a grader error";
  EXPECT_FALSE(g.checks[0].passed);
  ASSERT_TRUE(g.checks[0].score);
  EXPECT_DOUBLE_EQ(*g.checks[0].score, 0.0);
  EXPECT_NE(g.checks[0].detail.find("does not apply"), std::string::npos) << g.checks[0].detail;
  EXPECT_EQ(g.to_json(1.0)["checks"][0]["patch"], "failed");
  EXPECT_EQ(g.to_json(1.0)["checks"][0]["tests"]["fail_to_pass"][0]["status"], "missing");
}

TEST_F(TestsCheck, AnUnreadableReportFailsTheCheckSayingWhy) {
  fixture_.checks[0].tests.report = tests_check::report_kind::junit;
  fixture_.checks[0].tests.junit_path = "report.xml";
  tests_check_outcome out;
  out.report = "<testsuite><testcase";  // torn: the command was killed mid-write
  auto g = run(out);
  ASSERT_TRUE(g.ok);
  EXPECT_FALSE(g.checks[0].passed);
  EXPECT_NE(g.checks[0].detail.find("report.xml: the JUnit report is not XML"), std::string::npos)
      << g.checks[0].detail;
}

TEST_F(TestsCheck, ASandboxFailureIsAGraderError) {
  auto g = grade({fixture_,
                  transcript_,
                  "/nonexistent",
                  "/nonexistent",
                  [](const check_spec&) { return result<shell_check_outcome>(); },
                  {},
                  [](const check_spec&) -> result<tests_check_outcome> {
                    return make_error(error_kind::io, "grading sandbox: clone3: EPERM");
                  }});
  EXPECT_FALSE(g.ok);
  EXPECT_NE(g.error.find("clone3"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::harness
