// Test reports -> each test's status, and the FAIL_TO_PASS / PASS_TO_PASS grade of a `tests:`
// check (docs/swebench.md): pytest's output and the other test runners' logs SWE-bench's harness
// reads (Django's, sympy's, ...), and JUnit XML. A report is written by code the agent changed, so
// the parsers take any bytes: garbage yields no tests (and so failing ones), never a crash; the
// caller bounds what it reads (read_limits.h: max_test_report_bytes).
#pragma once

#include <map>
#include <optional>
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

// The logs a `tests:` check reads from its command's output (`report: {format: NAME}`), each
// read as SWE-bench's log parser for those repositories reads it (swebench/harness/log_parsers),
// quirks included, so that its FAIL_TO_PASS / PASS_TO_PASS lists, which that parser made, grade
// the same here:
//   pytest          parse_pytest_log
//   pytest-v2       pytest; and the text after the status word of an XFAIL, ERROR, PASSED or
//                   SKIPPED summary line is an id whole too, message included ("XFAIL t.py::f -
//                   why" names "t.py::f - why" as well): astropy, scikit-learn, sphinx
//   pytest-options  pytest; and a parameter that is an absolute path keeps only its last
//                   component ("t.py::f[/tmp/x/in.txt]" is "t.py::f[/in.txt]"): requests, pylint
//   matplotlib      pytest, with "MouseButton.LEFT" / "MouseButton.RIGHT" read as 1 / 3
//   seaborn         parse_seaborn_log
//   django          parse_django_log
//   sympy           parse_sympy_log
// Where evalbox reads more than SWE-bench (an XPASS line, sympy's last test of a file), the
// test is one SWE-bench's parser misses, which its lists therefore never name.
enum class test_log_format {
  pytest,
  pytest_v2,
  pytest_options,
  matplotlib,
  seaborn,
  django,
  sympy
};
inline constexpr std::string_view test_log_format_names[] = {
    "pytest", "pytest-v2", "pytest-options", "matplotlib", "seaborn", "django", "sympy"};
std::string_view to_string(test_log_format f) noexcept;
// NAME -> the format; nullopt for a name not above.
std::optional<test_log_format> test_log_format_named(std::string_view name) noexcept;
test_report parse_test_log(test_log_format format, std::string_view log);

// seaborn's `pytest --no-header -rA`, as SWE-bench reads it: only "FAILED ID ...",
// "PASSED ID" and "ID PASSED ..." lines count (an error, a skip or an xfail is no test).
test_report parse_seaborn_log(std::string_view log);

// Django's `tests/runtests.py --verbosity 2`: "NAME ... ok" (PASSED), "... skipped 'why'",
// "... FAIL", "... ERROR", and the "FAIL: test_x (...)" / "ERROR: test_x (...)" headers of the
// tracebacks, which name the bare method (test_x). NAME is what the runner printed before
// " ... ": "test_x (module.Class)" (or "(module.Class.test_x)" from Python 3.11), or the first
// line of the test's docstring when it has one. An "ok" alone on a line passes the last test
// that printed " ... " (its output came between), as do the three interrupted forms SWE-bench
// recognises ("NAME ... Testing against Django installed in ... silenced).\nok", "NAME ...
// Internal Server Error: /PATH/\nok", "NAME ... System check identified no issues (0
// silenced)\nok").
test_report parse_django_log(std::string_view log);

// sympy's `bin/test -C --verbose`: "test_x ok" (PASSED), "test_x F" (FAILED), "test_x E"
// (ERROR), by the function's bare name; a skip ("s") or an expected failure ("f", "X") is no
// test. The traceback headers "___ path/test_f.py:test_x ___" make "path/test_f.py:test_x"
// FAILED. Unlike SWE-bench's parser, the last test of a file, whose line ends with the file's
// "[OK]" or "[FAIL]", is read too (SWE-bench's misses it, so no list of its names it).
test_report parse_sympy_log(std::string_view log);

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
