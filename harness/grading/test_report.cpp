// pytest logs and JUnit XML -> test statuses, and the F2P/P2P grade (test_report.h).
#include "harness/grading/test_report.h"

#include "sandbox/base/fs.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <optional>

namespace evalbox::harness {

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

struct xml_doc_free {
  void operator()(xmlDoc* d) const noexcept { xmlFreeDoc(d); }
};

std::string prop(xmlNode* n, const char* name) {
  xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
  if (!v) return {};
  std::string s(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return s;
}

bool named(xmlNode* n, const char* name) {
  return n->type == XML_ELEMENT_NODE &&
         xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
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
  // No network, no external DTD, no entity substitution (XML_PARSE_NOENT is not given): the
  // report is the agent's, and entities are how XML documents attack their reader. libxml2
  // keeps its own depth and entity-amplification limits (XML_PARSE_HUGE is not given).
  const int options = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                      XML_PARSE_NOBLANKS | XML_PARSE_NOCDATA;
  // Once, before any thread parses (libxml2's global state).
  static std::once_flag init;
  std::call_once(init, [] { xmlInitParser(); });
  std::unique_ptr<xmlDoc, xml_doc_free> doc(
      xmlReadMemory(xml.data(), static_cast<int>(xml.size()), "report.xml", nullptr, options));
  if (!doc) {
    const xmlError* e = xmlGetLastError();
    std::string why = e && e->message ? e->message : "not well-formed";
    while (!why.empty() && why.back() == '\n') why.pop_back();
    xmlResetLastError();
    return make_error(error_kind::invalid_argument, "the JUnit report is not XML: {}", why);
  }
  test_report r;
  xmlNode* root = xmlDocGetRootElement(doc.get());
  // Depth-first without recursion: a deep document costs no stack.
  std::vector<xmlNode*> stack;
  if (root) stack.push_back(root);
  while (!stack.empty()) {
    xmlNode* n = stack.back();
    stack.pop_back();
    if (named(n, "testcase")) {
      const std::string cls = prop(n, "classname"), name = prop(n, "name");
      if (name.empty()) continue;
      test_status s = test_status::passed;
      for (xmlNode* c = n->children; c; c = c->next) {
        if (named(c, "failure"))
          s = test_status::failed;
        else if (named(c, "error") && s != test_status::failed)
          s = test_status::error;
        else if (named(c, "skipped") && s == test_status::passed)
          s = test_status::skipped;
      }
      std::string id = cls.empty() ? name : cls + "::" + name;
      if (!cls.empty()) {
        r.aliases[cls + "." + name] = id;
        r.aliases.emplace(name, id);
      }
      r.tests[std::move(id)] = s;
      continue;
    }
    for (xmlNode* c = n->last; c; c = c->prev)
      if (c->type == XML_ELEMENT_NODE) stack.push_back(c);
  }
  return r;
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

}  // namespace evalbox::harness
