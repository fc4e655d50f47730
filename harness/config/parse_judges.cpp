// A suite's judges (the models, or the program, that grade judge checks, and how to reach
// them: docs/suite-format.md) and the prices of the models its candidates use.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/fs.h"
#include "harness/config/parse_parts.h"
#include "harness/config/validate.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

namespace fs = std::filesystem;

// prices: {model or candidate id: {input_per_mtok, output_per_mtok}}, both non-negative.
void parse_prices(reader& r, const YAML::Node& n, suite_spec& spec) {
  auto pf = r.mapping(n, "prices", {}, {}, true);
  if (!pf) return;
  static constexpr std::string_view pk[] = {"input_per_mtok", "output_per_mtok",
                                            "cached_input_per_mtok", "cache_write_per_mtok"};
  static constexpr std::string_view required[] = {"input_per_mtok", "output_per_mtok"};
  for (const auto& [model, v] : pf->entries) {
    std::string name = fmt::format("prices.{}", model);
    auto p = r.mapping(v, name, pk, required);
    if (!p) continue;
    price_spec price;
    bool ok = true;
    for (auto key : pk) {
      std::string k(key);
      if (!p->has(k)) {
        ok = ok && !std::count(std::begin(required), std::end(required), key);
        continue;
      }
      auto num = r.number(p->get(k), name + "." + k);
      if (!num || *num < 0) {
        if (num) r.fail(p->get(k), fmt::format("{}.{} must not be negative", name, k));
        ok = false;
        continue;
      }
      if (k == "input_per_mtok") price.input_per_mtok = *num;
      if (k == "output_per_mtok") price.output_per_mtok = *num;
      if (k == "cached_input_per_mtok") price.cached_input_per_mtok = *num;
      if (k == "cache_write_per_mtok") price.cache_write_per_mtok = *num;
    }
    if (ok) spec.prices[model] = price;
  }
}

namespace {

using ak = judge_spec::adapter_kind;

// The most evidence a judge may be given per item (max_evidence).
constexpr uint64_t max_judge_evidence_bytes = 1u << 20;

// adapter: how the judge is reached (openai-responses, anthropic-messages or command).
void parse_judge_adapter(reader& r, const fields& f, const std::string& what, judge_spec& j) {
  if (!f.has("adapter")) return;
  if (auto a = r.string(f.get("adapter"), what + ".adapter")) {
    if (*a == "openai-responses")
      j.adapter = ak::openai_responses;
    else if (*a == "anthropic-messages")
      j.adapter = ak::anthropic_messages;
    else if (*a == "command")
      j.adapter = ak::command;
    else
      r.fail(f.get("adapter"), fmt::format("{}.adapter '{}' is not a judge adapter", what, *a),
             "use openai-responses, anthropic-messages or command");
  }
}

// model, argv: the model an HTTP judge asks (required there), the program a command judge runs
// (required there, and only there).
void parse_judge_program(reader& r, const fields& f, const YAML::Node& n, const std::string& what,
                         const fs::path& base_dir, judge_spec& j) {
  const bool http = j.adapter != ak::command;
  if (f.has("model")) {
    if (auto s = r.string(f.get("model"), what + ".model")) j.model = *s;
  } else if (http) {
    r.fail(n, fmt::format("{} is missing 'model'", what), "add `model: ...`");
  }
  if (f.has("argv")) {
    if (!http) {
      if (auto l = r.string_list(f.get("argv"), what + ".argv")) {
        j.argv = *l;
        // Like a command candidate's program: relative to the suite file when it names a path.
        if (j.argv[0].find('/') != std::string::npos && !fs::path(j.argv[0]).is_absolute())
          j.argv[0] = normalize(base_dir / j.argv[0]).string();
      }
    } else {
      r.fail(f.get("argv"), fmt::format("{}.argv is for `adapter: command`", what));
    }
  } else if (!http) {
    r.fail(n, fmt::format("{} is missing 'argv'", what),
           "give the program that reads the request JSON on stdin, e.g. argv: [./judge.sh]");
  }
}

// base_url, api_key_env: where an HTTP judge's API is and which host variable holds its key
// (the vendor's by default; never the key itself).
void parse_judge_address(reader& r, const fields& f, const std::string& what, judge_spec& j) {
  const bool http = j.adapter != ak::command;
  if (f.has("base_url")) {
    YAML::Node b = f.get("base_url");
    if (auto s = r.string(b, what + ".base_url")) {
      if (!http)
        r.fail(b, fmt::format("{}.base_url is for the HTTP adapters", what));
      else if (!s->starts_with("http://") && !s->starts_with("https://"))
        r.fail(b, fmt::format("{}.base_url '{}' must start with http:// or https://", what, *s),
               "e.g. https://api.openai.com");
      else
        j.base_url = *s;
    }
  } else if (http) {
    j.base_url =
        j.adapter == ak::openai_responses ? "https://api.openai.com" : "https://api.anthropic.com";
  }
  while (j.base_url.ends_with('/')) j.base_url.pop_back();
  if (f.has("api_key_env")) {
    YAML::Node k = f.get("api_key_env");
    if (auto s = r.string(k, what + ".api_key_env")) {
      const bool valid = std::all_of(s->begin(), s->end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
      if (!valid || std::isdigit(static_cast<unsigned char>(s->front())))
        r.fail(k, fmt::format("{}.api_key_env '{}' is not a variable name", what, *s),
               "name the variable that holds the key, e.g. OPENAI_API_KEY (never the key)");
      else
        j.api_key_env = *s;
    }
  } else if (http) {
    j.api_key_env = j.adapter == ak::openai_responses ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
  }
}

// votes, retries, timeout, max_evidence, max_output_tokens: what one grading may ask of the
// judge, each bounded.
void parse_judge_budget(reader& r, const fields& f, const std::string& what, judge_spec& j) {
  if (f.has("votes")) {
    if (auto c = r.positive_integer(f.get("votes"), what + ".votes")) {
      if (*c > max_judge_votes)
        r.fail(f.get("votes"), fmt::format("{}.votes is more than {}", what, max_judge_votes));
      else
        j.votes = static_cast<int>(*c);
    }
  }
  if (f.has("retries")) {
    YAML::Node rn = f.get("retries");
    if (rn.IsScalar() && rn.Scalar() == "0") {
      j.retries = 0;
    } else if (auto c = r.positive_integer(rn, what + ".retries")) {
      if (*c > 10)
        r.fail(rn, fmt::format("{}.retries is more than 10", what));
      else
        j.retries = static_cast<int>(*c);
    }
  }
  if (f.has("timeout")) {
    if (auto ms = r.duration_ms(f.get("timeout"), what + ".timeout")) j.timeout_ms = *ms;
  }
  if (f.has("max_evidence")) {
    YAML::Node m = f.get("max_evidence");
    if (auto b = r.size_bytes(m, what + ".max_evidence")) {
      if (*b > max_judge_evidence_bytes)
        r.fail(m, fmt::format("{}.max_evidence is more than 1MiB", what),
               "at most 1MiB per evidence item; the default is 32KiB");
      else
        j.max_evidence_bytes = *b;
    }
  }
  if (f.has("max_output_tokens")) {
    if (auto c = r.positive_integer(f.get("max_output_tokens"), what + ".max_output_tokens"))
      j.max_output_tokens = *c;
  }
}

// One judge, NAME: {...}; nothing when any of it is wrong. The adapter is read first: which
// keys are required, allowed and defaulted depends on it.
std::optional<judge_spec> parse_judge(reader& r, const std::string& name, const YAML::Node& n,
                                      const fs::path& base_dir) {
  static constexpr std::string_view known[] = {
      "adapter", "model",   "base_url", "api_key_env",  "argv",
      "votes",   "timeout", "retries",  "max_evidence", "max_output_tokens"};
  static constexpr std::string_view required[] = {"adapter"};
  const std::string what = fmt::format("judges.{}", name);
  auto f = r.mapping(n, what, known, required);
  if (!f) return std::nullopt;
  const size_t before = r.error_count();
  judge_spec j;
  j.name = name;
  j.where = r.at(n);
  parse_judge_adapter(r, *f, what, j);
  parse_judge_program(r, *f, n, what, base_dir, j);
  parse_judge_address(r, *f, what, j);
  parse_judge_budget(r, *f, what, j);
  if (r.error_count() != before) return std::nullopt;
  return j;
}

}  // namespace

// judges: {NAME: {adapter, model, base_url, api_key_env, argv, votes, timeout, retries,
// max_evidence, max_output_tokens}} (docs/suite-format.md).
void parse_judges(reader& r, const YAML::Node& n, const fs::path& base_dir, suite_spec& spec) {
  auto m = r.mapping(n, "judges", {}, {}, true);
  if (!m) return;
  for (const auto& [name, v] : m->entries) {
    if (!is_valid_id(name, true)) {
      r.fail(v, fmt::format("judge name '{}' is not a valid name", name),
             "use letters, digits, '.', '_' and '-'");
      continue;
    }
    if (auto j = parse_judge(r, name, v, base_dir)) spec.judges[name] = std::move(*j);
  }
}

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
