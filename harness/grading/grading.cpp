// Check evaluation and the verdict (see grading.h).
#include "harness/grading/grading.h"

#include "harness/plan/plan.h"

#include <regex>

#include "sandbox/base/fs.h"
#include "sandbox/base/json_checks.h"

namespace evalbox::harness {

namespace {

using type_kind = beneath_entry::type_kind;

std::string shorten(std::string s, size_t max = 200) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

bool regex_search(const std::string& pattern, const std::string& text, std::string& err) {
  try {
    return std::regex_search(text, std::regex(pattern, std::regex::ECMAScript));
  } catch (const std::regex_error& e) {
    err = fmt::format("invalid regex '{}': {}", pattern, e.what());
    return false;
  }
}

}  // namespace

check_result evaluate_file_check(const check_spec& c, const std::filesystem::path& after) {
  check_result r{c.id, c.kind, c.weight, false, ""};
  const auto& f = c.file;
  bool need_content = f.predicate != file_check::predicate_kind::exists &&
                      f.predicate != file_check::predicate_kind::absent;
  auto e = lookup_beneath(after, f.path, /*follow_final=*/true, need_content);
  if (!e) {
    r.detail = fmt::format("{}: {}", f.path, e.error().message);
    return r;
  }
  bool exists = e->type != type_kind::missing;
  using pk = file_check::predicate_kind;
  switch (f.predicate) {
    case pk::exists:
      r.passed = exists;
      r.detail = exists ? "" : fmt::format("{} does not exist", f.path);
      return r;
    case pk::absent:
      r.passed = !exists;
      r.detail = exists ? fmt::format("{} exists", f.path) : "";
      return r;
    default:
      break;
  }
  if (e->type != type_kind::regular) {
    r.detail = exists ? fmt::format("{} is not a regular file", f.path)
                      : fmt::format("{} does not exist", f.path);
    return r;
  }
  const std::string& content = e->content;
  switch (f.predicate) {
    case pk::equals:
      r.passed = content == f.text;
      if (!r.passed) r.detail = fmt::format("{} is \"{}\"", f.path, shorten(content, 80));
      break;
    case pk::contains:
      r.passed = content.find(f.text) != std::string::npos;
      if (!r.passed)
        r.detail = fmt::format("{} does not contain \"{}\"", f.path, shorten(f.text, 80));
      break;
    case pk::matches: {
      std::string err;
      r.passed = regex_search(f.text, content, err);
      r.detail = !err.empty()
                     ? err
                     : (r.passed ? "" : fmt::format("{} does not match /{}/", f.path, f.text));
      break;
    }
    case pk::json: {
      // The agent wrote this file: a document nested too deep to dump is refused, not crashed on.
      if (json_too_deep(content)) {
        r.detail = fmt::format("{} is not valid JSON (nested deeper than {} levels)", f.path,
                               max_json_depth);
        break;
      }
      json doc = json::parse(content, nullptr, false);
      if (doc.is_discarded()) {
        r.detail = fmt::format("{} is not valid JSON", f.path);
        break;
      }
      try {
        const json& at = doc.at(json::json_pointer(f.pointer));
        r.passed = at == f.expected;
        if (!r.passed)
          r.detail = fmt::format("{}{} is {}, expected {}", f.path, f.pointer,
                                 shorten(at.dump(), 80), shorten(f.expected.dump(), 80));
      } catch (const json::exception&) {
        r.detail = fmt::format("{} has nothing at {}", f.path, f.pointer);
      }
      break;
    }
    default:
      break;
  }
  return r;
}

namespace {

// The workspace's top-level .gitignore (as it was after setup), in the subset of gitignore
// that fixtures need: one glob per line, '#' comments, a trailing '/' for directories, and a
// pattern without '/' matching any path component. Negations are not supported (ignored).
struct ignore_rules {
  std::vector<std::string> patterns;

  static ignore_rules load(const std::filesystem::path& root) {
    ignore_rules rules;
    auto e = lookup_beneath(root, ".gitignore", false, true, 1 << 20);
    if (!e || e->type != beneath_entry::type_kind::regular) return rules;
    size_t start = 0;
    const std::string& text = e->content;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      start = end + 1;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line[0] == '#' || line[0] == '!') continue;
      if (line.back() == '/') line.pop_back();
      if (!line.empty() && line[0] == '/') line.erase(0, 1);
      if (!line.empty()) rules.patterns.push_back(line);
    }
    return rules;
  }

  [[nodiscard]] bool ignored(const std::string& rel) const {
    for (const auto& p : patterns) {
      if (p.find('/') != std::string::npos) {
        if (glob(p, rel) || rel.rfind(p + "/", 0) == 0) return true;
        continue;
      }
      size_t start = 0;
      while (start <= rel.size()) {
        size_t end = rel.find('/', start);
        if (end == std::string::npos) end = rel.size();
        if (glob(p, rel.substr(start, end - start))) return true;
        start = end + 1;
      }
    }
    return false;
  }

  static bool glob(std::string_view p, std::string_view t) { return glob_match(p, t); }
};

}  // namespace

check_result evaluate_git_check(const check_spec& c, const std::filesystem::path& before,
                                const std::filesystem::path& after) {
  check_result r{c.id, c.kind, c.weight, false, ""};
  // Like `git status`: files the workspace's .gitignore ignores are not changes.
  const ignore_rules rules = ignore_rules::load(before);
  std::vector<std::string> differing;
  for (const auto& p : c.git.paths) {
    auto a = list_beneath(before, p);
    auto b = list_beneath(after, p);
    if (!a || !b) {
      r.detail = fmt::format("{}: {}", p, (!a ? a.error() : b.error()).message);
      return r;
    }
    std::vector<std::string> all = *a;
    all.insert(all.end(), b->begin(), b->end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (const auto& f : all) {
      if (rules.ignored(f)) continue;
      auto x = lookup_beneath(before, f, false, true);
      auto y = lookup_beneath(after, f, false, true);
      if (!x || !y) {
        r.detail = fmt::format("{}: {}", f, (!x ? x.error() : y.error()).message);
        return r;
      }
      if (x->type != y->type || x->content != y->content ||
          (x->type == type_kind::regular && x->mode != y->mode))
        differing.push_back(f);
    }
  }
  bool changed = !differing.empty();
  r.passed = (c.git.state == git_check::state_kind::changed) == changed;
  if (!r.passed) {
    if (changed) {
      std::string list;
      for (size_t i = 0; i < differing.size() && i < 5; ++i) list += (i ? ", " : "") + differing[i];
      r.detail = fmt::format("changed: {}{}", list, differing.size() > 5 ? ", ..." : "");
    } else {
      r.detail = "unchanged since setup";
    }
  }
  return r;
}

check_result evaluate_transcript_check(const check_spec& c, const transcript& t) {
  check_result r{c.id, c.kind, c.weight, false, ""};
  const auto& tc = c.transcript;
  using pk = transcript_check::predicate_kind;
  std::string err;
  switch (tc.predicate) {
    case pk::command_matches:
      for (const auto& cmd : commands(t))
        if (regex_search(tc.pattern, cmd, err)) r.passed = true;
      if (!r.passed)
        r.detail = err.empty() ? fmt::format("no command matched /{}/", tc.pattern) : err;
      break;
    case pk::forbid_command:
      r.passed = true;
      for (const auto& cmd : commands(t))
        if (regex_search(tc.pattern, cmd, err)) {
          r.passed = false;
          r.detail = fmt::format("forbidden command: {}", shorten(cmd, 120));
          break;
        }
      if (!err.empty()) {
        r.passed = false;
        r.detail = err;
      }
      break;
    case pk::final_message_matches: {
      auto msg = final_message(t);
      r.passed = msg && regex_search(tc.pattern, *msg, err);
      if (!r.passed)
        r.detail = !err.empty()
                       ? err
                       : (msg ? fmt::format("final message does not match /{}/", tc.pattern)
                              : "no final message");
      break;
    }
    case pk::tool_used: {
      auto tools = tools_used(t);
      r.passed = std::find(tools.begin(), tools.end(), tc.pattern) != tools.end();
      if (!r.passed) r.detail = fmt::format("tool '{}' was not used", tc.pattern);
      break;
    }
    case pk::max_steps: {
      int n = step_count(t);
      r.passed = static_cast<uint64_t>(n) <= tc.max_steps;
      if (!r.passed) r.detail = fmt::format("{} steps > {}", n, tc.max_steps);
      break;
    }
  }
  return r;
}

grading_result grade(const grading_inputs& in) {
  grading_result g;
  double total = 0, passed = 0;
  for (const auto& c : in.fixture.checks) {
    check_result r;
    switch (c.kind) {
      case check_kind::file:
        r = evaluate_file_check(c, in.after);
        break;
      case check_kind::git:
        r = evaluate_git_check(c, in.before, in.after);
        break;
      case check_kind::transcript:
        r = evaluate_transcript_check(c, in.transcript_);
        break;
      case check_kind::shell: {
        r = check_result{c.id, c.kind, c.weight, false, ""};
        auto out = in.run_shell ? in.run_shell(c)
                                : result<shell_check_outcome>(make_error(
                                      error_kind::internal, "no sandbox for shell checks"));
        if (!out) {
          g.ok = false;
          g.error = fmt::format("check {}: {}", c.id, out.error().message);
          r.detail = out.error().message;
        } else {
          r.passed = out->exited && out->exit_code == 0;
          if (!r.passed)
            r.detail = out->exited
                           ? fmt::format("exit {}: {}", out->exit_code, shorten(out->output))
                           : fmt::format("{}: {}", out->outcome, shorten(out->output));
        }
        break;
      }
    }
    total += c.weight;
    if (r.passed) passed += c.weight;
    g.checks.push_back(std::move(r));
  }
  g.score = total > 0 ? passed / total : 0;
  g.passed = g.ok && g.score + 1e-12 >= in.fixture.threshold;
  return g;
}

json grading_result::to_json(double threshold) const {
  json checks_json = json::array();
  for (const auto& c : checks)
    checks_json.push_back({{"id", c.id},
                           {"kind", std::string(harness::to_string(c.kind))},
                           {"weight", c.weight},
                           {"passed", c.passed},
                           {"detail", c.detail}});
  json j = {{"status", ok ? "completed" : "error"},
            {"checks", checks_json},
            {"score", score},
            {"threshold", threshold}};
  j["error"] = ok ? json(nullptr) : json(error);
  return j;
}

}  // namespace evalbox::harness
