// A fixture's checks: each names exactly one kind (shell, file, git, transcript, tests, judge)
// and that kind's own keys; ids are unique and some check has a positive weight. Patterns are
// compiled here, when the fixture loads.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "base/fs.h"
#include "harness/config/parse_parts.h"
#include "harness/config/validate.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

namespace {

namespace fs = std::filesystem;

// file: {path, exists | absent | equals | contains | matches | json: {pointer, equals}}.
void parse_file_check(reader& r, const YAML::Node& n, const std::string& what, file_check& out) {
  static constexpr std::string_view known[] = {"path",     "exists",  "absent", "equals",
                                               "contains", "matches", "json"};
  static constexpr std::string_view required[] = {"path"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return;
  if (f->has("path")) {
    if (auto p = r.relative_path(f->get("path"), what + ".path")) out.path = *p;
  }
  std::vector<std::string> preds;
  for (const auto& [k, v] : f->entries)
    if (k != "path") preds.push_back(k);
  if (preds.size() != 1) {
    r.fail(n,
           preds.empty() ? fmt::format("{} has no predicate", what)
                         : fmt::format("{} has {} predicates ({}); it needs exactly one", what,
                                       preds.size(), fmt::join(preds, ", ")),
           "use exactly one of exists, absent, equals, contains, matches, json");
    return;
  }
  const std::string& p = preds.front();
  YAML::Node v = f->get(p);
  std::string name = fmt::format("{}.{}", what, p);
  using k = file_check::predicate_kind;
  if (p == "exists" || p == "absent") {
    out.predicate = p == "exists" ? k::exists : k::absent;
    if (!v.IsScalar() || v.Scalar() != "true")
      r.fail(v, fmt::format("{} must be `true`", name),
             p == "exists" ? "to require that the file is missing, write `absent: true`"
                           : "to require that the file exists, write `exists: true`");
  } else if (p == "equals" || p == "contains") {
    out.predicate = p == "equals" ? k::equals : k::contains;
    if (auto s = r.string(v, name, p == "equals")) out.text = *s;
  } else if (p == "matches") {
    out.predicate = k::matches;
    if (auto re = r.regex(v, name)) out.regex = std::move(*re);
  } else if (p == "json") {
    out.predicate = k::json;
    static constexpr std::string_view jk[] = {"pointer", "equals"};
    auto jf = r.mapping(v, name, jk, jk);
    if (!jf) return;
    if (jf->has("pointer")) {
      if (auto ptr = r.string(jf->get("pointer"), name + ".pointer", true)) {
        try {
          json::json_pointer check(*ptr);
          out.pointer = *ptr;
        } catch (const json::exception& e) {
          r.fail(jf->get("pointer"),
                 fmt::format("{}.pointer '{}' is not a JSON pointer", name, *ptr),
                 "write it like /a/b/0 (RFC 6901), or \"\" for the whole document");
        }
      }
    }
    if (jf->has("equals")) out.expected = r.to_json(jf->get("equals"));
  }
}

// git: {paths: [...], state: changed | unchanged}.
void parse_git_check(reader& r, const YAML::Node& n, const std::string& what, git_check& out) {
  static constexpr std::string_view known[] = {"paths", "state"};
  auto f = r.mapping(n, what, known, known);
  if (!f) return;
  if (f->has("paths")) {
    YAML::Node list = f->get("paths");
    if (auto paths = r.string_list(list, what + ".paths")) {
      for (size_t i = 0; i < paths->size(); ++i) {
        if (r.relative_path(list[i], fmt::format("{}.paths[{}]", what, i)))
          out.paths.push_back((*paths)[i]);
      }
    }
  }
  if (f->has("state")) {
    if (auto s = r.string(f->get("state"), what + ".state")) {
      if (*s == "changed")
        out.state = git_check::state_kind::changed;
      else if (*s == "unchanged")
        out.state = git_check::state_kind::unchanged;
      else
        r.fail(f->get("state"), fmt::format("{}.state '{}' is not a git state", what, *s),
               "write `changed` or `unchanged`");
    }
  }
}

// transcript: exactly one of command_matches, final_message_matches, tool_used,
// forbid_command, max_steps.
void parse_transcript_check(reader& r, const YAML::Node& n, const std::string& what,
                            transcript_check& out) {
  static constexpr std::string_view known[] = {"command_matches", "final_message_matches",
                                               "tool_used", "forbid_command", "max_steps"};
  auto f = r.mapping(n, what, known, {});
  if (!f) return;
  if (f->entries.size() != 1) {
    r.fail(n,
           f->entries.empty()
               ? fmt::format("{} has no predicate", what)
               : fmt::format("{} has {} predicates; it needs exactly one", what, f->entries.size()),
           fmt::format("use exactly one of {}", fmt::join(known, ", ")));
    return;
  }
  const auto& [k, v] = f->entries.front();
  std::string name = fmt::format("{}.{}", what, k);
  using pk = transcript_check::predicate_kind;
  if (k == "max_steps") {
    out.predicate = pk::max_steps;
    if (auto m = r.positive_integer(v, name)) out.max_steps = *m;
    return;
  }
  if (k == "tool_used") {
    out.predicate = pk::tool_used;
    if (auto s = r.string(v, name)) out.tool = *s;
    return;
  }
  out.predicate = k == "command_matches"         ? pk::command_matches
                  : k == "final_message_matches" ? pk::final_message_matches
                                                 : pk::forbid_command;
  if (auto re = r.regex(v, name)) out.regex = std::move(*re);
}

// tests: {command, patch, report: pytest | {junit: PATH}, fail_to_pass: [...], pass_to_pass}
void parse_tests_check(reader& r, const YAML::Node& n, const std::string& what, tests_check& out) {
  static constexpr std::string_view known[] = {"command", "patch", "report", "fail_to_pass",
                                               "pass_to_pass"};
  static constexpr std::string_view required[] = {"command"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return;
  if (f->has("command")) {
    if (auto s = r.string(f->get("command"), what + ".command")) out.command = *s;
  }
  if (f->has("patch")) {
    YAML::Node p = f->get("patch");
    if (auto s = r.string(p, what + ".patch")) {
      // The patch is the grader's: under grader/, which the agent never sees.
      fs::path rel(*s);
      auto it = rel.begin();
      if (it == rel.end() || *it != "grader" || !is_safe_relative(rel) ||
          rel.lexically_normal() == "grader")
        r.fail(p, fmt::format("{}.patch '{}' must be a file under grader/", what, *s),
               "put the patch in the fixture's grader/ directory (hidden from the agent) and "
               "write e.g. `patch: grader/test.patch`");
      else
        out.patch = rel.lexically_relative("grader").generic_string();
    }
  }
  if (f->has("report")) {
    YAML::Node rep = f->get("report");
    if (rep.IsScalar() && rep.Scalar() == "pytest") {
      out.report = tests_check::report_kind::pytest;
    } else if (rep.IsMap()) {
      static constexpr std::string_view report_keys[] = {"junit", "format"};
      auto jf = r.mapping(rep, what + ".report", report_keys, {});
      if (jf && jf->has("junit") == jf->has("format")) {
        r.fail(rep, fmt::format("{}.report takes one of `junit` and `format`", what),
               "`{format: NAME}` reads the command's output with that log parser; `{junit: "
               "PATH}` the XML report the command writes");
      } else if (jf && jf->has("junit")) {
        if (auto p = r.relative_path(jf->get("junit"), what + ".report.junit")) {
          out.report = tests_check::report_kind::junit;
          out.junit_path = *p;
        }
      } else if (jf) {
        YAML::Node fmt_node = jf->get("format");
        if (auto s = r.string(fmt_node, what + ".report.format")) {
          if (std::find(std::begin(test_log_formats), std::end(test_log_formats), *s) ==
              std::end(test_log_formats))
            r.fail(fmt_node, fmt::format("{}.report.format '{}' is no log format", what, *s),
                   fmt::format("one of {}", fmt::join(test_log_formats, ", ")));
          else
            out.log_format = *s;
        }
      }
    } else {
      r.fail(
          rep,
          fmt::format("{}.report must be `pytest`, `{{format: NAME}}` or `{{junit: PATH}}`", what),
          "pytest reads the command's output (run pytest with -rA); format: NAME reads it with "
          "the log parser NAME (django, sympy, ...: docs/fixture-format.md); junit reads the "
          "XML report the command writes at PATH (relative to /workspace)");
    }
  }
  auto names = [&](const char* key, std::vector<std::string>& into) {
    if (!f->has(key)) return;
    if (auto l = r.string_list(f->get(key), fmt::format("{}.{}", what, key), true)) into = *l;
  };
  names("fail_to_pass", out.fail_to_pass);
  names("pass_to_pass", out.pass_to_pass);
  if (out.fail_to_pass.empty() && out.pass_to_pass.empty() && f->has("command"))
    r.fail(n, fmt::format("{} names no test", what),
           "list the tests the change must make pass in fail_to_pass (and those that must keep "
           "passing in pass_to_pass)");
}

// evidence: [final_message | diff | commands | "file:PATH"], each named once.
void parse_evidence(reader& r, const YAML::Node& e, const std::string& what, judge_check& out) {
  auto l = r.string_list(e, what + ".evidence", true);
  if (!l) return;
  std::set<std::string> seen;
  for (size_t i = 0; i < l->size(); ++i) {
    const std::string& s = (*l)[i];
    judge_check::evidence_spec item;
    using ek = judge_check::evidence_kind;
    if (s == "final_message") {
      item.kind = ek::final_message;
    } else if (s == "diff") {
      item.kind = ek::diff;
    } else if (s == "commands") {
      item.kind = ek::commands;
    } else if (s.starts_with("file:")) {
      item.kind = ek::file;
      item.path = s.substr(5);
      if (item.path.empty() || !is_safe_relative(fs::path(item.path))) {
        r.fail(
            e[i],
            fmt::format("{}.evidence[{}] '{}' must name a relative path without '..'", what, i, s),
            "paths are relative to /workspace, e.g. file:NOTES.md");
        continue;
      }
    } else {
      r.fail(e[i], fmt::format("{}.evidence[{}] '{}' is not a kind of evidence", what, i, s),
             "use final_message, diff, commands or file:PATH");
      continue;
    }
    if (!seen.insert(item.label()).second) {
      r.fail(e[i], fmt::format("{}.evidence names '{}' twice", what, s), "keep one");
      continue;
    }
    out.evidence.push_back(std::move(item));
  }
}

// judge: {propositions: [...], evidence: [final_message | diff | commands | "file:PATH"],
// judge: NAME}. Whether NAME is one of the suite's judges is checked with the suite
// (check_judges in judges.h): a fixture alone does not know them.
void parse_judge_check(reader& r, const YAML::Node& n, const std::string& what, judge_check& out) {
  static constexpr std::string_view known[] = {"propositions", "evidence", "judge"};
  static constexpr std::string_view required[] = {"propositions"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return;
  out.judge_where = r.at(n);
  if (f->has("propositions")) {
    YAML::Node p = f->get("propositions");
    if (auto l = r.string_list(p, what + ".propositions")) {
      out.propositions = *l;
      if (l->size() > max_judge_propositions)
        r.fail(p,
               fmt::format("{}.propositions has {} entries; at most {}", what, l->size(),
                           max_judge_propositions),
               "split them into several judge checks");
      for (size_t i = 0; i < l->size(); ++i)
        if ((*l)[i].size() > max_judge_proposition_bytes)
          r.fail(p[i], fmt::format("{}.propositions[{}] is longer than {} bytes", what, i,
                                   max_judge_proposition_bytes));
    }
  }
  if (f->has("evidence")) parse_evidence(r, f->get("evidence"), what, out);
  if (f->has("judge")) {
    out.judge_where = r.at(f->get("judge"));
    if (auto s = r.string(f->get("judge"), what + ".judge")) out.judge = *s;
  }
}

// One check: {id, weight, and exactly one kind with its own keys}.
std::optional<check_spec> parse_check(reader& r, const YAML::Node& n, size_t index) {
  static constexpr std::string_view known[] = {"id",  "weight",     "shell", "file",
                                               "git", "transcript", "tests", "judge"};
  static constexpr std::string_view required[] = {"id"};
  std::string what = fmt::format("checks[{}]", index);
  auto f = r.mapping(n, what, known, required);
  if (!f) return std::nullopt;
  check_spec c;
  c.where = r.at(n);
  if (f->has("id")) {
    if (auto id = r.string(f->get("id"), what + ".id")) {
      c.id = *id;
      if (!is_valid_id(*id, true))
        r.fail(f->get("id"), fmt::format("check id '{}' is not a valid id", *id),
               "use letters, digits, '.', '_' and '-', starting with a letter or digit");
      else
        what = fmt::format("checks.{}", *id);
    }
  }
  if (f->has("weight")) {
    if (auto w = r.number(f->get("weight"), what + ".weight")) {
      if (*w < 0)
        r.fail(f->get("weight"), fmt::format("{}.weight must not be negative", what),
               "0 makes the check informational");
      c.weight = *w;
    }
  }
  std::vector<std::string> kinds;
  for (const auto& [k, v] : f->entries)
    if (k != "id" && k != "weight") kinds.push_back(k);
  if (kinds.size() != 1) {
    r.fail(n,
           kinds.empty() ? fmt::format("{} says nothing to check", what)
                         : fmt::format("{} has {} kinds ({}); it needs exactly one", what,
                                       kinds.size(), fmt::join(kinds, ", ")),
           "give exactly one of shell, file, git, transcript, tests, judge");
    return c;
  }
  const std::string& k = kinds.front();
  YAML::Node v = f->get(k);
  if (k == "shell") {
    c.kind = check_kind::shell;
    if (auto s = r.string(v, what + ".shell")) c.shell = *s;
  } else if (k == "file") {
    c.kind = check_kind::file;
    parse_file_check(r, v, what + ".file", c.file);
  } else if (k == "git") {
    c.kind = check_kind::git;
    parse_git_check(r, v, what + ".git", c.git);
  } else if (k == "tests") {
    c.kind = check_kind::tests;
    parse_tests_check(r, v, what + ".tests", c.tests);
  } else if (k == "judge") {
    c.kind = check_kind::judge;
    parse_judge_check(r, v, what + ".judge", c.judge);
  } else {
    c.kind = check_kind::transcript;
    parse_transcript_check(r, v, what + ".transcript", c.transcript);
  }
  return c;
}

}  // namespace

void parse_checks(reader& r, const YAML::Node& checks, fixture_spec& spec) {
  if (!checks.IsSequence() || checks.size() == 0) {
    r.fail(checks,
           checks.IsSequence() ? std::string("checks must not be empty")
                               : fmt::format("checks must be a list, found {}", type_name(checks)),
           "add at least one check: shell, file, git, transcript, tests or judge");
    return;
  }
  std::map<std::string, source_location> ids;
  double total = 0;
  size_t errors_before = r.error_count();
  for (size_t i = 0; i < checks.size(); ++i) {
    auto c = parse_check(r, checks[i], i);
    if (!c) continue;
    if (!c->id.empty()) {
      auto [it, fresh] = ids.emplace(c->id, c->where);
      if (!fresh)
        r.fail(
            c->where, fmt::format("check id '{}' is used twice", c->id),
            fmt::format("the first is at {}; give each check its own id", it->second.to_string()));
    }
    total += std::max(c->weight, 0.0);
    spec.checks.push_back(std::move(*c));
  }
  if (!spec.checks.empty() && total <= 0 && r.error_count() == errors_before)
    r.fail(checks, "every check has weight 0", "give at least one check a positive weight");
}

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
