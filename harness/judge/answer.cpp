// The strict reading of a judge's answer and the majority of votes (see answer.h).
#include "harness/judge/answer.h"

#include <map>

#include <fmt/format.h>

#include "base/json.h"
#include "base/json_checks.h"
#include "base/json_get.h"
#include "harness/judge/prompt.h"

namespace evalbox::harness {
inline namespace judge {

namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::unexpected<error> bad(std::string_view what) {
  return make_error(error_kind::invalid_argument, "the judge's answer {}", what);
}

// The JSON text of the answer: the answer itself when it starts with '{', else the content of
// its one fenced block (``` or ```json on a line of its own, closed by ``` on a line of its
// own) with nothing but blanks around it.
result<std::string_view> json_text(std::string_view answer) {
  answer = trim(answer);
  if (answer.empty()) return bad("is empty");
  if (answer.front() == '{') return answer;
  if (!answer.starts_with("```"))
    return bad("is neither a JSON object nor one fenced block of JSON");
  const size_t eol = answer.find('\n');
  if (eol == std::string_view::npos) return bad("opens a fenced block that it never closes");
  std::string_view info = trim(answer.substr(3, eol - 3));
  if (!info.empty() && info != "json")
    return bad(fmt::format("opens a fenced block of '{}', not json", info.substr(0, 20)));
  std::string_view rest = answer.substr(eol + 1);
  if (rest.find("```") == std::string_view::npos)
    return bad("opens a fenced block that it never closes");
  if (!rest.ends_with("```")) return bad("has text after its fenced block");
  rest.remove_suffix(3);
  if (!rest.empty() && rest.back() != '\n') return bad("does not close its fenced block alone");
  if (rest.find("```") != std::string_view::npos) return bad("has more than one fenced block");
  return trim(rest);
}

}  // namespace

result<std::vector<judge_verdict>> parse_judge_answer(std::string_view text,
                                                      std::span<const std::string> ids) {
  if (text.size() > max_judge_answer_bytes)
    return bad(fmt::format("is {} bytes, more than {}", text.size(), max_judge_answer_bytes));
  auto body = json_text(text);
  if (!body) return std::unexpected(body.error());
  if (json_too_deep(*body, 8)) return bad("nests deeper than the format allows");
  json doc = json::parse(sanitize_json_text(*body), nullptr, false);
  if (doc.is_discarded()) return bad("is not valid JSON");
  if (!doc.is_object()) return bad("is not a JSON object");
  if (doc.size() != 1 || !doc.contains("checks"))
    return bad("must be an object with the one key \"checks\"");
  const json& checks = json_member(doc, "checks");
  if (!checks.is_array()) return bad("has \"checks\" that is not a list");
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < ids.size(); ++i) index.emplace(ids[i], i);
  std::vector<judge_verdict> out(ids.size());
  std::vector<bool> seen(ids.size(), false);
  for (const auto& c : checks) {
    if (!c.is_object() || c.size() != 3 || !c.contains("id") || !c.contains("verdict") ||
        !c.contains("reason"))
      return bad("has an entry that is not exactly {\"id\", \"verdict\", \"reason\"}");
    auto id_field = json_find<std::string>(c, "id");
    auto verdict_field = json_find<std::string>(c, "verdict");
    auto reason_field = json_find<std::string>(c, "reason");
    if (!id_field || !verdict_field || !reason_field)
      return bad("has an entry whose id, verdict or reason is not a string");
    const std::string& id = *id_field;
    auto it = index.find(id);
    if (it == index.end())
      return bad(fmt::format("names \"{}\", which is not a proposition id", id.substr(0, 40)));
    if (seen[it->second]) return bad(fmt::format("names \"{}\" twice", id));
    seen[it->second] = true;
    const std::string& verdict = *verdict_field;
    if (verdict != "pass" && verdict != "fail")
      return bad(
          fmt::format("gives {} the verdict \"{}\", not pass or fail", id, verdict.substr(0, 20)));
    std::string reason = std::move(*reason_field);
    if (trim(reason).empty()) return bad(fmt::format("gives {} no reason", id));
    if (reason.size() > max_judge_reason_bytes)
      return bad(fmt::format("gives {} a reason longer than {} bytes", id, max_judge_reason_bytes));
    out[it->second] = {id, verdict == "pass", std::move(reason)};
  }
  for (size_t i = 0; i < ids.size(); ++i)
    if (!seen[i]) return bad(fmt::format("has no entry for {}", ids[i]));
  return out;
}

std::vector<judge_tally> judge_majority(std::span<const std::vector<judge_verdict>> votes,
                                        std::span<const std::string> ids) {
  std::vector<judge_tally> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    judge_tally t;
    t.id = ids[i];
    for (const auto& v : votes) {
      if (i >= v.size()) continue;
      (v[i].pass ? t.pass : t.fail) += 1;
      t.reasons.push_back(v[i].reason);
    }
    t.passed = t.pass > t.fail;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace judge
}  // namespace evalbox::harness
