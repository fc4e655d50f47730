// pytest logs and JUnit XML -> test statuses, and the F2P/P2P grade (test_report.h).
#include "harness/grading/test_report.h"

#include "base/fs.h"

#include <expat.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>

namespace evalbox::harness {
inline namespace grading {

namespace {

constexpr std::pair<std::string_view, test_status> status_words[] = {
    {"PASSED", test_status::passed}, {"FAILED", test_status::failed},
    {"ERROR", test_status::error},   {"SKIPPED", test_status::skipped},
    {"XFAIL", test_status::xfail},   {"XPASS", test_status::xpass},
};

std::optional<test_status> status_word(std::string_view w) {
  for (const auto& [word, s] : status_words)
    if (w == word) return s;
  return std::nullopt;
}

// The line without ANSI escape sequences (CSI ... final byte) and surrounding blanks.
std::string clean_line(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !(line[i] >= 0x40 && line[i] <= 0x7e)) ++i;
      continue;
    }
    if (line[i] == '\r') continue;
    out += line[i];
  }
  size_t b = out.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  size_t e = out.find_last_not_of(" \t");
  return out.substr(b, e - b + 1);
}

void record(test_report& r, std::string id, test_status s) {
  if (id.empty()) return;
  if (auto sp = id.find_first_of(" \t"); sp != std::string::npos) r.aliases[id.substr(0, sp)] = id;
  r.tests[std::move(id)] = s;
}

struct xml_parser_free {
  void operator()(XML_Parser p) const noexcept { XML_ParserFree(p); }
};

// What the SAX callbacks build: every <testcase> at any depth, and the status its direct
// <failure>, <error> or <skipped> child gives it.
struct junit_state {
  test_report report;
  int depth = 0;
  int case_depth = -1;  // depth of the open <testcase>, -1 outside one
  std::string cls, name;
  test_status status = test_status::passed;
};

std::string attribute(const XML_Char** atts, std::string_view key) {
  for (size_t i = 0; atts && atts[i] && atts[i + 1]; i += 2)
    if (key == atts[i]) return atts[i + 1];
  return {};
}

void XMLCALL junit_start(void* data, const XML_Char* el, const XML_Char** atts) {
  auto& st = *static_cast<junit_state*>(data);
  ++st.depth;
  const std::string_view name(el);
  if (st.case_depth < 0 && name == "testcase") {
    st.case_depth = st.depth;
    st.cls = attribute(atts, "classname");
    st.name = attribute(atts, "name");
    st.status = test_status::passed;
  } else if (st.case_depth >= 0 && st.depth == st.case_depth + 1) {
    if (name == "failure")
      st.status = test_status::failed;
    else if (name == "error" && st.status != test_status::failed)
      st.status = test_status::error;
    else if (name == "skipped" && st.status == test_status::passed)
      st.status = test_status::skipped;
  }
}

void XMLCALL junit_end(void* data, const XML_Char*) {
  auto& st = *static_cast<junit_state*>(data);
  if (st.depth == st.case_depth) {
    st.case_depth = -1;
    if (!st.name.empty()) {
      std::string id = st.cls.empty() ? st.name : st.cls + "::" + st.name;
      if (!st.cls.empty()) {
        st.report.aliases[st.cls + "." + st.name] = id;
        st.report.aliases.emplace(st.name, id);
      }
      st.report.tests[std::move(id)] = st.status;
    }
  }
  --st.depth;
}

}  // namespace

std::string_view to_string(test_status s) noexcept {
  switch (s) {
    case test_status::passed:
      return "PASSED";
    case test_status::failed:
      return "FAILED";
    case test_status::error:
      return "ERROR";
    case test_status::skipped:
      return "SKIPPED";
    case test_status::xfail:
      return "XFAIL";
    case test_status::xpass:
      return "XPASS";
  }
  return "UNKNOWN";
}

bool counts_as_passed(test_status s) noexcept {
  return s == test_status::passed || s == test_status::xfail || s == test_status::xpass;
}

const test_status* test_report::find(const std::string& id) const {
  if (auto it = tests.find(id); it != tests.end()) return &it->second;
  if (auto a = aliases.find(id); a != aliases.end())
    if (auto it = tests.find(a->second); it != tests.end()) return &it->second;
  return nullptr;
}

test_report parse_pytest_log(std::string_view log) {
  test_report r;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string line = clean_line(log.substr(start, end - start));
    start = end + 1;
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    // -rA: "STATUS NODEID" or "STATUS NODEID - message".
    if (auto s = status_word(std::string_view(line).substr(0, sp))) {
      std::string rest = line.substr(sp + 1);
      if (auto dash = rest.find(" - "); dash != std::string::npos) rest.resize(dash);
      // SKIPPED lines name a location ("[1] tests/t.py:12: why"), not a test id.
      if (*s == test_status::skipped && rest.starts_with("[")) continue;
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.pop_back();
      record(r, std::move(rest), *s);
      continue;
    }
    // -v: "NODEID STATUS [ NN%]" — the node id has "::"; a parametrized id may hold spaces,
    // so the status is the first status word after it.
    const size_t colons = line.find("::");
    if (colons == std::string::npos || colons > sp) continue;
    for (size_t at = line.find(' ', colons); at != std::string::npos; at = line.find(' ', at + 1)) {
      size_t word_end = line.find(' ', at + 1);
      std::string_view word = std::string_view(line).substr(
          at + 1, word_end == std::string::npos ? std::string::npos : word_end - at - 1);
      if (auto s = status_word(word)) {
        record(r, line.substr(0, at), *s);
        break;
      }
    }
  }
  return r;
}

result<test_report> parse_junit_xml(std::string_view xml) {
  if (xml.size() > static_cast<size_t>(INT_MAX))
    return make_error(error_kind::invalid_argument, "the JUnit report is too large");
  std::unique_ptr<XML_ParserStruct, xml_parser_free> parser(XML_ParserCreate(nullptr));
  if (!parser) return make_error(error_kind::internal, "XML_ParserCreate: out of memory");
  // The report is the agent's: no external entity or DTD is ever read (no handler for them,
  // parameter entities off), and expat (>= 2.4) refuses documents whose internal entities
  // amplify the input ("billion laughs"). Element nesting costs heap, not stack.
  XML_SetParamEntityParsing(parser.get(), XML_PARAM_ENTITY_PARSING_NEVER);
  junit_state st;
  XML_SetUserData(parser.get(), &st);
  XML_SetElementHandler(parser.get(), junit_start, junit_end);
  if (XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), XML_TRUE) ==
      XML_STATUS_ERROR)
    return make_error(error_kind::invalid_argument, "the JUnit report is not XML: {} at line {}",
                      XML_ErrorString(XML_GetErrorCode(parser.get())),
                      XML_GetCurrentLineNumber(parser.get()));
  return std::move(st.report);
}

std::vector<std::string> patch_files(std::string_view patch) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < patch.size()) {
    size_t end = patch.find('\n', start);
    if (end == std::string_view::npos) end = patch.size();
    std::string_view line = patch.substr(start, end - start);
    start = end + 1;
    if (!line.starts_with("--- a/") && !line.starts_with("+++ b/")) continue;
    std::string path(line.substr(6));
    if (auto tab = path.find('\t'); tab != std::string::npos) path.resize(tab);
    while (!path.empty() && path.back() == '\r') path.pop_back();
    if (path.empty() || !is_safe_relative(std::filesystem::path(path))) continue;
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
  }
  return out;
}

tests_grade grade_tests(const test_report& report, const std::vector<std::string>& fail_to_pass,
                        const std::vector<std::string>& pass_to_pass) {
  tests_grade g;
  auto grade_list = [&](const std::vector<std::string>& ids, std::vector<graded_test>& out,
                        size_t& passing) {
    for (const auto& id : ids) {
      graded_test t{id, "missing", false};
      if (const test_status* s = report.find(id)) {
        t.status = std::string(to_string(*s));
        t.ok = counts_as_passed(*s);
      }
      if (t.ok) ++passing;
      out.push_back(std::move(t));
    }
  };
  grade_list(fail_to_pass, g.fail_to_pass, g.f2p_passed);
  grade_list(pass_to_pass, g.pass_to_pass, g.p2p_passed);
  const double f2p = fail_to_pass.empty() ? 1.0 : double(g.f2p_passed) / fail_to_pass.size();
  const double p2p = pass_to_pass.empty() ? 1.0 : double(g.p2p_passed) / pass_to_pass.size();
  g.score = f2p * p2p;
  const bool all_p2p = g.p2p_passed == pass_to_pass.size();
  if (all_p2p && g.f2p_passed == fail_to_pass.size())
    g.resolution = "full";
  else if (all_p2p && g.f2p_passed > 0)
    g.resolution = "partial";
  else
    g.resolution = "none";
  return g;
}

}  // namespace grading
}  // namespace evalbox::harness
