// Test reports -> each test's status, and the FAIL_TO_PASS / PASS_TO_PASS grade of a `tests:`
// check (docs/swebench.md). A report is written by code the agent changed, so the parsers take
// any bytes: garbage yields no tests (and so failing ones), never a crash; the caller bounds
// what it reads (read_limits.h: max_test_report_bytes).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace evalbox::harness {
inline namespace grading {

enum class test_status { passed, failed, error, skipped, xfail, xpass };
std::string_view to_string(test_status s) noexcept;
// What SWE-bench counts as passing: PASSED and XFAIL (an expected failure), and XPASS, which
// pytest itself reports as a success unless the xfail is strict.
bool counts_as_passed(test_status s) noexcept;

struct test_report {
  std::map<std::string, test_status> tests;  // by test id as the report writes it
  // Other ids a test answers to: pytest's id cut at its first space (SWE-bench's parser splits
  // lines on whitespace, so its lists hold parametrized ids that way); a JUnit case's
  // "classname.name" and bare name.
  std::map<std::string, std::string> aliases;  // alias -> id in `tests`

  // The test `id` names (exactly, else through an alias), or nullptr.
  [[nodiscard]] const test_status* find(const std::string& id) const;
};

// pytest's short test summary (`pytest -rA`): lines "STATUS NODEID[ - message]" for PASSED,
// FAILED, ERROR, SKIPPED, XFAIL and XPASS, as SWE-bench's log parser reads them; also
// `pytest -v`'s "NODEID STATUS [ NN%]" lines. ANSI colour codes are ignored. A later line
// about the same test wins (the summary comes last).
test_report parse_pytest_log(std::string_view log);

// A JUnit XML report (pytest --junitxml, Maven Surefire, go-junit-report...): every
// <testcase> at any depth, passed unless it holds <failure>, <error> or <skipped>. Its id is
// "classname::name" (or "name" without a classname). Parsed with expat (SAX), never reading an
// external entity or DTD. A document that is not XML is an invalid_argument error.
result<test_report> parse_junit_xml(std::string_view xml);

struct graded_test {
  std::string id;
  std::string status;  // to_string(test_status), or "missing" when the report lacks it
  bool ok = false;     // counts as passed
};

// The grade of FAIL_TO_PASS / PASS_TO_PASS against a report.
struct tests_grade {
  std::vector<graded_test> fail_to_pass, pass_to_pass;
  size_t f2p_passed = 0, p2p_passed = 0;
  // "full" (every listed test passes: resolved), "partial" (every PASS_TO_PASS test passes and
  // some, not all, FAIL_TO_PASS tests do), or "none" — SWE-bench's FULL / PARTIAL / NO.
  std::string resolution;
  // The check's score: (F2P passing share) x (P2P passing share), a list without tests
  // counting 1. Full is 1; breaking tests that passed costs as much as not fixing.
  double score = 0;
};
tests_grade grade_tests(const test_report& report, const std::vector<std::string>& fail_to_pass,
                        const std::vector<std::string>& pass_to_pass);

// The files a unified diff touches ("--- a/P" and "+++ b/P" lines; /dev/null is none), each
// once, in order; a path that is absolute or has ".." is left out.
std::vector<std::string> patch_files(std::string_view patch);

}  // namespace grading
}  // namespace evalbox::harness
