// The `tests:` check's log formats on real logs of each test runner (tests/data/swebench/logs,
// whose README says how each was made): every test each format reads, with its status, as
// SWE-bench's parser for those repositories reads it, and what a hostile log yields.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "base/fs.h"
#include "harness/config/spec.h"
#include "harness/grading/test_report.h"

namespace evalbox::harness {
namespace {

using statuses = std::map<std::string, std::string>;

std::string log_file(const std::string& name) {
  return read_file(std::string(EVALBOX_SOURCE_DIR) + "/tests/data/swebench/logs/" + name).value();
}

statuses all_of(const test_report& r) {
  statuses out;
  for (const auto& [id, s] : r.tests) out[id] = std::string(to_string(s));
  return out;
}

std::string status_of(const test_report& r, const std::string& id) {
  const test_status* s = r.find(id);
  return s ? std::string(to_string(*s)) : "missing";
}

const std::string demo = "tests/test_demo.py::";

TEST(SwebenchLogs, EveryFormatHasAName) {
  for (std::string_view name : test_log_format_names) {
    auto f = test_log_format_named(name);
    ASSERT_TRUE(f) << name;
    EXPECT_EQ(to_string(*f), name);
  }
  EXPECT_FALSE(test_log_format_named("junit"));
  EXPECT_FALSE(test_log_format_named("Django"));
}

TEST(SwebenchLogs, TheFixtureFormatNamesEveryFormat) {
  // harness/config validates `report: {format: NAME}` against its list, which cannot include
  // this layer's: the two must name the same formats.
  EXPECT_TRUE(std::equal(std::begin(test_log_formats), std::end(test_log_formats),
                         std::begin(test_log_format_names), std::end(test_log_format_names)));
}

TEST(SwebenchLogs, PytestReadsTheShortSummaryOfARealRun) {
  auto r = parse_test_log(test_log_format::pytest, log_file("pytest_ra.log"));
  EXPECT_EQ(all_of(r),
            (statuses{
                {demo + "test_button[MouseButton.LEFT]", "PASSED"},
                {demo + "test_button[MouseButton.RIGHT]", "PASSED"},
                {demo + "test_errors", "ERROR"},
                {demo + "test_fails", "FAILED"},
                {demo + "test_param[a b]", "FAILED"},
                {demo + "test_param[c]", "PASSED"},
                {demo + "test_passes", "PASSED"},
                {demo + "test_path[/tmp/pytest-of-root/pytest-7/data0/input.txt]", "PASSED"},
                {demo + "test_xfail", "XFAIL"},
                // pytest 7 writes an XPASS's reason without " - ".
                {demo + "test_xpass expected to fail, but passes", "XPASS"},
            }));
  // The ids SWE-bench's whitespace split makes of these.
  EXPECT_EQ(status_of(r, demo + "test_param[a"), "FAILED");
  EXPECT_EQ(status_of(r, demo + "test_xpass"), "XPASS");
  EXPECT_EQ(status_of(r, demo + "test_skipped"), "missing");
}

TEST(SwebenchLogs, PytestV2AlsoNamesSummaryLinesWithTheirMessage) {
  auto r = parse_test_log(test_log_format::pytest_v2, log_file("pytest_classic_vv.log"));
  EXPECT_EQ(all_of(r),
            (statuses{
                {demo + "test_button[MouseButton.LEFT]", "PASSED"},
                {demo + "test_button[MouseButton.RIGHT]", "PASSED"},
                {demo + "test_errors", "ERROR"},
                {demo + "test_errors - RuntimeError: fixture erroring on pur...", "ERROR"},
                {demo + "test_fails", "FAILED"},
                {demo + "test_param[a b]", "FAILED"},
                {demo + "test_param[c]", "PASSED"},
                {demo + "test_passes", "PASSED"},
                {demo + "test_path[/tmp/pytest-of-root/pytest-7/data0/input.txt]", "PASSED"},
                // -vv's classic lines: "ID SKIPPED (why)".
                {demo + "test_skipped", "SKIPPED"},
                {demo + "test_xfail", "XFAIL"},
                {demo + "test_xfail - expected to fail", "XFAIL"},
                {demo + "test_xpass", "XPASS"},
                {demo + "test_xpass expected to fail, but passes", "XPASS"},
            }));
}

TEST(SwebenchLogs, PytestOptionsKeepsTheLastComponentOfAPathParameter) {
  auto r = parse_test_log(test_log_format::pytest_options, log_file("pytest_ra.log"));
  EXPECT_EQ(status_of(r, demo + "test_path[/input.txt]"), "PASSED");
  EXPECT_EQ(status_of(r, demo + "test_path[/tmp/pytest-of-root/pytest-7/data0/input.txt]"),
            "missing");
  EXPECT_EQ(status_of(r, demo + "test_param[a b]"), "FAILED");
  EXPECT_EQ(status_of(r, demo + "test_param[a"), "FAILED");
  EXPECT_EQ(status_of(r, demo + "test_errors"), "ERROR");
  EXPECT_EQ(r.tests.size(), 10u);
  // Not a path, a "//" or a glob: kept whole.
  auto kept =
      parse_test_log(test_log_format::pytest_options,
                     "PASSED t.py::f[//x/y]\nPASSED t.py::g[/a/*.txt]\nPASSED t.py::h[x/y]\n"
                     "FAILED t.py::i[/a/b]extra - why\n");
  EXPECT_EQ(all_of(kept), (statuses{{"t.py::f[//x/y]", "PASSED"},
                                    {"t.py::g[/a/*.txt]", "PASSED"},
                                    {"t.py::h[x/y]", "PASSED"},
                                    {"t.py::i[/b]", "FAILED"}}));
}

TEST(SwebenchLogs, MatplotlibReadsMouseButtonsAsNumbers) {
  auto r = parse_test_log(test_log_format::matplotlib, log_file("pytest_ra.log"));
  EXPECT_EQ(status_of(r, demo + "test_button[1]"), "PASSED");
  EXPECT_EQ(status_of(r, demo + "test_button[3]"), "PASSED");
  EXPECT_EQ(status_of(r, demo + "test_button[MouseButton.LEFT]"), "missing");
  EXPECT_EQ(status_of(r, demo + "test_fails"), "FAILED");
  EXPECT_EQ(r.tests.size(), 10u);
}

TEST(SwebenchLogs, SeabornReadsOnlyPassedAndFailed) {
  auto r = parse_test_log(test_log_format::seaborn, log_file("pytest_no_header.log"));
  EXPECT_EQ(all_of(r),
            (statuses{
                {demo + "test_button[MouseButton.LEFT]", "PASSED"},
                {demo + "test_button[MouseButton.RIGHT]", "PASSED"},
                {demo + "test_fails", "FAILED"},
                {demo + "test_param[a", "FAILED"},
                {demo + "test_param[c]", "PASSED"},
                {demo + "test_passes", "PASSED"},
                {demo + "test_path[/tmp/pytest-of-root/pytest-7/data0/input.txt]", "PASSED"},
            }));
  // -v lines: "ID PASSED [ NN%]".
  auto v = parse_seaborn_log("tests/a.py::t PASSED [ 50%]\ntests/a.py::u FAILED [100%]\n");
  EXPECT_EQ(all_of(v), (statuses{{"tests/a.py::t", "PASSED"}}));
}

TEST(SwebenchLogs, DjangoReadsTheRunnersVerboseLines) {
  auto r = parse_test_log(test_log_format::django, log_file("django_runtests.log"));
  auto t = [](const std::string& name) {
    return name + " (utils_tests.test_text.TestUtilsText." + name + ")";
  };
  statuses want;
  for (const char* name :
       {"test_compress_sequence", "test_format_lazy", "test_get_text_list",
        "test_normalize_newlines", "test_smart_split", "test_truncate_chars",
        "test_truncate_chars_html", "test_truncate_chars_html_size_limit",
        "test_truncate_chars_html_with_html_entities",
        "test_truncate_chars_html_with_newline_inside_tag",
        "test_truncate_chars_html_with_void_elements", "test_truncate_html_words",
        "test_truncate_words", "test_truncate_words_html_size_limit",
        "test_unescape_string_literal", "test_unescape_string_literal_invalid_value"})
    want[t(name)] = "PASSED";
  want[t("test_get_valid_filename")] = "SKIPPED";
  want[t("test_phone2numeric")] = "FAILED";
  want["test_phone2numeric"] = "FAILED";  // from the traceback's "FAIL: test_phone2numeric (...)"
  want[t("test_wrap")] = "ERROR";
  want["test_wrap"] = "ERROR";
  // A test with a docstring is named by the docstring's first line.
  want["Slugs are lowercase ASCII."] = "PASSED";
  // Its stderr line came between " ... " and "ok".
  want[t("test_writes_to_stderr")] = "PASSED";
  EXPECT_EQ(all_of(r), want);
}

TEST(SwebenchLogs, DjangoReadsTheInterruptedFormsSwebenchKnows) {
  auto r = parse_django_log(
      "test_a (m.T) ... Testing against Django installed in '/x'\n"
      "Found 1 test(s).\nlines ... between\nSystem check identified no issues (0 silenced).\nok\n"
      "test_b (m.T) ... Internal Server Error: /admin/x/\nok\n"
      "test_c (m.T) ... System check identified no issues (0 silenced)\nok\n"
      "test_d (m.T) ... FAIL\n"
      "test_e (m.T) ... Internal Server Error: /admin/x/\nokay\n"
      "Applying sites.0002_alter_domain_unique...test_no_migrations (m.T) ... ok\n"
      "--version is equivalent to version\n");
  EXPECT_EQ(all_of(r), (statuses{
                           {"test_a (m.T)", "PASSED"},
                           // The line rule: an "ok" line passes the last " ... " line's test.
                           {"lines", "PASSED"},
                           {"test_b (m.T)", "PASSED"},
                           {"test_c (m.T)", "PASSED"},
                           {"test_d (m.T)", "FAILED"},
                           // "okay" starts with "ok": SWE-bench's line rule passes it.
                           {"test_e (m.T)", "PASSED"},
                           {"test_no_migrations (m.T)", "PASSED"},
                           {"--version is equivalent to version", "PASSED"},
                       }));
}

TEST(SwebenchLogs, SympyReadsTheRunnersVerboseLines) {
  auto r = parse_test_log(test_log_format::sympy, log_file("sympy_bin_test.log"));
  EXPECT_EQ(all_of(r), (statuses{
                           {"sympy/utilities/tests/test_misc.py:test_erroring", "FAILED"},
                           {"sympy/utilities/tests/test_misc.py:test_replace", "FAILED"},
                           {"test_as_int", "PASSED"},
                           {"test_debug_output", "PASSED"},
                           // The last test of each file, its line ending in [FAIL] / [OK].
                           {"test_deprecated_find_executable", "PASSED"},
                           {"test_get_class", "PASSED"},
                           {"test_erroring", "ERROR"},
                           {"test_get_mod_func", "PASSED"},
                           {"test_ordinal", "PASSED"},
                           {"test_rawlines", "PASSED"},
                           {"test_replace", "FAILED"},
                           {"test_strlines", "PASSED"},
                           {"test_translate", "PASSED"},
                           {"test_translate_args", "PASSED"},
                       }));
  // A skip ("s") and an expected failure ("f") are no test.
  EXPECT_EQ(status_of(r, "test_skipped"), "missing");
  EXPECT_EQ(status_of(r, "test_expected_failure"), "missing");
}

TEST(SwebenchLogs, GarbageYieldsNoCrash) {
  std::string junk;
  for (int i = 0; i < 8192; ++i) junk += static_cast<char>((i * 7919 + i / 13) % 256);
  const std::string odd =
      "FAIL:\nERROR:\n ... \n... ok\n...\nok\n x.py: \n .py:\n_ a.py:b _\nPASSED\nFAILED \n"
      "x ... Testing against Django installed in \n silenced).\nok";
  for (std::string_view name : test_log_format_names) {
    const auto format = *test_log_format_named(name);
    (void)parse_test_log(format, junk);
    (void)parse_test_log(format, odd);
    EXPECT_TRUE(parse_test_log(format, "").tests.empty()) << name;
  }
  EXPECT_EQ(all_of(parse_sympy_log("_ a.py:b _\n")), (statuses{{"a.py:b", "FAILED"}}));
  EXPECT_EQ(all_of(parse_django_log(odd)).count("x"), 1u);
}

}  // namespace
}  // namespace evalbox::harness
