// summary.json (schema evalbox.summary.v1, docs/statistics.md; see stats.h): the summary as
// one JSON value (to_json), or streamed byte for byte the same (write_json).
#include <cmath>
#include <functional>
#include <map>
#include <ostream>

#include "base/json.h"
#include "harness/report/stats.h"

namespace evalbox::harness {
inline namespace report {
namespace stats {

namespace {

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json opt_count(const std::optional<double>& v) {
  return v ? json(static_cast<uint64_t>(std::llround(*v))) : json(nullptr);
}

json to_json(const interval& i) { return {{"lo", i.lo}, {"hi", i.hi}, {"level", i.level}}; }

json opt(const std::optional<interval>& i) { return i ? to_json(*i) : json(nullptr); }

// Token counts stay integers; wall time keeps its fraction.
json to_json(const distribution& d, bool counts) {
  auto v = [&](const std::optional<double>& x) { return counts ? opt_count(x) : opt(x); };
  return {{"n", d.n},        {"missing", d.missing}, {"total", v(d.total)}, {"min", v(d.min)},
          {"p50", v(d.p50)}, {"p90", v(d.p90)},      {"p99", v(d.p99)},     {"max", v(d.max)}};
}

json to_json(const usage& u) {
  return {{"runs", u.runs},
          {"input_tokens", to_json(u.input_tokens, true)},
          {"output_tokens", to_json(u.output_tokens, true)},
          {"wall_ms", to_json(u.wall_ms, false)},
          {"cost_usd",
           {{"known_total", opt(u.cost.known_usd)},
            {"known", u.cost.known},
            {"unknown", u.cost.unknown}}},
          // The judge's usage over the judged runs, apart from the candidate's.
          {"judge",
           {{"runs", u.judge.runs},
            {"input_tokens", to_json(u.judge.input_tokens, true)},
            {"output_tokens", to_json(u.judge.output_tokens, true)},
            {"cost_usd",
             {{"known_total", opt(u.judge.cost.known_usd)},
              {"known", u.judge.cost.known},
              {"unknown", u.judge.cost.unknown}}}}},
          // The model gateway's, over the gateway runs (their usage is exact).
          {"gateway",
           {{"runs", u.gateway.runs},
            {"ttfb_ms", to_json(u.gateway.ttfb_ms, false)},
            {"call_ms", to_json(u.gateway.call_ms, false)},
            {"budget_exhausted", u.gateway.budget_exhausted}}}};
}

json to_json(const k_estimate& k) { return {{"k", k.k}, {"value", k.value}, {"n", k.fixtures}}; }

json to_json(const std::vector<k_estimate>& ks) {
  json out = json::array();
  for (const k_estimate& k : ks) out.push_back(to_json(k));
  return out;
}

// Each part of the summary below is built on its own, so that to_json and write_json (which
// streams the lists element by element) are made of the same pieces.

json settings_json(const summary& s) {
  return {{"level", s.settings.level},
          {"bootstrap_samples", s.settings.bootstrap_samples},
          {"permutation_samples", s.settings.permutation_samples},
          {"seed", s.settings.seed},
          {"oracle", s.settings.oracle},
          {"baseline", s.settings.baseline ? json(*s.settings.baseline) : json(nullptr)}};
}

json runs_json(const summary& s) {
  json j = {{"total", s.runs}, {"errors", s.errors.size()}};
  if (s.missing) j.update({{"planned", s.missing->planned}, {"missing", s.missing->missing}});
  return j;
}

// A candidate without its pass@k and pass^k lists (one entry per k: as long as the trials).
json candidate_json(const candidate_summary& c) {
  return {{"candidate", c.candidate},
          {"fixtures", {{"n", c.fixtures}, {"without_trials", c.fixtures_without_trials}}},
          {"trials", {{"n", c.trials}, {"passes", c.passes}, {"errors", c.errors}}},
          {"pass_at_1",
           {{"value", opt(c.pass_at_1)},
            {"n", c.fixtures},
            {"ci", opt(c.pass_at_1_ci)},
            {"method", "fixture-clustered expanded percentile bootstrap"}}},
          {"pooled",
           {{"value", opt(c.pooled_rate)},
            {"n", c.trials},
            {"ci", opt(c.pooled_ci)},
            {"method", "wilson"}}},
          {"max_k", c.max_k},
          {"usage", to_json(c.use)}};
}

json cell_json(const cell& c) {
  return {{"candidate", c.candidate},
          {"fixture", c.fixture},
          {"n", c.n},
          {"passes", c.passes},
          {"errors", c.errors},
          {"rate", opt(c.rate)},
          {"ci", c.n > 0 ? to_json(c.ci) : json(nullptr)}};
}

json difference_json(const fixture_difference& d) {
  return {{"fixture", d.fixture},         {"candidate_rate", d.candidate_rate},
          {"candidate_n", d.candidate_n}, {"baseline_rate", d.baseline_rate},
          {"baseline_n", d.baseline_n},   {"difference", d.difference}};
}

// A comparison without its per-fixture differences.
json comparison_json(const paired_comparison& p) {
  json mc = p.mcnemar
                ? json{{"b", p.mcnemar->b}, {"c", p.mcnemar->c}, {"p_value", p.mcnemar->p_value}}
                : json(nullptr);
  return {{"candidate", p.candidate},
          {"baseline", p.baseline},
          {"n", p.n},
          {"mean_difference", opt(p.mean_difference)},
          {"ci", opt(p.ci)},
          {"sign_flip_p", opt(p.sign_flip_p)},
          {"mcnemar", std::move(mc)},
          {"verdict", p.verdict},
          {"candidate_only", p.candidate_only},
          {"baseline_only", p.baseline_only}};
}

json flaky_json(const flaky_fixture& f) {
  return {{"fixture", f.fixture}, {"candidates", f.candidates}, {"oracle", f.oracle}};
}

json error_json(const error_entry& e) {
  return {{"candidate", e.candidate},
          {"fixture", e.fixture},
          {"trial", e.trial},
          {"message", e.message}};
}

template <class T, class F>
json array_of(const std::vector<T>& items, F to) {
  json out = json::array();
  for (const T& item : items) out.push_back(to(item));
  return out;
}

// Writes JSON byte for byte as pretty_json does (nlohmann's dump, indent 2), but as it goes:
// containers are opened and closed here, and only their members are json values.
class pretty_writer {
 public:
  explicit pretty_writer(std::ostream& out) : out_(out) {}

  void open_object() { open('{'); }
  void open_array() { open('['); }
  void close_object() { close('}'); }
  void close_array() { close(']'); }
  // The next member of the object being written; its value follows.
  void key(const std::string& k) {
    next();
    out_ << json(k).dump(-1, ' ', false, json::error_handler_t::replace) << ": ";
    after_key_ = true;
  }
  // An array element, the value of the last key, or the whole document.
  void value(const json& v) {
    start_value();
    std::string text = v.dump(2, ' ', false, json::error_handler_t::replace);
    // Strings never hold a raw newline, so each one starts a line of the nested dump.
    const std::string indent(2 * depth_.size(), ' ');
    size_t from = 0;
    for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', from)) {
      out_.write(text.data() + from, static_cast<std::streamsize>(nl + 1 - from));
      out_ << indent;
      from = nl + 1;
    }
    out_.write(text.data() + from, static_cast<std::streamsize>(text.size() - from));
  }
  // An object: the members of `small` in key order, and at their places those of `streamed`
  // (whose callbacks write the value).
  void object(json small, const std::map<std::string, std::function<void()>>& streamed) {
    for (const auto& [k, f] : streamed) small[k] = nullptr;
    open_object();
    for (const auto& [k, v] : small.items()) {
      key(k);
      auto it = streamed.find(k);
      if (it != streamed.end())
        it->second();
      else
        value(v);
    }
    close_object();
  }
  template <class T, class F>
  void array(const std::vector<T>& items, F write_item) {
    open_array();
    for (const T& item : items) write_item(item);
    close_array();
  }

 private:
  void start_value() {
    if (!after_key_) next();
    after_key_ = false;
  }
  void open(char c) {
    start_value();
    out_ << c;
    depth_.push_back(0);
  }
  void close(char c) {
    size_t members = depth_.back();
    depth_.pop_back();
    if (members > 0) out_ << '\n' << std::string(2 * depth_.size(), ' ');
    out_ << c;
  }
  // Before a member of the container being written (nothing at the top level).
  void next() {
    if (depth_.empty()) return;
    out_ << (depth_.back()++ ? ",\n" : "\n") << std::string(2 * depth_.size(), ' ');
  }

  std::ostream& out_;
  std::vector<size_t> depth_;  // per open container: members written so far
  bool after_key_ = false;
};

json grading_json(const summary& s) {
  json digests = json::object();
  for (const auto& [d, n] : s.grading.digests) digests[d.empty() ? "unknown" : d] = n;
  return {{"regraded", s.grading.regraded},
          {"digests", std::move(digests)},
          {"mixed_fixtures", s.grading.mixed_fixtures},
          {"selected", s.grading.selected.empty() ? json(nullptr) : json(s.grading.selected)}};
}

}  // namespace

json to_json(const summary& s) {
  json j;
  j["schema"] = "evalbox.summary.v1";
  j["settings"] = settings_json(s);
  j["runs"] = runs_json(s);
  j["grading"] = grading_json(s);
  j["candidates"] = array_of(s.candidates, [](const candidate_summary& c) {
    json out = candidate_json(c);
    out["pass_at_k"] = to_json(c.pass_at);
    out["pass_hat_k"] = to_json(c.pass_hat);
    return out;
  });
  j["cells"] = array_of(s.cells, cell_json);
  j["comparisons"] = array_of(s.comparisons, [](const paired_comparison& p) {
    json out = comparison_json(p);
    out["differences"] = array_of(p.differences, difference_json);
    return out;
  });
  j["flaky"] = array_of(s.flaky, flaky_json);
  j["errors"] = array_of(s.errors, error_json);
  j["usage"] = to_json(s.overall);
  return j;
}

void write_json(std::ostream& out, const summary& s) {
  pretty_writer w(out);
  auto each = [&](const auto& items, auto to) {
    return [&w, &items, to] { w.array(items, [&](const auto& item) { w.value(to(item)); }); };
  };
  auto ks = [&](const std::vector<k_estimate>& list) {
    return [&w, &list] { w.array(list, [&](const k_estimate& k) { w.value(to_json(k)); }); };
  };
  json small = {{"schema", "evalbox.summary.v1"},
                {"settings", settings_json(s)},
                {"runs", runs_json(s)},
                {"grading", grading_json(s)},
                {"usage", to_json(s.overall)}};
  w.object(
      std::move(small),
      {{"candidates",
        [&] {
          w.array(s.candidates, [&](const candidate_summary& c) {
            w.object(candidate_json(c),
                     {{"pass_at_k", ks(c.pass_at)}, {"pass_hat_k", ks(c.pass_hat)}});
          });
        }},
       {"cells", each(s.cells, cell_json)},
       {"comparisons",
        [&] {
          w.array(s.comparisons, [&](const paired_comparison& p) {
            w.object(comparison_json(p), {{"differences", each(p.differences, difference_json)}});
          });
        }},
       {"flaky", each(s.flaky, flaky_json)},
       {"errors", each(s.errors, error_json)}});
  out << '\n';
}

}  // namespace stats
}  // namespace report
}  // namespace evalbox::harness