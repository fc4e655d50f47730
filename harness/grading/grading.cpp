// Check evaluation and the verdict (see grading.h).
#include "harness/grading/grading.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <set>
#include <stdexcept>

#include "base/fs.h"
#include "base/json_checks.h"
#include "base/units.h"
#include "harness/plan/plan.h"
#include "harness/transcripts/read_limits.h"

namespace evalbox::harness {
inline namespace grading {

namespace {

using type_kind = beneath_entry::type_kind;

std::string shorten(std::string s, size_t max = 200) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

// Searches with the pattern compiled at load (pattern.h: linear in `text`, bounded memory).
// A pattern that was never compiled is a broken invariant: the check cannot be evaluated,
// which `r.error` says.
bool regex_search(const pattern& p, std::string_view text, check_result& r) {
  auto found = p.search(text);
  if (!found) {
    r.error = found.error().message;
    return false;
  }
  return *found;
}

// With the fault "check-throw:<id>", evaluating check <id> throws, as a bug in an evaluator or
// an exhausted allocator would.
void inject_fault(const check_spec& c, std::string_view fault) {
  constexpr std::string_view check_throw = "check-throw:";
  if (fault.starts_with(check_throw) && fault.substr(check_throw.size()) == c.id)
    throw std::runtime_error(fmt::format("fault injected by EVALBOX_FAULT={}", fault));
}

// A Harbor task's verifier: passes when its reward reaches the fixture's threshold; its score is
// the reward (cut to 0..1), so that a reward of 0.75 counts as three quarters of the task.
check_result evaluate_verifier(const check_spec& c, const grading_inputs& in) {
  check_result r{c.id, c.kind, c.weight, false, ""};
  auto out = in.run_verifier ? in.run_verifier(c)
                             : result<verifier_outcome>(
                                   make_error(error_kind::internal, "no sandbox for the verifier"));
  if (!out) {
    r.error = out.error().message;
    return r;
  }
  if (out->rewards.empty()) {
    r.error = fmt::format("{} holds no reward", out->source);
    return r;
  }
  const double reward = run_reward(out->rewards);
  r.rewards = out->rewards;
  r.score = std::clamp(reward, 0.0, 1.0);
  r.passed = reward + 1e-12 >= in.fixture.threshold;
  std::string all;
  for (const auto& [k, v] : out->rewards)
    all += fmt::format("{}{} {}", all.empty() ? "" : ", ", k, v);
  r.detail =
      fmt::format("{}: {}{}", out->source, all,
                  r.passed ? "" : fmt::format(" (below the threshold {})", in.fixture.threshold));
  return r;
}

// One check, evaluated in-process or through the shell-check sandbox.
check_result evaluate(const check_spec& c, const grading_inputs& in, std::string_view fault) {
  inject_fault(c, fault);
  switch (c.kind) {
    case check_kind::judge:
      return evaluate_judge_check(c, in);
    case check_kind::file:
      return evaluate_file_check(c, in.after);
    case check_kind::git:
      return evaluate_git_check(c, in.before, in.after);
    case check_kind::transcript:
      return evaluate_transcript_check(c, in.run_transcript);
    case check_kind::verifier:
      return evaluate_verifier(c, in);
    case check_kind::tests: {
      auto out = in.run_tests ? in.run_tests(c)
                              : result<tests_check_outcome>(make_error(
                                    error_kind::internal, "no sandbox for tests checks"));
      if (!out) {
        check_result r{c.id, c.kind, c.weight, false, ""};
        r.error = out.error().message;
        return r;
      }
      return evaluate_tests_check(c, *out);
    }
    case check_kind::shell:
      break;
  }
  check_result r{c.id, c.kind, c.weight, false, ""};
  auto out = in.run_shell ? in.run_shell(c)
                          : result<shell_check_outcome>(
                                make_error(error_kind::internal, "no sandbox for shell checks"));
  if (!out) {
    r.error = out.error().message;
    return r;
  }
  r.passed = out->exited && out->exit_code == 0;
  if (!r.passed)
    r.detail = out->exited ? fmt::format("exit {}: {}", out->exit_code, shorten(out->output))
                           : fmt::format("{}: {}", out->outcome, shorten(out->output));
  return r;
}

}  // namespace

check_result evaluate_file_check(const check_spec& c, const std::filesystem::path& after) {
  check_result r{c.id, c.kind, c.weight, false, ""};
  const auto& f = c.file;
  bool need_content = f.predicate != file_check::predicate_kind::exists &&
                      f.predicate != file_check::predicate_kind::absent;
  auto e = lookup_beneath(after, f.path, /*follow_final=*/true, /*read_content=*/false);
  if (e && need_content && e->type == type_kind::regular) {
    if (e->size > max_checked_file_bytes) {
      r.detail = fmt::format(
          "{} is {} bytes, larger than {}: evalbox reads at most that of a "
          "file for a check",
          f.path, e->size, format_bytes(max_checked_file_bytes));
      return r;
    }
    e = lookup_beneath(after, f.path, /*follow_final=*/true, /*read_content=*/true,
                       max_checked_file_bytes);
  }
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
    case pk::matches:
      r.passed = regex_search(f.regex, content, r);
      if (!r.passed) r.detail = fmt::format("{} does not match /{}/", f.path, f.regex.source());
      break;
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
    auto a = list_beneath(before, p, max_git_check_files);
    auto b = list_beneath(after, p, max_git_check_files);
    if (!a || !b) {
      const error& e = !a ? a.error() : b.error();
      const bool past_cap = e.kind == error_kind::invalid_argument &&
                            e.message.find(" holds more than ") != std::string::npos;
      r.detail = past_cap ? fmt::format(
                                "{}: evalbox compares at most {} files under one path of a "
                                "git check",
                                e.message, max_git_check_files)
                          : fmt::format("{}: {}", p, e.message);
      return r;
    }
    std::vector<std::string> all = *a;
    all.insert(all.end(), b->begin(), b->end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (const auto& f : all) {
      if (rules.ignored(f)) continue;
      auto x = lookup_beneath(before, f, false, false);
      auto y = lookup_beneath(after, f, false, false);
      if (x && y && x->type == type_kind::regular && y->type == type_kind::regular &&
          x->size == y->size) {
        // Same type and size: only the content can tell (files of different sizes differ
        // without being read).
        if (x->size > max_checked_file_bytes) {
          r.detail = fmt::format(
              "{} is {} bytes, larger than {}: evalbox compares at most that "
              "of a file for a check",
              f, x->size, format_bytes(max_checked_file_bytes));
          return r;
        }
        x = lookup_beneath(before, f, false, true, max_checked_file_bytes);
        y = lookup_beneath(after, f, false, true, max_checked_file_bytes);
      }
      if (!x || !y) {
        r.detail = fmt::format("{}: {}", f, (!x ? x.error() : y.error()).message);
        return r;
      }
      if (x->type != y->type || x->size != y->size || x->content != y->content ||
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
  switch (tc.predicate) {
    case pk::command_matches:
      for (const auto& cmd : commands(t)) {
        if (regex_search(tc.regex, cmd, r)) {
          r.passed = true;
          break;
        }
      }
      if (!r.passed) r.detail = fmt::format("no command matched /{}/", tc.regex.source());
      break;
    case pk::forbid_command:
      r.passed = true;
      for (const auto& cmd : commands(t)) {
        if (regex_search(tc.regex, cmd, r)) {
          r.passed = false;
          r.detail = fmt::format("forbidden command: {}", shorten(cmd, 120));
          break;
        }
      }
      break;
    case pk::final_message_matches: {
      auto msg = final_message(t);
      r.passed = msg && regex_search(tc.regex, *msg, r);
      if (!r.passed)
        r.detail = msg ? fmt::format("final message does not match /{}/", tc.regex.source())
                       : "no final message";
      break;
    }
    case pk::tool_used: {
      auto tools = tools_used(t);
      r.passed = std::find(tools.begin(), tools.end(), tc.tool) != tools.end();
      if (!r.passed) r.detail = fmt::format("tool '{}' was not used", tc.tool);
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

namespace {

std::optional<double> parse_reward_number(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

result<verifier_outcome> read_reward(const std::optional<std::string>& reward_txt,
                                     const std::optional<std::string>& reward_json) {
  verifier_outcome out;
  if (reward_txt) {
    out.source = "reward.txt";
    auto v = parse_reward_number(*reward_txt);
    if (!v)
      return make_error(error_kind::invalid_argument,
                        "/logs/verifier/reward.txt holds \"{}\", not one number",
                        shorten(*reward_txt, 60));
    out.rewards["reward"] = *v;
    return out;
  }
  if (!reward_json)
    return make_error(error_kind::not_found,
                      "the verifier wrote neither /logs/verifier/reward.txt nor reward.json");
  out.source = "reward.json";
  json doc =
      json_too_deep(*reward_json) ? json(nullptr) : json::parse(*reward_json, nullptr, false);
  if (!doc.is_object() || doc.empty() || doc.size() > 256)
    return make_error(error_kind::invalid_argument,
                      "/logs/verifier/reward.json is not an object of numbers (it holds \"{}\")",
                      shorten(*reward_json, 60));
  for (const auto& [k, v] : doc.items()) {
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return make_error(error_kind::invalid_argument,
                        "/logs/verifier/reward.json: \"{}\" is {}, not a number", shorten(k, 60),
                        shorten(v.dump(), 60));
    out.rewards[k] = v.get<double>();
  }
  return out;
}

double run_reward(const std::map<std::string, double>& rewards) {
  if (auto it = rewards.find("reward"); it != rewards.end()) return it->second;
  double sum = 0;
  for (const auto& [k, v] : rewards) sum += v;
  return rewards.empty() ? 0 : sum / static_cast<double>(rewards.size());
}

check_result evaluate_tests_check(const check_spec& c, const tests_check_outcome& out) {
  check_result r{c.id, c.kind, c.weight, false, ""};
  const auto& t = c.tests;
  r.patch = t.patch.empty() ? "none" : out.patch_applied ? "applied" : "failed";
  test_report report;
  std::string problem;
  if (!out.patch_applied) {
    // The agent's workspace no longer takes the tests (the fixture's own untouched workspace
    // does: `evalbox fixture test` checks it), so this is the task's failure: every listed
    // test counts as missing.
    problem = fmt::format("the test patch does not apply to the final workspace: {}",
                          shorten(out.patch_output, 300));
  } else if (!out.report_error.empty()) {
    problem = out.report_error;
  } else if (t.report == tests_check::report_kind::junit) {
    auto parsed = parse_junit_xml(out.report);
    if (parsed)
      report = std::move(*parsed);
    else
      problem = fmt::format("{}: {}", t.junit_path, parsed.error().message);
  } else {
    // The command's output, read by the fixture's log parser (validated when it was loaded).
    report = parse_test_log(test_log_format_named(t.log_format).value_or(test_log_format::pytest),
                            out.report);
  }
  tests_grade g = grade_tests(report, t.fail_to_pass, t.pass_to_pass);
  r.passed = g.resolution == "full";
  r.score = g.score;
  if (!r.passed) {
    std::string failing;
    size_t shown = 0;
    for (const auto* list : {&g.fail_to_pass, &g.pass_to_pass})
      for (const auto& x : *list)
        if (!x.ok && shown++ < 3)
          failing += fmt::format("{}{} {}", failing.empty() ? "" : ", ", x.id, x.status);
    r.detail =
        fmt::format("{}: fail_to_pass {}/{} pass, pass_to_pass {}/{} pass", g.resolution,
                    g.f2p_passed, t.fail_to_pass.size(), g.p2p_passed, t.pass_to_pass.size());
    if (!failing.empty())
      r.detail += fmt::format("; not passing: {}{}", failing, shown > 3 ? ", ..." : "");
    if (!out.exited) r.detail += fmt::format("; the test command ended: {}", out.outcome);
    if (!problem.empty()) r.detail = problem + "; " + r.detail;
  }
  r.tests = std::move(g);
  return r;
}

namespace {

// What the record keeps of one raw answer.
constexpr size_t max_recorded_answer_bytes = 16u << 10;

json tokens_json(const usage& u) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return {{"input_tokens", opt(u.input_tokens)},
          {"output_tokens", opt(u.output_tokens)},
          {"cached_input_tokens", opt(u.cached_input_tokens)},
          {"reasoning_tokens", opt(u.reasoning_tokens)}};
}

}  // namespace

std::vector<evidence_item> gather_evidence(const judge_check& j, const grading_inputs& in,
                                           size_t max_bytes) {
  std::vector<evidence_item> out;
  using ek = judge_check::evidence_kind;
  for (const auto& e : j.evidence) {
    std::string text;
    switch (e.kind) {
      case ek::final_message: {
        auto m = final_message(in.run_transcript);
        text = m ? *m : "(the agent gave no final message)";
        break;
      }
      case ek::diff:
        text = in.diff.empty() ? "(the agent changed no file)" : in.diff;
        break;
      case ek::commands: {
        for (const auto& cmd : commands(in.run_transcript)) {
          text += "$ " + cmd + "\n";
          if (text.size() > max_bytes) break;  // bound_evidence cuts it and says so
        }
        if (text.empty()) text = "(the agent ran no command)";
        break;
      }
      case ek::file: {
        // Read beneath the final workspace only (symlinks never lead out of it), bounded.
        auto found = lookup_beneath(in.after, e.path, false, false);
        if (!found || found->type == type_kind::missing) {
          text = "(the file does not exist)";
        } else if (found->type != type_kind::regular) {
          text = "(not a regular file)";
        } else if (found->size > max_checked_file_bytes) {
          text = fmt::format("(the file is {} bytes: too large to show)", found->size);
        } else {
          auto read = lookup_beneath(in.after, e.path, false, true, max_checked_file_bytes);
          text =
              read ? read->content : fmt::format("(could not be read: {})", read.error().message);
        }
        break;
      }
    }
    out.push_back({e.label(), bound_evidence(text, max_bytes)});
  }
  return out;
}

check_result evaluate_judge_check(const check_spec& c, const grading_inputs& in) {
  check_result r{c.id, c.kind, c.weight, false, ""};
  const judge_check& jc = c.judge;
  const judge_spec* judge = nullptr;
  if (in.judges)
    if (auto it = in.judges->find(jc.judge); it != in.judges->end()) judge = &it->second;
  if (!judge) {
    r.error = fmt::format("no judge named '{}' (give the suite's judges:)", jc.judge);
    return r;
  }
  r.judge_model = judge->model;
  const auto evidence = gather_evidence(jc, in, judge->max_evidence_bytes);
  json record{{"judge", judge->name},   {"adapter", std::string(to_string(judge->adapter))},
              {"model", judge->model},  {"evidence", json::array()},
              {"votes", json::array()}, {"propositions", json::array()}};
  for (const auto& e : evidence)
    record["evidence"].push_back({{"label", e.label}, {"bytes", e.text.size()}});
  std::vector<std::vector<judge_verdict>> votes;
  std::vector<std::string> ids;
  for (int v = 0; v < judge->votes; ++v) {
    // Each vote is its own request with its own nonce: independent answers.
    const judge_prompt prompt = build_judge_prompt(jc.propositions, evidence, make_nonce());
    ids = prompt.ids;
    json vote{{"nonce", prompt.nonce}, {"answer", nullptr}, {"error", nullptr}};
    auto answer = in.ask_judge ? in.ask_judge(*judge, prompt)
                               : result<judge_exchange>(make_error(
                                     error_kind::internal, "no judge client for judge checks"));
    if (!answer) {
      vote["error"] = answer.error().message;
      record["votes"].push_back(std::move(vote));
      r.error = fmt::format("judge {} (vote {} of {}): {}", judge->name, v + 1, judge->votes,
                            answer.error().message);
      break;
    }
    r.judge_tokens += answer->tokens;
    r.judge_requests += answer->attempts;
    vote["answer"] = bound_evidence(answer->text, max_recorded_answer_bytes);
    vote["attempts"] = answer->attempts;
    vote["retried"] = answer->retried;
    vote["usage"] = tokens_json(answer->tokens);
    auto parsed = parse_judge_answer(answer->text, prompt.ids);
    if (!parsed) {
      vote["error"] = parsed.error().message;
      record["votes"].push_back(std::move(vote));
      // Never a pass and never the task's failure: the run is not assessed.
      r.error = fmt::format("judge {} (vote {} of {}): {}", judge->name, v + 1, judge->votes,
                            parsed.error().message);
      break;
    }
    json verdicts = json::array();
    for (const auto& x : *parsed)
      verdicts.push_back({{"id", x.id}, {"verdict", x.pass ? "pass" : "fail"}});
    vote["verdicts"] = std::move(verdicts);
    record["votes"].push_back(std::move(vote));
    votes.push_back(std::move(*parsed));
  }
  record["usage"] = tokens_json(r.judge_tokens);
  record["requests"] = r.judge_requests;
  if (r.error.empty()) {
    const auto tally = judge_majority(votes, ids);
    size_t passing = 0;
    std::string failing;
    for (size_t i = 0; i < tally.size(); ++i) {
      const auto& t = tally[i];
      record["propositions"].push_back({{"id", t.id},
                                        {"text", jc.propositions[i]},
                                        {"passed", t.passed},
                                        {"pass_votes", t.pass},
                                        {"fail_votes", t.fail},
                                        {"reasons", t.reasons}});
      if (t.passed) {
        ++passing;
      } else if (failing.size() < 400) {
        std::string reason;
        for (size_t k = 0; k < votes.size(); ++k)
          if (!votes[k][i].pass) {
            reason = votes[k][i].reason;
            break;
          }
        failing += fmt::format("{}{} failed ({} of {} votes pass): {}", failing.empty() ? "" : "; ",
                               t.id, t.pass, t.pass + t.fail, shorten(reason, 120));
      }
    }
    r.passed = passing == tally.size();
    r.score = tally.empty() ? 0.0 : static_cast<double>(passing) / tally.size();
    r.detail =
        r.passed ? fmt::format("the judge passes all {} propositions", tally.size()) : failing;
  }
  r.judge = std::move(record);
  return r;
}

grading_result grade(const grading_inputs& in) {
  grading_result g;
  double total = 0, passed = 0;
  const std::string& fault = in.fault;
  for (const auto& c : in.fixture.checks) {
    // Whatever goes wrong while evaluating one check — an error, an exception — is this run's
    // grader error (status "error", verdict not_assessed), never the end of the runner.
    check_result r;
    try {
      r = evaluate(c, in, fault);
    } catch (const std::exception& e) {
      r = check_result{c.id, c.kind, c.weight, false, ""};
      r.error = fmt::format("could not be evaluated: {}", e.what());
    } catch (...) {
      r = check_result{c.id, c.kind, c.weight, false, ""};
      r.error = "could not be evaluated: an unknown exception";
    }
    if (!r.error.empty()) {
      r.passed = false;
      r.detail = r.error;
      if (g.ok) g.error = fmt::format("check {}: {}", c.id, r.error);
      g.ok = false;
    }
    total += c.weight;
    if (r.score)
      passed += c.weight * *r.score;
    else if (r.passed)
      passed += c.weight;
    g.checks.push_back(std::move(r));
  }
  g.score = total > 0 ? passed / total : 0;
  g.passed = g.ok && g.score + 1e-12 >= in.fixture.threshold;
  // The judge's usage, apart from the candidate's; priced per check by the judge's model.
  bool cost_known = true;
  double cost = 0;
  for (const auto& c : g.checks) {
    if (c.kind != check_kind::judge || c.judge.is_null()) continue;
    g.judged = true;
    g.judge_tokens += c.judge_tokens;
    g.judge_requests += c.judge_requests;
    const price_spec* price = nullptr;
    if (in.prices)
      if (auto it = in.prices->find(c.judge_model); it != in.prices->end()) price = &it->second;
    if (!price || !c.judge_tokens.input_tokens || !c.judge_tokens.output_tokens) {
      cost_known = c.judge_requests == 0 && cost_known;
      continue;
    }
    cost += (static_cast<double>(*c.judge_tokens.input_tokens) * price->input_per_mtok +
             static_cast<double>(*c.judge_tokens.output_tokens) * price->output_per_mtok) /
            1e6;
  }
  if (g.judged && cost_known) g.judge_cost_usd = cost;
  for (const auto& c : g.checks)
    if (c.kind == check_kind::verifier && c.error.empty() && !c.rewards.empty()) {
      // The reward may exceed 1 (or be negative): the verdict is the verifier's, not the
      // score's, which is cut to 0..1.
      g.passed = g.ok && c.passed;
      g.rewards = c.rewards;
      g.reward = run_reward(c.rewards);
    }
  return g;
}

json grading_result::to_json(double threshold) const {
  json checks_json = json::array();
  for (const auto& c : checks) {
    json j{{"id", c.id},
           {"kind", std::string(harness::to_string(c.kind))},
           {"weight", c.weight},
           {"passed", c.passed},
           {"detail", c.detail}};
    if (c.score) j["score"] = *c.score;
    if (c.kind == check_kind::tests) {
      j["patch"] = c.patch;
      if (c.tests) {
        auto list = [](const std::vector<graded_test>& v) {
          json a = json::array();
          for (const auto& t : v) a.push_back({{"id", t.id}, {"status", t.status}, {"ok", t.ok}});
          return a;
        };
        j["tests"] = {{"resolution", c.tests->resolution},
                      {"fail_to_pass", list(c.tests->fail_to_pass)},
                      {"pass_to_pass", list(c.tests->pass_to_pass)}};
      }
    }
    if (c.kind == check_kind::judge && !c.judge.is_null()) j["judge"] = c.judge;
    checks_json.push_back(std::move(j));
  }
  json j = {{"status", ok ? "completed" : "error"},
            {"checks", checks_json},
            {"score", score},
            {"threshold", threshold}};
  j["error"] = ok ? json(nullptr) : json(error);
  if (!rewards.empty()) {
    j["rewards"] = rewards;
    j["reward"] = reward ? json(*reward) : json(nullptr);
  }
  return j;
}

json grading_result::judge_usage_json() const {
  if (!judged) return nullptr;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  std::set<std::string> models;
  for (const auto& c : checks)
    if (c.kind == check_kind::judge && !c.judge_model.empty()) models.insert(c.judge_model);
  return {{"input_tokens", opt(judge_tokens.input_tokens)},
          {"output_tokens", opt(judge_tokens.output_tokens)},
          {"cached_input_tokens", opt(judge_tokens.cached_input_tokens)},
          {"reasoning_tokens", opt(judge_tokens.reasoning_tokens)},
          {"cost_usd", opt(judge_cost_usd)},
          {"cost_source", judge_cost_usd ? json("price_table") : json(nullptr)},
          {"requests", judge_requests},
          {"models", models}};
}

}  // namespace grading
}  // namespace evalbox::harness
