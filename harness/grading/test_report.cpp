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

// fn(line) for each line of `text`, without its '\n' (a '\r' stays, as in SWE-bench's split).
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    fn(text.substr(start, end - start));
    start = end + 1;
  }
}

// The ASCII characters Python's str.split() and str.strip() take for whitespace.
bool is_python_space(char c) noexcept {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

std::string_view strip_words(std::string_view s) noexcept {
  while (!s.empty() && is_python_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_python_space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    while (i < s.size() && is_python_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_python_space(s[j])) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// What the pytest-based formats read differently from plain `pytest` (test_report.h).
struct pytest_quirks {
  bool whole_messages = false;  // pytest-v2
  bool mouse_buttons = false;   // matplotlib
  bool path_options = false;    // requests, pylint
};

// "f[/tmp/pytest-of-x/data0/in.txt]" -> "f[/in.txt]": the part between the first '[' and the
// last ']' when it is an absolute path (not "//", no '*'), as SWE-bench's
// parse_log_pytest_options writes ids whose temporary directories differ from run to run.
std::string last_path_component_option(const std::string& id) {
  const size_t open = id.find('['), close = id.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return id;
  std::string option = id.substr(open + 1, close - open - 1);
  if (option.starts_with('/') && !option.starts_with("//") && option.find('*') == std::string::npos)
    option = "/" + option.substr(option.rfind('/') + 1);
  return id.substr(0, open) + "[" + option + "]";
}

void record_pytest(test_report& r, std::string id, test_status s, const pytest_quirks& q) {
  if (!q.path_options) return record(r, std::move(id), s);
  if (id.empty()) return;
  std::string full = last_path_component_option(id);
  if (auto sp = id.find_first_of(" \t"); sp != std::string::npos)
    r.aliases[last_path_component_option(id.substr(0, sp))] = full;
  r.tests[std::move(full)] = s;
}

test_report parse_pytest_like(std::string_view log, const pytest_quirks& q) {
  test_report r;
  for_each_line(log, [&](std::string_view raw) {
    std::string line = clean_line(raw);
    if (q.mouse_buttons)
      line = replace_all(replace_all(std::move(line), "MouseButton.LEFT", "1"), "MouseButton.RIGHT",
                         "3");
    if (line.empty()) return;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) return;
    // -rA: "STATUS NODEID" or "STATUS NODEID - message".
    if (auto s = status_word(std::string_view(line).substr(0, sp))) {
      std::string rest = line.substr(sp + 1);
      // SKIPPED lines name a location ("[1] tests/t.py:12: why"), not a test id.
      if (*s == test_status::skipped && rest.starts_with("[")) return;
      if (auto dash = rest.find(" - "); dash != std::string::npos) {
        // SWE-bench's parse_log_pytest_v2 cuts only FAILED lines at " - ": its lists name an
        // xfail test of pytest 7 as "t.py::f - why".
        if (q.whole_messages && *s != test_status::failed) {
          std::string whole;
          for (std::string_view w : split_words(rest))
            whole += (whole.empty() ? "" : " ") + std::string(w);
          r.tests[std::move(whole)] = *s;
        }
        rest.resize(dash);
      }
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.pop_back();
      record_pytest(r, std::move(rest), *s, q);
      return;
    }
    // -v: "NODEID STATUS [ NN%]" — the node id has "::"; a parametrized id may hold spaces,
    // so the status is the first status word after it.
    const size_t colons = line.find("::");
    if (colons == std::string::npos || colons > sp) return;
    for (size_t at = line.find(' ', colons); at != std::string::npos; at = line.find(' ', at + 1)) {
      size_t word_end = line.find(' ', at + 1);
      std::string_view word = std::string_view(line).substr(
          at + 1, word_end == std::string::npos ? std::string::npos : word_end - at - 1);
      if (auto s = status_word(word)) {
        record_pytest(r, line.substr(0, at), *s, q);
        break;
      }
    }
  });
  return r;
}

// The first i where `line` has whitespace, "...", whitespace and then `marker`; nullopt if none.
std::optional<size_t> find_separated(std::string_view line, std::string_view marker) {
  for (size_t dots = line.find("...", 1); dots != std::string_view::npos;
       dots = line.find("...", dots + 1)) {
    if (dots + 4 > line.size() || !is_python_space(line[dots - 1]) ||
        !is_python_space(line[dots + 3]))
      continue;
    if (line.substr(dots + 4).starts_with(marker)) return dots - 1;
  }
  return std::nullopt;
}

// SWE-bench's three patterns for a Django test whose "ok" the output it printed pushed to a line
// of its own (parse_log_django), matched as Python's re.finditer matches them: the test's name
// is what its line holds before the first " ... " followed by the pattern's text.
std::vector<std::string> django_interrupted_passes(std::string_view log) {
  std::vector<std::string> out;
  auto line_end = [&](size_t from) {
    size_t e = log.find('\n', from);
    return e == std::string_view::npos ? log.size() : e;
  };
  // "NAME ... Testing against Django installed in <anything, lines too> silenced).\nok$".
  constexpr std::string_view testing = "Testing against Django installed in ";
  constexpr std::string_view testing_end = " silenced).\nok";
  for (size_t start = 0; start < log.size();) {
    const size_t end = line_end(start);
    std::string_view line = log.substr(start, end - start);
    auto at = find_separated(line, testing);
    if (!at) {
      start = end + 1;
      continue;
    }
    size_t t = log.find(testing_end, start + *at + 5 + testing.size());
    while (t != std::string_view::npos && t + testing_end.size() < log.size() &&
           log[t + testing_end.size()] != '\n')
      t = log.find(testing_end, t + 1);
    if (t == std::string_view::npos) break;  // nor for any later line
    if (*at > 0) out.emplace_back(line.substr(0, *at));
    start = t + testing_end.size() + 1;
  }
  // "NAME ... Internal Server Error: /PATH/" and "NAME ... System check identified no issues (0
  // silenced)", each followed by a line "ok".
  constexpr std::string_view server_error = "Internal Server Error: /";
  constexpr std::string_view no_issues = "System check identified no issues (0 silenced)";
  for (const bool server : {true, false}) {
    for (size_t start = 0; start < log.size();) {
      const size_t end = line_end(start);
      std::string_view line = log.substr(start, end - start);
      start = end + 1;
      const size_t next_end = start < log.size() ? line_end(start) : log.size();
      if (start >= log.size() || log.substr(start, next_end - start) != "ok") continue;
      std::optional<size_t> at;
      if (server) {
        at = find_separated(line, server_error);
        if (at && !(line.ends_with('/') && line.size() - 1 >= *at + 5 + server_error.size()))
          at.reset();
      } else if (line.size() >= no_issues.size() + 6 && line.ends_with(no_issues)) {
        const size_t i = line.size() - no_issues.size() - 5;
        if (line.substr(i + 1, 3) == "..." && is_python_space(line[i]) &&
            is_python_space(line[i + 4]))
          at = i;
      }
      if (!at) continue;
      if (*at > 0) out.emplace_back(line.substr(0, *at));
      start = next_end + 1;  // the "ok" line is the match's
    }
  }
  return out;
}

// "___ sympy/core/tests/test_x.py:test_y ___" -> "sympy/core/tests/test_x.py:test_y", as
// SWE-bench's regex `(_*) (.*)\.py:(.*) (_*)` finds it: between the line's first space and its
// last one, the text up to the last ".py:" before that last space.
std::optional<std::string> sympy_failure_header(std::string_view line) {
  const size_t first = line.find(' '), last = line.rfind(' ');
  if (first == std::string_view::npos || last < first + 5) return std::nullopt;
  const size_t py = line.rfind(".py:", last - 4);
  if (py == std::string_view::npos || py < first + 1) return std::nullopt;
  return std::string(line.substr(first + 1, py + 4 - first - 1)) +
         std::string(line.substr(py + 4, last - py - 4));
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

test_report parse_pytest_log(std::string_view log) { return parse_pytest_like(log, {}); }

std::string_view to_string(test_log_format f) noexcept {
  return test_log_format_names[static_cast<size_t>(f)];
}

std::optional<test_log_format> test_log_format_named(std::string_view name) noexcept {
  for (size_t i = 0; i < std::size(test_log_format_names); ++i)
    if (test_log_format_names[i] == name) return static_cast<test_log_format>(i);
  return std::nullopt;
}

test_report parse_test_log(test_log_format format, std::string_view log) {
  switch (format) {
    case test_log_format::pytest:
      return parse_pytest_log(log);
    case test_log_format::pytest_v2:
      return parse_pytest_like(log, {.whole_messages = true});
    case test_log_format::pytest_options:
      return parse_pytest_like(log, {.path_options = true});
    case test_log_format::matplotlib:
      return parse_pytest_like(log, {.mouse_buttons = true});
    case test_log_format::seaborn:
      return parse_seaborn_log(log);
    case test_log_format::django:
      return parse_django_log(log);
    case test_log_format::sympy:
      return parse_sympy_log(log);
  }
  return {};
}

test_report parse_seaborn_log(std::string_view log) {
  test_report r;
  for_each_line(log, [&](std::string_view line) {
    const std::vector<std::string_view> parts = split_words(line);
    if (parts.size() < 2) return;
    if (line.starts_with("FAILED")) {
      r.tests[std::string(parts[1])] = test_status::failed;
    } else if (line.find(" PASSED ") != std::string_view::npos) {
      // "ID PASSED [ NN%]" of -v; a line naming PASSED elsewhere is no test.
      if (parts[1] == "PASSED") r.tests[std::string(parts[0])] = test_status::passed;
    } else if (line.starts_with("PASSED")) {
      r.tests[std::string(parts[1])] = test_status::passed;
    }
  });
  return r;
}

test_report parse_django_log(std::string_view log) {
  test_report r;
  auto mark = [&](std::string_view id, test_status s) { r.tests[std::string(id)] = s; };
  std::optional<std::string> prev_test;  // the last test that printed " ... "
  for_each_line(log, [&](std::string_view raw) {
    std::string_view line = strip_words(raw);
    // A test of django-admin's whose expected output spans lines; SWE-bench names it so.
    if (line.find("--version is equivalent to version") != std::string_view::npos)
      mark("--version is equivalent to version", test_status::passed);
    if (auto dots = line.find(" ... "); dots != std::string_view::npos)
      prev_test = std::string(line.substr(0, dots));
    for (std::string_view suffix : {" ... ok", " ... OK", " ...  OK"}) {
      if (!line.ends_with(suffix)) continue;
      // A migration's progress printed before the test's name (django__django-7188).
      if (line.starts_with("Applying sites.0002_alter_domain_unique...test_no_migrations"))
        line = strip_words(line.substr(line.find("...") + 3));
      mark(line.substr(0, line.size() - suffix.size()), test_status::passed);
      break;
    }
    if (auto at = line.find(" ... skipped"); at != std::string_view::npos)
      mark(line.substr(0, at), test_status::skipped);
    if (line.ends_with(" ... FAIL"))
      mark(line.substr(0, line.find(" ... FAIL")), test_status::failed);
    if (line.starts_with("FAIL:"))
      if (auto parts = split_words(line); parts.size() > 1) mark(parts[1], test_status::failed);
    if (line.ends_with(" ... ERROR"))
      mark(line.substr(0, line.find(" ... ERROR")), test_status::error);
    if (line.starts_with("ERROR:"))
      if (auto parts = split_words(line); parts.size() > 1) mark(parts[1], test_status::error);
    // The test wrote output after its " ... ": its "ok" comes on a line of its own.
    if (line.starts_with("ok") && prev_test) mark(*prev_test, test_status::passed);
  });
  for (const std::string& id : django_interrupted_passes(log)) mark(id, test_status::passed);
  return r;
}

test_report parse_sympy_log(std::string_view log) {
  test_report r;
  for_each_line(log, [&](std::string_view raw) {
    // "___ sympy/core/tests/test_x.py:test_y ___", the header of a failure's traceback.
    if (auto header = sympy_failure_header(raw)) r.tests[*header] = test_status::failed;
    std::string_view line = strip_words(raw);
    if (!line.starts_with("test_")) return;
    for (std::string_view tag : {"[OK]", "[FAIL]"})
      if (line.ends_with(tag)) line = strip_words(line.substr(0, line.size() - tag.size()));
    std::optional<test_status> s;
    if (line.ends_with(" E"))
      s = test_status::error;
    else if (line.ends_with(" F"))
      s = test_status::failed;
    else if (line.ends_with(" ok"))
      s = test_status::passed;
    if (s) r.tests[std::string(split_words(line).front())] = *s;
  });
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
