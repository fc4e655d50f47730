// Fuzzes the test-report readers of `tests:` checks (harness/grading/test_report.h): the
// output of a test command and the JUnit XML it writes come from code the agent changed. Any
// bytes yield a report or, for XML, an error; the grade over it is always well-formed.
#include "harness/grading/test_report.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  std::string_view text = fuzz::as_text(data, size);
  const std::vector<std::string> f2p = {"test_a.py::test_ok", "test_a::test_bad", "x"};
  const std::vector<std::string> p2p = {"test_a.py::test_p[a"};
  auto check_grade = [&](const harness::test_report& r) {
    for (const auto& [id, s] : r.tests) fuzz::check(!id.empty(), "a test has an id");
    auto g = harness::grade_tests(r, f2p, p2p);
    fuzz::check(g.score >= 0 && g.score <= 1, "the score is a share");
    fuzz::check(g.fail_to_pass.size() == f2p.size() && g.pass_to_pass.size() == p2p.size(),
                "every listed test is graded");
    fuzz::check((g.resolution == "full") == (g.score == 1.0), "full exactly when the score is 1");
  };
  check_grade(harness::parse_pytest_log(text));
  if (auto x = harness::parse_junit_xml(text)) check_grade(*x);
  (void)harness::patch_files(text);
  return 0;
}
