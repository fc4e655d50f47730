// `evalbox compare` (see compare.h).
#include "harness/report/compare.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/json_get.h"
#include "harness/report/report.h"

namespace evalbox::harness {
inline namespace report {

namespace {

std::vector<stats::cell> cells_of(const std::vector<stats::cell>& all, const std::string& id) {
  std::vector<stats::cell> out;
  for (const auto& c : all)
    if (c.candidate == id) out.push_back(c);
  return out;
}

std::set<std::string> candidates_of(const std::vector<stats::cell>& cells) {
  std::set<std::string> out;
  for (const auto& c : cells) out.insert(c.candidate);
  return out;
}

// Notes the fixture digest `r` carries.
void add_digest(const json& r, std::map<std::string, std::set<std::string>>& out) {
  const json& f = json_member(r, "fixture");
  const auto id = json_find<std::string>(f, "id");
  const auto digest = json_find<std::string>(f, "digest");
  if (id && digest) out[*id].insert(*digest);
}

std::string pct(double v) { return fmt::format("{:.1f}%", v * 100); }

}  // namespace

compare_side compare_side::of_records(const std::vector<json>& records) {
  compare_side side;
  side.outcomes = outcomes_from_records(latest_records(records));
  for (const auto& r : records) add_digest(r, side.fixture_digests);
  return side;
}

result<compare_side> compare_side::of_results(const results_dir& dir,
                                              const grading_selection* grading) {
  compare_side side;
  auto note = [&](const json& r) -> status {
    if (!grading || grading->empty() || grading->selects(r)) add_digest(r, side.fixture_digests);
    return {};
  };
  auto runs = EB_TRY(run_index::of_results(dir, note, grading));
  side.outcomes.assign(runs.outcomes().begin(), runs.outcomes().end());
  return side;
}

result<compare_result> compare_results(const compare_request& req) {
  return compare_results(compare_side::of_records(req.baseline_records),
                         compare_side::of_records(req.candidate_records), req);
}

result<compare_result> compare_results(const compare_side& baseline_side,
                                       const compare_side& candidate_side,
                                       const compare_settings& req) {
  auto base_cells = EB_TRY_CTX(stats::tabulate(baseline_side.outcomes, req.options.level),
                               fmt::format("results {}", req.baseline_label));
  auto cand_cells = EB_TRY_CTX(stats::tabulate(candidate_side.outcomes, req.options.level),
                               fmt::format("results {}", req.candidate_label));
  auto base_ids = candidates_of(base_cells), cand_ids = candidates_of(cand_cells);

  std::vector<std::pair<std::string, std::string>> pairs;  // (candidate, baseline)
  if (req.candidate || req.baseline) {
    std::string c = req.candidate ? *req.candidate : *req.baseline;
    std::string b = req.baseline ? *req.baseline : *req.candidate;
    if (!cand_ids.contains(c))
      return make_error(error_kind::not_found, "candidate {} has no runs in {}", c,
                        req.candidate_label);
    if (!base_ids.contains(b))
      return make_error(error_kind::not_found, "baseline {} has no runs in {}", b,
                        req.baseline_label);
    pairs.emplace_back(c, b);
  } else {
    for (const auto& id : cand_ids)
      if (base_ids.contains(id)) pairs.emplace_back(id, id);
    if (pairs.empty())
      return make_error(error_kind::invalid_argument,
                        "{} and {} have no candidate id in common: name them with --candidate "
                        "and --baseline",
                        req.candidate_label, req.baseline_label);
  }
  compare_result out{req.baseline_label, req.candidate_label, {}, {}};
  const auto& base_digests = baseline_side.fixture_digests;
  for (const auto& [id, digests] : candidate_side.fixture_digests) {
    auto it = base_digests.find(id);
    if (it != base_digests.end() && it->second != digests) out.changed_fixtures.push_back(id);
  }
  for (const auto& [c, b] : pairs) {
    auto cc = cells_of(cand_cells, c), bc = cells_of(base_cells, b);
    out.comparisons.push_back(stats::compare(cc, bc, req.options));
  }
  return out;
}

std::string render_compare_table(const compare_result& r) {
  std::string out;
  if (!r.changed_fixtures.empty())
    out += fmt::format(
        "warning: {} fixture(s) differ between {} and {} (edited between the "
        "runs): {}\n\n",
        r.changed_fixtures.size(), r.baseline_label, r.candidate_label,
        fmt::join(r.changed_fixtures, ", "));
  for (const auto& p : r.comparisons) {
    out += fmt::format("{} ({}) vs {} ({}): {}\n", p.candidate, r.candidate_label, p.baseline,
                       r.baseline_label, p.verdict);
    out += fmt::format("  n = {} shared fixture(s)", p.n);
    if (p.mean_difference)
      out += fmt::format(", mean difference {:+.1f} pts", *p.mean_difference * 100);
    if (p.ci)
      out += fmt::format(", {:.0f}% interval [{:+.1f}, {:+.1f}]", p.ci->level * 100, p.ci->lo * 100,
                         p.ci->hi * 100);
    else if (p.n > 0)
      out += ", interval n/a (fewer than two shared fixtures)";
    out += "\n";
    if (p.sign_flip_p) out += fmt::format("  sign-flip p = {:.4f}", *p.sign_flip_p);
    if (p.mcnemar)
      out += fmt::format(", exact McNemar p = {:.4f} (b = {}, c = {})", p.mcnemar->p_value,
                         p.mcnemar->b, p.mcnemar->c);
    else if (p.n > 0)
      out += ", McNemar n/a (needs one trial per fixture on both sides)";
    if (p.n > 0) out += "\n";
    if (!p.differences.empty()) {
      size_t w = 7;
      for (const auto& d : p.differences) w = std::max(w, d.fixture.size());
      out += fmt::format("  {:<{}}  {:>16}  {:>16}  {:>10}\n", "fixture", w, "candidate",
                         "baseline", "difference");
      for (const auto& d : p.differences)
        out += fmt::format("  {:<{}}  {:>16}  {:>16}  {:>+10.1f}\n", d.fixture, w,
                           fmt::format("{} (n={})", pct(d.candidate_rate), d.candidate_n),
                           fmt::format("{} (n={})", pct(d.baseline_rate), d.baseline_n),
                           d.difference * 100);
    }
    if (!p.candidate_only.empty())
      out += fmt::format("  only for {} (not compared): {}\n", p.candidate,
                         fmt::join(p.candidate_only, ", "));
    if (!p.baseline_only.empty())
      out += fmt::format("  only for {} (not compared): {}\n", p.baseline,
                         fmt::join(p.baseline_only, ", "));
    out += "\n";
  }
  return out;
}

json compare_to_json(const compare_result& r) {
  // The comparisons exactly as summary.json writes them.
  stats::summary s;
  s.comparisons = r.comparisons;
  json j = stats::to_json(s);
  return {{"schema", "evalbox.compare.v1"},
          {"baseline_results", r.baseline_label},
          {"candidate_results", r.candidate_label},
          {"changed_fixtures", r.changed_fixtures},
          {"comparisons", j["comparisons"]}};
}

}  // namespace report
}  // namespace evalbox::harness
