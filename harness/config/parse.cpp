// Strict YAML -> spec conversion for fixtures and suites: the two entry points, each a list of
// passes over the document's top-level keys. The passes run in a fixed order, which is the
// order of the messages, and the suite's run after what they refer to (credentials before
// candidates, candidates before the baseline). yaml-cpp throws; every call into it is in the
// .cpp files of this folder, and each failure becomes a config_error with the node's line and
// column. The files by subject: reader.cpp (the typed reads every part shares),
// parse_environment.cpp (limits, network, environment, git workspace, images, harbor),
// parse_checks.cpp, parse_candidates.cpp (credentials, candidates, baseline), parse_judges.cpp
// (judges, prices), parse_mounts.cpp (mounts, bundles). What needs no YAML lives elsewhere
// (validate.h for single values, harness/fixture for the file system).
#include "harness/config/parse.h"

#include <algorithm>
#include <filesystem>
#include <span>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/fs.h"
#include "harness/config/parse_parts.h"
#include "harness/config/reader.h"
#include "harness/config/validate.h"

namespace evalbox::harness {
inline namespace config {

namespace {

namespace fs = std::filesystem;

using parsing::fields;
using parsing::reader;

// Loads YAML text; on a syntax error records it and returns an undefined node.
YAML::Node load_yaml(reader& r, std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    return root;
  } catch (const YAML::ParserException& e) {
    r.fail(r.at(e.mark), fmt::format("YAML syntax error: {}", e.msg),
           "check indentation, quoting and that ':' is followed by a space");
  } catch (const YAML::Exception& e) {
    r.fail(r.at(e.mark), fmt::format("YAML error: {}", e.msg));
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// The document's top-level mapping, checked against the keys of its format; nothing when the
// text is not YAML, is empty (`empty_hint` says how to start) or is not a mapping.
std::optional<fields> open_document(reader& r, std::string_view text, std::string_view what,
                                    std::span<const std::string_view> known,
                                    std::span<const std::string_view> required,
                                    std::string_view empty_hint) {
  YAML::Node root = load_yaml(r, text);
  if (!root.IsDefined()) return std::nullopt;
  if (root.IsNull()) {
    r.fail(source_location{r.file(), 0, 0}, "the file is empty", std::string(empty_hint));
    return std::nullopt;
  }
  return r.mapping(root, what, known, required);
}

bool check_schema(reader& r, const fields& f, std::string_view expected) {
  auto s = r.string(f.get("schema"), "schema");
  if (s && *s != expected) {
    r.fail(f.get("schema"), fmt::format("schema '{}' is not '{}'", *s, expected),
           fmt::format("write `schema: {}`", expected));
    return false;
  }
  return s.has_value();
}

// id: the fixture's id, [a-z0-9][a-z0-9._-]*.
void parse_fixture_id(reader& r, const YAML::Node& n, fixture_spec& spec) {
  if (auto id = r.string(n, "id")) {
    spec.id = *id;
    if (!is_valid_id(*id, false))
      r.fail(n, fmt::format("fixture id '{}' is not a valid id", *id),
             "use lowercase letters, digits, '.', '_' and '-', starting with a letter or "
             "digit");
  }
}

// description, prompt, follow_up, setup: what people and the agent are told, and the commands
// run before the agent starts.
void parse_task(reader& r, const fields& f, fixture_spec& spec) {
  if (f.has("description")) {
    if (auto s = r.string(f.get("description"), "description", true)) spec.description = *s;
  }
  if (f.has("prompt")) {
    if (auto s = r.string(f.get("prompt"), "prompt")) spec.prompt = *s;
  }
  if (f.has("follow_up")) {
    if (auto s = r.string(f.get("follow_up"), "follow_up")) spec.follow_up = *s;
  }
  if (f.has("setup")) {
    if (auto l = r.string_list(f.get("setup"), "setup", true)) spec.setup = *l;
  }
}

// threshold: the weighted share of checks that must pass, 0..1.
void parse_threshold(reader& r, const YAML::Node& n, fixture_spec& spec) {
  if (auto t = r.number(n, "threshold")) {
    if (*t < 0 || *t > 1)
      r.fail(n, fmt::format("threshold {} is outside 0..1", *t),
             "it is the weighted share of checks that must pass; 1 means all");
    spec.threshold = *t;
  }
}

// name, description: the suite's name names its results directory.
void parse_suite_name(reader& r, const fields& f, suite_spec& spec) {
  if (f.has("name")) {
    if (auto s = r.string(f.get("name"), "name")) {
      spec.name = *s;
      if (!is_valid_id(*s, true))
        r.fail(f.get("name"), fmt::format("suite name '{}' is not a valid name", *s),
               "it names the results directory: use letters, digits, '.', '_' and '-'");
    }
  }
  if (f.has("description")) {
    if (auto s = r.string(f.get("description"), "description", true)) spec.description = *s;
  }
}

// fixtures: [path or glob, ...] as written; harness/fixture resolves them (load_suite).
void parse_fixture_entries(reader& r, const YAML::Node& n, std::vector<fixture_entry>& out) {
  auto list = r.string_list(n, "fixtures");
  if (!list) return;
  for (size_t i = 0; i < list->size(); ++i) out.push_back({(*list)[i], r.at(n[i])});
}

// trials, concurrency: how many runs of each fixture and candidate, and how many at once.
void parse_counts(reader& r, const fields& f, suite_spec& spec) {
  if (f.has("trials")) {
    if (auto t = r.positive_integer(f.get("trials"), "trials")) {
      if (*t > 10000)
        r.fail(f.get("trials"), "trials is more than 10000");
      else
        spec.trials = static_cast<int>(*t);
    }
  }
  if (f.has("concurrency")) {
    if (auto c = r.positive_integer(f.get("concurrency"), "concurrency")) {
      if (*c > 1024)
        r.fail(f.get("concurrency"), "concurrency is more than 1024");
      else
        spec.concurrency = static_cast<int>(*c);
    }
  }
}

// results: the results directory, relative to the suite file; by default results/<name>,
// relative to where evalbox runs.
void parse_results_dir(reader& r, const fields& f, const fs::path& base_dir, suite_spec& spec) {
  if (f.has("results")) {
    if (auto s = r.string(f.get("results"), "results"))
      spec.results_dir = normalize(base_dir / expand_home(*s));
  } else if (!spec.name.empty()) {
    spec.results_dir = fs::path("results") / spec.name;
  }
}

// The keys of fixture.yaml that say how a run is graded.
constexpr std::string_view grading_keys[] = {"checks", "threshold"};

// The entries of `f` whose keys are in `keys` (`in`), or all the others, as YAML text: the
// same document gives the same text.
std::string emit_fields(const parsing::fields& f, std::span<const std::string_view> keys, bool in) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& [k, v] : f.entries) {
    if ((std::find(keys.begin(), keys.end(), k) != keys.end()) != in) continue;
    out << YAML::Key << k << YAML::Value << v;
  }
  out << YAML::EndMap;
  return out.c_str();
}

}  // namespace

fixture_spec parse_fixture_yaml(std::string_view text, std::string_view display,
                                std::vector<config_error>& errors) {
  using namespace parsing;
  static constexpr std::string_view known[] = {"schema",    "id",        "description", "prompt",
                                               "follow_up", "setup",     "limits",      "network",
                                               "checks",    "threshold", "environment", "workspace",
                                               "budget",    "mounts",    "bundles",     "caches"};
  static constexpr std::string_view required[] = {"schema", "id", "prompt", "checks"};
  reader r(std::string(display), errors, text);
  fixture_spec spec;
  auto f =
      open_document(r, text, "the fixture", known, required,
                    "start with `schema: evalbox.fixture.v1`, or run `evalbox fixture new NAME`");
  if (!f) return spec;
  if (f->has("schema")) check_schema(r, *f, fixture_schema);
  if (f->has("id")) parse_fixture_id(r, f->get("id"), spec);
  parse_task(r, *f, spec);
  if (f->has("limits")) spec.limits = parse_limits(r, f->get("limits"), "limits");
  if (f->has("network")) spec.network = parse_network(r, f->get("network"), "network");
  if (f->has("budget")) spec.budget = parse_budget(r, f->get("budget"), "budget");
  if (f->has("environment")) spec.environment = parse_environment(r, f->get("environment"));
  if (f->has("workspace")) spec.git_workspace = parse_git_workspace(r, f->get("workspace"));
  parse_inputs(r, *f, spec.mounts, spec.bundles, spec.caches);
  if (f->has("threshold")) parse_threshold(r, f->get("threshold"), spec);
  if (f->has("checks")) parse_checks(r, f->get("checks"), spec);
  spec.grading_text = emit_fields(*f, grading_keys, true);
  return spec;
}

std::string fixture_task_text(std::string_view text) {
  try {
    const YAML::Node doc = YAML::Load(std::string(text));
    if (!doc.IsMap()) return std::string(text);
    parsing::fields f;
    for (const auto& kv : doc) f.entries.emplace_back(kv.first.Scalar(), kv.second);
    return emit_fields(f, grading_keys, false);
  } catch (const YAML::Exception&) {
    return std::string(text);
  }
}

namespace {

// budget (per run, under each gateway candidate's own) and suite_budget (the whole run's).
void parse_suite_budgets(reader& r, const parsing::fields& f, suite_spec& spec) {
  using namespace parsing;
  const bool any_gateway = std::any_of(spec.candidates.begin(), spec.candidates.end(),
                                       [](const candidate_spec& c) { return c.gateway; });
  for (const char* key : {"budget", "suite_budget"}) {
    if (!f.has(key)) continue;
    budget_spec b = parse_budget(r, f.get(key), key);
    if (!any_gateway && !spec.candidates.empty())
      r.fail(f.get(key), fmt::format("{} needs a candidate with a gateway", key),
             "budgets are enforced by a candidate's model gateway: add gateway: {upstream: URL} "
             "to the candidates that call a model (docs/agents.md)");
    (std::string_view(key) == "budget" ? spec.budget : spec.suite_budget) = b;
  }
  if (!spec.budget) return;
  for (auto& c : spec.candidates)
    if (c.gateway) c.budget = spec.budget->merged_with(c.budget.value_or(budget_spec{}));
}

}  // namespace

suite_spec parse_suite_yaml(std::string_view text, std::string_view display,
                            const std::filesystem::path& base_dir,
                            std::span<const std::string> adapters,
                            std::vector<config_error>& errors) {
  using namespace parsing;
  static constexpr std::string_view known[] = {
      "schema",      "name",        "description", "fixtures", "candidates", "trials",
      "concurrency", "credentials", "limits",      "baseline", "prices",     "results",
      "environment", "images",      "harbor",      "judges",   "budget",     "suite_budget",
      "mounts",      "bundles",     "caches"};
  static constexpr std::string_view required[] = {"schema", "name", "fixtures", "candidates"};
  reader r(std::string(display), errors);
  suite_spec spec;
  auto f =
      open_document(r, text, "the suite", known, required, "start with `schema: evalbox.suite.v1`");
  if (!f) return spec;
  if (f->has("schema")) check_schema(r, *f, suite_schema);
  parse_suite_name(r, *f, spec);
  if (f->has("fixtures")) parse_fixture_entries(r, f->get("fixtures"), spec.fixture_entries);
  parse_counts(r, *f, spec);
  if (f->has("credentials")) parse_credentials(r, f->get("credentials"), base_dir, spec);
  if (f->has("limits")) spec.default_limits = parse_limits(r, f->get("limits"), "limits");
  if (f->has("environment")) spec.default_environment = parse_environment(r, f->get("environment"));
  parse_inputs(r, *f, spec.default_mounts, spec.default_bundles, spec.default_caches);
  if (f->has("candidates")) parse_candidates(r, f->get("candidates"), base_dir, adapters, spec);
  check_shared_credentials(r, spec);
  if (f->has("baseline")) parse_baseline(r, f->get("baseline"), spec);
  if (f->has("prices")) parse_prices(r, f->get("prices"), spec);
  if (f->has("budget") || f->has("suite_budget")) parse_suite_budgets(r, *f, spec);
  if (f->has("images")) parse_images(r, f->get("images"), base_dir, spec);
  if (f->has("harbor")) parse_harbor(r, f->get("harbor"), spec);
  if (f->has("judges")) parse_judges(r, f->get("judges"), base_dir, spec);
  parse_results_dir(r, *f, base_dir, spec);
  return spec;
}

std::string peek_schema(std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (root.IsMap() && root["schema"] && root["schema"].IsScalar()) return root["schema"].Scalar();
  } catch (const YAML::Exception&) {
    return {};  // not YAML: no schema to peek at (the parse proper says what is wrong)
  }
  return {};
}

}  // namespace config
}  // namespace evalbox::harness
