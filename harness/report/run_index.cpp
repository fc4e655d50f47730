// The run index (see report.h): the records of results.jsonl, or records in memory, as the
// compact outcome of each trial's newest record and where to read that record back.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "base/json.h"
#include "base/json_get.h"
#include "harness/report/report.h"

namespace evalbox::harness {
inline namespace report {

namespace {

std::string candidate_of(const json& r) {
  return json_value_or(json_member(r, "candidate"), "id", "");
}
std::string fixture_of(const json& r) { return json_value_or(json_member(r, "fixture"), "id", ""); }
int trial_of(const json& r) { return json_value_or(r, "trial", 0); }

// The statistics' view of one record.
stats::run_outcome outcome_of(const json& r) {
  stats::run_outcome o;
  o.candidate = candidate_of(r);
  o.fixture = fixture_of(r);
  o.trial = trial_of(r);
  // Only "passed" and "failed" say anything about the task; anything else (not_assessed, a
  // missing verdict) is an infrastructure error, outside every denominator.
  std::string v = json_value_or(r, "verdict", "");
  o.outcome = v == "passed"   ? stats::run_outcome::verdict::passed
              : v == "failed" ? stats::run_outcome::verdict::failed
                              : stats::run_outcome::verdict::error;
  if (o.outcome == stats::run_outcome::verdict::error)
    o.error_message = report_text::error_message_of(r);
  o.wall_ms = json_find<double>(json_member(r, "timings"), "wall_ms");
  const json& u = json_member(r, "usage");
  o.input_tokens = json_find<uint64_t>(u, "input_tokens");
  o.output_tokens = json_find<uint64_t>(u, "output_tokens");
  o.cost_usd = json_find<double>(u, "cost_usd");
  o.grading_digest = json_value_or(json_member(r, "grading"), "digest", "");
  o.regraded = json_member(r, "regraded").is_object();
  o.gateway = json_value_or(u, "source", "") == "gateway";
  const json& latency = json_member(json_member(r, "gateway"), "latency");
  o.ttfb_ms = json_find<double>(latency, "ttfb_ms_p50");
  o.call_ms = json_find<double>(latency, "duration_ms_p50");
  o.credential_wait_ms = json_find<double>(json_member(r, "timings"), "credential_wait_ms");
  o.budget_exhausted =
      json_value_or(json_member(r, "execution"), "outcome", "") == "budget_exhausted";
  const json& ju = json_member(r, "judge_usage");
  if (ju.is_object()) {
    o.judged = true;
    o.judge_input_tokens = json_find<uint64_t>(ju, "input_tokens");
    o.judge_output_tokens = json_find<uint64_t>(ju, "output_tokens");
    o.judge_cost_usd = json_find<double>(ju, "cost_usd");
  }
  return o;
}

// A number field as the JSON text report.html embeds, or "".
std::string number_text(const json& v) { return v.is_number() ? v.dump() : std::string(); }

// A run_detail set aside (record_spill) as bytes: each string as its length (LEB128) and bytes,
// the checks as their count and then each check (a byte for passed, then id and detail).
// Written and read by this process only; what does not decode was damaged, and is read from
// results.jsonl instead.
class detail_codec {
 public:
  static void encode(const run_detail& d, std::string& out) {
    out.clear();
    put(out, d.score);
    put(out, d.wall_ms);
    put(out, d.error_kind);
    put_size(out, d.checks.size());
    for (const auto& c : d.checks) {
      out += static_cast<char>(c.passed ? 1 : 0);
      put(out, c.id);
      put(out, c.detail);
    }
  }

  static std::optional<run_detail> decode(std::string_view in) {
    run_detail d;
    uint64_t checks = 0;
    if (!get(in, d.score) || !get(in, d.wall_ms) || !get(in, d.error_kind) || !get_size(in, checks))
      return std::nullopt;
    if (checks > in.size()) return std::nullopt;  // each check takes at least 3 bytes
    d.checks.resize(static_cast<size_t>(checks));
    for (auto& c : d.checks) {
      if (in.empty() || static_cast<unsigned char>(in[0]) > 1) return std::nullopt;
      c.passed = in[0] == 1;
      in.remove_prefix(1);
      if (!get(in, c.id) || !get(in, c.detail)) return std::nullopt;
    }
    if (!in.empty()) return std::nullopt;
    return d;
  }

 private:
  static void put_size(std::string& out, uint64_t n) {
    do {
      const auto low = static_cast<unsigned char>(n & 0x7F);
      n >>= 7;
      out += static_cast<char>(n ? low | 0x80 : low);
    } while (n);
  }
  static void put(std::string& out, std::string_view s) {
    put_size(out, s.size());
    out.append(s);
  }
  static bool get_size(std::string_view& in, uint64_t& n) {
    n = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (in.empty()) return false;
      const auto byte = static_cast<unsigned char>(in[0]);
      in.remove_prefix(1);
      n |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  }
  static bool get(std::string_view& in, std::string& s) {
    uint64_t n = 0;
    if (!get_size(in, n) || n > in.size()) return false;
    s.assign(in.substr(0, static_cast<size_t>(n)));
    in.remove_prefix(static_cast<size_t>(n));
    return true;
  }
};

}  // namespace

run_detail detail_of(const json& r) {
  run_detail d;
  const json& grading = json_member(r, "grading");
  const json& checks = json_member(grading, "checks");
  if (checks.is_array()) {
    d.checks.reserve(checks.size());
    for (const auto& c : checks)
      d.checks.push_back(
          {json_value_or(c, "id", ""), report_text::passed(c), json_value_or(c, "detail", "")});
  }
  d.score = number_text(json_member(grading, "score"));
  d.wall_ms = number_text(json_member(json_member(r, "timings"), "wall_ms"));
  d.error_kind = json_value_or(json_member(r, "execution"), "error_kind", "");
  if (d.error_kind.empty() && json_value_or(grading, "status", "") == "error")
    d.error_kind = "grader";
  return d;
}

const record_fields& report_fields() {
  // What outcome_of, the renderers (report_text, markdown.cpp, junit.cpp, html.cpp) and the
  // index's visitors (compare's fixture digests, a run's planned-runs tally) read.
  static const record_fields fields{"schema",
                                    "run_id",
                                    "suite",
                                    "verdict",
                                    "trial",
                                    "candidate.id",
                                    "fixture.id",
                                    "fixture.digest",
                                    "timings.wall_ms",
                                    "timings.credential_wait_ms",
                                    "usage.input_tokens",
                                    "usage.output_tokens",
                                    "usage.cost_usd",
                                    "usage.source",
                                    "gateway.latency.ttfb_ms_p50",
                                    "gateway.latency.duration_ms_p50",
                                    "execution.outcome",
                                    "judge_usage.input_tokens",
                                    "judge_usage.output_tokens",
                                    "judge_usage.cost_usd",
                                    "execution.status",
                                    "execution.error",
                                    "execution.error_kind",
                                    "grading.status",
                                    "grading.digest",
                                    "regraded.at",
                                    "grading.error",
                                    "grading.score",
                                    "grading.checks[].id",
                                    "grading.checks[].passed",
                                    "grading.checks[].detail"};
  return fields;
}

// Indexes records one at a time: each becomes a compact entry, and an entry of the same
// (candidate, fixture, trial) seen before is marked superseded (latest_records' rule).
class run_index::builder {
 public:
  builder(run_index& index, bool newest_only)
      : index_(index), newest_only_(newest_only), newest_(trial_less{&index.outcomes_}) {}

  void add(const json& record, record_location where,
           std::optional<record_location> aside = std::nullopt) {
    ++index_.seen_;
    if (index_.suite_.empty()) index_.suite_ = json_value_or(record, "suite", "");
    index_.outcomes_.push_back(outcome_of(record));
    index_.run_ids_.push_back(json_value_or(record, "run_id", ""));
    index_.where_.push_back(where);
    if (aside) index_.aside_.push_back(*aside);
    superseded_.push_back(false);
    if (!newest_only_) return;
    const size_t i = index_.outcomes_.size() - 1;
    auto [it, inserted] = newest_.insert(i);
    if (inserted) return;
    superseded_[*it] = true;
    auto node = newest_.extract(it);
    node.value() = i;  // the same trial, so the same place in the set
    newest_.insert(std::move(node));
  }

  // Drops the superseded entries, keeping record order.
  void finish() {
    newest_.clear();
    size_t kept = 0;
    for (size_t i = 0; i < superseded_.size(); ++i) {
      if (superseded_[i]) continue;
      if (kept != i) {
        index_.outcomes_[kept] = std::move(index_.outcomes_[i]);
        index_.run_ids_[kept] = std::move(index_.run_ids_[i]);
        index_.where_[kept] = index_.where_[i];
        if (!index_.aside_.empty()) index_.aside_[kept] = index_.aside_[i];
      }
      ++kept;
    }
    index_.outcomes_.resize(kept);
    index_.run_ids_.resize(kept);
    index_.where_.resize(kept);
    if (!index_.aside_.empty()) index_.aside_.resize(kept);
    superseded_.clear();
  }

 private:
  // Orders entry positions by the trial they record.
  struct trial_less {
    const std::vector<stats::run_outcome>* outcomes;
    bool operator()(size_t a, size_t b) const {
      const auto& x = (*outcomes)[a];
      const auto& y = (*outcomes)[b];
      return std::tie(x.candidate, x.fixture, x.trial) < std::tie(y.candidate, y.fixture, y.trial);
    }
  };

  run_index& index_;
  bool newest_only_;
  std::set<size_t, trial_less> newest_;  // the newest entry of each trial so far
  std::vector<bool> superseded_;
};

struct run_index::incremental::state {
  explicit state(std::filesystem::path file)
      : results_file(std::move(file)), b(index, /*newest_only=*/true) {}
  std::filesystem::path results_file;
  run_index index;
  builder b;
  // The fields read back are set aside as they are parsed; without a temporary file (or once
  // writing it failed) runs are read back from results.jsonl, which only costs more time.
  result<record_spill> spill = record_spill::create();
  std::string encoded;  // one run's detail, as set aside
};

run_index::incremental::incremental(std::filesystem::path results_file)
    : s_(std::make_unique<state>(std::move(results_file))) {}
run_index::incremental::incremental(incremental&&) noexcept = default;
run_index::incremental::~incremental() = default;

status run_index::incremental::add(const json& record, record_location where) {
  std::optional<record_location> aside;
  if (s_->spill) {
    detail_codec::encode(detail_of(record), s_->encoded);
    auto at = s_->spill->add(s_->encoded);
    if (at)
      aside = *at;
    else
      s_->spill = std::unexpected(std::move(at).error());
  }
  s_->b.add(record, where, aside);
  return {};
}

status run_index::incremental::add_line(std::string_view line, record_location where) {
  if (line.empty()) return {};
  json record = parse_record(line, &report_fields());
  return record.is_null() ? status{} : add(record, where);
}

result<run_index> run_index::incremental::finish() && {
  run_index& index = s_->index;
  if (s_->spill && index.aside_.size() == index.seen_) {
    auto reader = std::move(*s_->spill).finish();
    if (reader) index.aside_reader_ = std::move(*reader);
  }
  if (!index.aside_reader_) index.aside_.clear();
  s_->b.finish();
  if (!index.empty()) index.reader_ = EB_TRY(record_reader::open(s_->results_file));
  return std::move(index);
}

bool grading_selection::selects(const json& record) const {
  if (original) return !json_member(record, "regraded").is_object();
  const std::string d = json_value_or(json_member(record, "grading"), "digest", "");
  return std::find(digests.begin(), digests.end(), d) != digests.end();
}

std::string grading_selection::label() const {
  if (original) return "original";
  std::vector<std::string> parts;
  for (const auto& d : digests) parts.push_back(d.substr(0, 12));
  return fmt::format("{}", fmt::join(parts, "+"));
}

result<grading_selection> select_gradings(const results_dir& dir,
                                          std::span<const std::string> given) {
  grading_selection out;
  std::map<std::string, uint64_t> digests;
  static const record_fields fields{"grading.digest"};
  bool scanned = false;
  for (const auto& g : given) {
    if (g == "original") {
      out.original = true;
      continue;
    }
    if (!scanned) {
      EB_TRY(dir.for_each_record(fields, [&](const json& r, record_location) -> status {
        const std::string d = json_value_or(json_member(r, "grading"), "digest", "");
        if (!d.empty()) ++digests[d];
        return {};
      }));
      scanned = true;
    }
    std::vector<std::string> matches;
    for (const auto& [d, n] : digests)
      if (g.size() >= 8 && d.starts_with(g)) matches.push_back(d);
    if (matches.size() != 1) {
      std::string known;
      for (const auto& [d, n] : digests) known += fmt::format("\n  {} ({} record(s))", d, n);
      if (known.empty()) known = " none (the records predate grading digests)";
      return make_error(error_kind::invalid_argument,
                        "--grading {}: {} grading (give \"original\", or a digest or its first "
                        "8+ hex digits); the records have:{}",
                        g, matches.empty() ? "no such" : "more than one", known);
    }
    out.digests.push_back(matches.front());
  }
  if (out.original && !out.digests.empty())
    return make_error(error_kind::invalid_argument,
                      "--grading original selects each run's own grading: give it alone");
  return out;
}

result<run_index> run_index::of_results(const results_dir& dir, const record_visitor& visit,
                                        const grading_selection* grading) {
  incremental index(dir.results_file());
  auto add = [&](const json& record, record_location where) -> status {
    if (visit) EB_TRY(visit(record));
    if (grading && !grading->empty() && !grading->selects(record)) return {};
    return index.add(record, where);
  };
  EB_TRY(dir.for_each_record(report_fields(), add));
  return std::move(index).finish();
}

run_index run_index::of_records(std::span<const json> records, bool newest_only) {
  run_index index;
  builder b(index, newest_only);
  for (size_t i = 0; i < records.size(); ++i) b.add(records[i], {i, 0});
  b.finish();
  index.memory_ = records;
  return index;
}

std::string run_index::suite_name(std::string fallback) const {
  return suite_.empty() ? fallback : suite_;
}

result<run_detail> run_index::read(size_t run) const {
  ++reads_.n;
  if (aside_reader_) {
    thread_local std::string bytes;
    if (aside_reader_->read(aside_[run], bytes))
      if (auto d = detail_codec::decode(bytes)) return std::move(*d);
  }
  if (reader_) return detail_of(EB_TRY(reader_->read(where_[run], &report_fields())));
  return detail_of(memory_[static_cast<size_t>(where_[run].offset)]);
}

std::vector<stats::run_outcome> outcomes_from_records(const std::vector<json>& records) {
  std::vector<stats::run_outcome> out;
  out.reserve(records.size());
  for (const auto& r : records) out.push_back(outcome_of(r));
  return out;
}

std::vector<json> latest_records(const std::vector<json>& records) {
  std::map<std::tuple<std::string, std::string, int>, size_t> last;
  for (size_t i = 0; i < records.size(); ++i)
    last[{candidate_of(records[i]), fixture_of(records[i]), trial_of(records[i])}] = i;
  if (last.size() == records.size()) return records;
  std::vector<bool> keep(records.size(), false);
  for (const auto& [key, i] : last) keep[i] = true;
  std::vector<json> out;
  out.reserve(last.size());
  for (size_t i = 0; i < records.size(); ++i)
    if (keep[i]) out.push_back(records[i]);
  return out;
}

}  // namespace report
}  // namespace evalbox::harness
