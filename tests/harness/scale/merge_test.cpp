// evalbox merge: shards join into the directory one process would have written (the summary
// byte for byte), idempotently; duplicates are dropped, conflicts and foreign shards refused
// before anything is written; missing runs are listed per shard, and a partial merge says in
// every report how many are missing.
#include "harness/scale/merge.h"

#include <sys/stat.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include <fstream>

#include "base/digest.h"
#include "base/fs.h"
#include "harness/results/results.h"

namespace evalbox::harness::scale {
namespace {

namespace fs = std::filesystem;

plan_identity example_plan(int shards) {
  plan_identity p;
  p.suite = "synthetic";
  p.suite_digest = sha256_hex("suite");
  for (const char* id : {"alpha", "beta", "gamma", "delta"})
    p.fixtures.push_back({id, sha256_hex(id)});
  for (const char* id : {"baseline", "tuned", "oracle"})
    p.candidates.push_back({id, "command", sha256_hex(std::string("candidate ") + id)});
  p.trials = 2;
  p.baseline = "baseline";
  p.shard_count = shards;
  return p;
}

// How many runs of `p` shard `k` holds (those `which` selects).
size_t shard_size(const plan_identity& p, int k,
                  const std::function<bool(const matrix_run&)>& which = {}) {
  size_t n = 0;
  for (const auto& r : matrix_runs(p)) n += r.shard == k && (!which || which(r));
  return n;
}

// A record as the runner writes it; the verdict depends on the run so that the statistics
// have something to compute.
json record_of(const plan_identity& p, const matrix_run& r, std::string verdict = "") {
  const auto& c = p.candidates[r.candidate];
  if (verdict.empty())
    verdict = c.id == "oracle" || (r.fixture + r.trial + (c.id == "tuned")) % 2 == 0 ? "passed"
                                                                                     : "failed";
  return {{"schema", "evalbox.run.v1"},
          {"run_id", r.run_id},
          {"suite", p.suite},
          {"fixture", {{"id", p.fixtures[r.fixture].id}, {"digest", p.fixtures[r.fixture].digest}}},
          {"candidate", {{"id", c.id}, {"adapter", c.adapter}, {"digest", c.digest}}},
          {"trial", r.trial},
          {"attempts", 1},
          {"execution", {{"status", "completed"}, {"error", nullptr}}},
          {"grading",
           {{"status", "completed"},
            {"checks", {{{"id", "tests"}, {"passed", verdict == "passed"}, {"detail", ""}}}},
            {"error", nullptr}}},
          {"verdict", verdict},
          {"usage", {{"input_tokens", 100 + r.fixture}, {"output_tokens", nullptr}}},
          {"timings", {{"wall_ms", 1000 + 10 * r.fixture + r.trial}}}};
}

// As `evalbox run` leaves a shard: plan.json, runs/<id>/ and results.jsonl.
void record(const fs::path& dir, const json& r) {
  results_dir results(dir);
  ASSERT_TRUE(results.create());
  ASSERT_TRUE(make_dirs(results.run_dir(r["run_id"])));
  ASSERT_TRUE(write_file(results.run_dir(r["run_id"]) / "transcript.jsonl", "{}\n"));
  ASSERT_TRUE(results.record(r));
}

// Shard k of `p` in root/shards/k with every run but those `skip` says.
fs::path make_shard(const fs::path& root, plan_identity p, int k,
                    const std::function<bool(const matrix_run&)>& skip = {}) {
  fs::path dir = root / "shards" / std::to_string(k);
  p.shard_index = k;
  EXPECT_TRUE(make_dirs(dir));
  EXPECT_TRUE(write_plan(dir, p));
  for (const auto& r : matrix_runs(p))
    if (r.shard == k && !(skip && skip(r))) record(dir, record_of(p, r));
  return dir;
}

std::string slurp(const fs::path& f) { return read_file(f).value_or("<unreadable>"); }

struct fixture_dirs {
  temp_dir tmp;
  plan_identity plan = example_plan(3);
  std::vector<fs::path> shards;
  fs::path out;
  fixture_dirs() {
    for (int k = 0; k < 3; ++k) shards.push_back(make_shard(tmp.path(), plan, k));
    out = tmp.path() / "merged";
  }
  result<merge_report> merge(std::vector<fs::path> dirs = {}, bool partial = false) {
    merge_options o;
    o.shards = dirs.empty() ? shards : dirs;
    o.into = out;
    o.partial = partial;
    return merge_shards(o);
  }
};

TEST(Merge, SummaryEqualsOneProcessByteForByte) {
  fixture_dirs f;
  auto m = f.merge();
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->written);
  EXPECT_EQ(m->planned, 4u * 3u * 2u);
  EXPECT_EQ(m->recorded, m->planned);
  EXPECT_EQ(m->missing, 0u);
  EXPECT_EQ(m->added, m->planned);
  // One process: the same records, in one directory, reported as `evalbox run` reports.
  fs::path one = f.tmp.path() / "one";
  for (const auto& r : matrix_runs(f.plan)) record(one, record_of(f.plan, r));
  auto index = run_index::of_results(results_dir(one));
  ASSERT_TRUE(index);
  ASSERT_TRUE(write_reports(one, *index, f.plan.suite, f.plan.baseline));
  EXPECT_EQ(slurp(f.out / "summary.json"), slurp(one / "summary.json"));
  auto summary = read_json_file(f.out / "summary.json");
  ASSERT_TRUE(summary);
  EXPECT_FALSE((*summary)["runs"].contains("missing"))
      << "a complete merge's summary has nothing about missing runs";
  auto plan = read_plan(f.out);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->merged, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(plan->matrix_digest(), f.plan.matrix_digest());
}

TEST(Merge, RunDirectoriesAreHardLinked) {
  fixture_dirs f;
  ASSERT_TRUE(f.merge());
  const auto id = matrix_runs(f.plan).front().run_id;
  struct stat a {
  }, b{};
  ASSERT_EQ(::stat((f.tmp.path() / "shards/0/runs" / id / "run.json").c_str(), &a), 0);
  ASSERT_EQ(::stat((f.out / "runs" / id / "run.json").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino) << "same filesystem: a link, not a copy";
  EXPECT_TRUE(fs::exists(f.out / "runs" / id / "transcript.jsonl"));
}

TEST(Merge, CopyMakesAnIndependentTree) {
  fixture_dirs f;
  merge_options o;
  o.shards = f.shards;
  o.into = f.out;
  o.copy = true;
  auto m = merge_shards(o);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->linked, 0u);
  EXPECT_EQ(m->copied, 2 * m->planned) << "run.json and transcript.jsonl of every run";
  const auto id = matrix_runs(f.plan).front().run_id;
  struct stat a {
  }, b{};
  ASSERT_EQ(::stat((f.tmp.path() / "shards/0/runs" / id / "run.json").c_str(), &a), 0);
  ASSERT_EQ(::stat((f.out / "runs" / id / "run.json").c_str(), &b), 0);
  EXPECT_NE(a.st_ino, b.st_ino);
  EXPECT_EQ(slurp(f.out / "runs" / id / "run.json"),
            slurp(f.tmp.path() / "shards/0/runs" / id / "run.json"));
  // A symlink a run left is kept as a symlink, never followed.
  const auto id2 = matrix_runs(f.plan)[3].run_id;
  const int k = matrix_runs(f.plan)[3].shard;
  fixture_dirs g;
  fs::create_symlink("/etc/shadow", g.shards[k] / "runs" / id2 / "native-link");
  ASSERT_TRUE(g.merge());
  EXPECT_TRUE(fs::is_symlink(g.out / "runs" / id2 / "native-link"));
  EXPECT_EQ(fs::read_symlink(g.out / "runs" / id2 / "native-link"), "/etc/shadow");
}

TEST(Merge, MergingAgainChangesNothing) {
  fixture_dirs f;
  ASSERT_TRUE(f.merge());
  auto before = tree_digest(f.out);
  ASSERT_TRUE(before);
  auto again = f.merge();
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->added, 0u);
  EXPECT_EQ(again->duplicates, again->planned) << "every record was already there";
  EXPECT_EQ(tree_digest(f.out).value_or(""), *before);
  auto one = f.merge({f.shards[1]});
  ASSERT_TRUE(one) << "a shard already merged, alone: " << one.error().message;
  EXPECT_EQ(one->added, 0u);
  EXPECT_EQ(tree_digest(f.out).value_or(""), *before);
}

TEST(Merge, IncrementalMergesReachTheSameResult) {
  fixture_dirs f;
  auto first = f.merge({f.shards[2]}, /*partial=*/true);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->missing, shard_size(f.plan, 0) + shard_size(f.plan, 1));
  auto rest = f.merge({f.shards[0], f.shards[1]});
  ASSERT_TRUE(rest) << rest.error().message;
  EXPECT_EQ(rest->missing, 0u);
  EXPECT_EQ(read_plan(f.out)->merged, (std::vector<int>{0, 1, 2}));
  fixture_dirs g;
  ASSERT_TRUE(g.merge());
  EXPECT_EQ(slurp(f.out / "summary.json"), slurp(g.out / "summary.json"));
  EXPECT_EQ(slurp(f.out / "report.md").find("Partial"), std::string::npos)
      << "once complete, the report no longer says anything is missing";
}

TEST(Merge, AShardGivenTwiceIsDeduplicated) {
  fixture_dirs f;
  fs::path copy = f.tmp.path() / "copy-of-1";
  fs::copy(f.shards[1], copy, fs::copy_options::recursive);
  auto m = f.merge({f.shards[0], f.shards[1], copy, f.shards[2]});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->duplicates, shard_size(f.plan, 1));
  EXPECT_EQ(m->added, m->planned);
  auto ids = results_dir(f.out).recorded_ids();
  ASSERT_TRUE(ids);
  size_t lines = 0;
  ASSERT_TRUE(results_dir(f.out).for_each_record([&](const json&, record_location) -> status {
    ++lines;
    return {};
  }));
  EXPECT_EQ(lines, ids->size()) << "one line per run id";
}

TEST(Merge, TwoDifferentRecordsOfOneRunAreRefusedNamingBoth) {
  fixture_dirs f;
  // Another attempt at shard 1 that ended differently for one run.
  fs::path other = f.tmp.path() / "rerun-of-1";
  plan_identity p = f.plan;
  p.shard_index = 1;
  ASSERT_TRUE(make_dirs(other));
  ASSERT_TRUE(write_plan(other, p));
  std::string conflicting;
  int n = 0;
  for (const auto& r : matrix_runs(p)) {
    if (r.shard != 1) continue;
    json rec = record_of(p, r);
    if (++n == 3) {
      rec["verdict"] = rec["verdict"] == "passed" ? "failed" : "passed";
      conflicting = r.run_id;
    }
    record(other, rec);
  }
  auto m = f.merge({f.shards[0], f.shards[1], f.shards[2], other});
  ASSERT_FALSE(m);
  const std::string& msg = m.error().message;
  EXPECT_NE(msg.find(conflicting), std::string::npos) << msg;
  EXPECT_NE(msg.find((f.shards[1] / "results.jsonl").string() + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find((other / "results.jsonl").string() + ":3"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(f.out)) << "a refused merge writes nothing";
}

TEST(Merge, AShardOfAnotherSuiteOrFixtureSetIsRefused) {
  fixture_dirs f;
  plan_identity changed = f.plan;
  changed.fixtures[2].digest = sha256_hex("edited");
  fs::path other = make_shard(f.tmp.path() / "other", changed, 1);
  auto m = f.merge({f.shards[0], other});
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("different plans"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("fixture 'gamma' differs"), std::string::npos)
      << m.error().message;
  plan_identity renamed = f.plan;
  renamed.suite = "another";
  fs::path another = make_shard(f.tmp.path() / "another", renamed, 1);
  auto n = f.merge({f.shards[0], another});
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message.find("suite 'synthetic' vs 'another'"), std::string::npos)
      << n.error().message;
  plan_identity resplit = f.plan;
  resplit.shard_count = 4;
  fs::path four = make_shard(f.tmp.path() / "four", resplit, 1);
  auto o = f.merge({f.shards[0], four});
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().message.find("the same N"), std::string::npos) << o.error().message;
  EXPECT_FALSE(fs::exists(f.out));
}

TEST(Merge, UnreadableOrForeignShardsAreRefused) {
  fixture_dirs f;
  fs::path none = f.tmp.path() / "no-plan";
  ASSERT_TRUE(make_dirs(none));
  auto a = f.merge({f.shards[0], none});
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("no plan.json"), std::string::npos) << a.error().message;
  auto b = f.merge({f.shards[0], f.tmp.path() / "does-not-exist"});
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("no such directory"), std::string::npos);
  // results.jsonl that cannot be read (a directory: reading it fails even as root).
  fs::path broken = f.tmp.path() / "broken";
  fs::copy(f.shards[1], broken, fs::copy_options::recursive);
  fs::remove(broken / "results.jsonl");
  fs::create_directory(broken / "results.jsonl");
  auto c = f.merge({f.shards[0], broken});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(broken.string()), std::string::npos) << c.error().message;
  ASSERT_TRUE(write_file(f.shards[2] / "plan.json", "{\"schema\": \"evalbox.plan.v1\"}"));
  auto d = f.merge();
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find(f.shards[2].string()), std::string::npos) << d.error().message;
  EXPECT_FALSE(fs::exists(f.out));
}

TEST(Merge, MissingRunsAreListedPerShardAndNothingIsWritten) {
  fixture_dirs f;
  fs::path partial = f.tmp.path() / "partial";
  fs::path shard1 =
      make_shard(partial, f.plan, 1, [](const matrix_run& r) { return r.trial == 1; });
  auto m = f.merge({f.shards[0], shard1});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_FALSE(m->written);
  EXPECT_FALSE(fs::exists(f.out)) << "without --partial nothing is written";
  ASSERT_EQ(m->gaps.size(), 2u);
  EXPECT_EQ(m->gaps[0].shard, 1);
  EXPECT_EQ(m->gaps[0].dirs, std::vector<fs::path>{shard1});
  const size_t trial_1 = shard_size(f.plan, 1, [](const matrix_run& r) { return r.trial == 1; });
  ASSERT_GT(trial_1, 0u);
  EXPECT_EQ(m->gaps[0].planned, shard_size(f.plan, 1));
  EXPECT_EQ(m->gaps[0].missing, trial_1) << "the trial-1 runs of shard 1";
  ASSERT_EQ(m->gaps[0].first_missing.size(), trial_1);
  EXPECT_EQ(m->gaps[1].shard, 2);
  EXPECT_TRUE(m->gaps[1].dirs.empty()) << "shard 2 was not given";
  EXPECT_EQ(m->gaps[1].missing, shard_size(f.plan, 2));
  EXPECT_EQ(m->missing, trial_1 + shard_size(f.plan, 2));
}

TEST(Merge, AShardNeverGivenListsItsFirstMissingRunsAndCountsTheRest) {
  temp_dir tmp;
  plan_identity p = example_plan(3);
  p.trials = 10;  // about 40 runs per shard
  fs::path only = make_shard(tmp.path(), p, 0);
  merge_options o;
  o.shards = {only};
  o.into = tmp.path() / "merged";
  auto m = merge_shards(o);
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->gaps.size(), 2u);
  for (const auto& g : m->gaps) {
    EXPECT_EQ(g.missing, shard_size(p, g.shard));
    EXPECT_EQ(g.planned, shard_size(p, g.shard));
    ASSERT_EQ(g.first_missing.size(), shard_gap::listed) << "names are listed up to a bound";
  }
  // In plan order: the shard's first run is the first named.
  for (const auto& r : matrix_runs(p))
    if (r.shard == 1) {
      EXPECT_NE(m->gaps[0].first_missing.front().find(r.run_id), std::string::npos);
      break;
    }
  EXPECT_EQ(m->missing, shard_size(p, 1) + shard_size(p, 2));
}

TEST(Merge, APartialMergeSaysHowManyRunsAreMissingInEveryReport) {
  fixture_dirs f;
  auto m = f.merge({f.shards[0], f.shards[2]}, /*partial=*/true);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->written);
  const size_t lost = shard_size(f.plan, 1);
  EXPECT_EQ(m->missing, lost);
  auto summary = read_json_file(f.out / "summary.json");
  ASSERT_TRUE(summary);
  EXPECT_EQ((*summary)["runs"]["missing"], lost);
  EXPECT_EQ((*summary)["runs"]["planned"], 24);
  EXPECT_EQ((*summary)["runs"]["total"], 24 - lost);
  EXPECT_NE(slurp(f.out / "report.md")
                .find(fmt::format("Partial results: {} of the plan's 24 runs are missing", lost)),
            std::string::npos);
  EXPECT_NE(slurp(f.out / "report.html").find(fmt::format("data-missing=\"{}\"", lost)),
            std::string::npos);
}

TEST(Merge, OlderRecordsOfARerunAndRecordsOfAnotherPlanAreLeftOut) {
  fixture_dirs f;
  const auto runs = matrix_runs(f.plan);
  const matrix_run& r =
      *std::find_if(runs.begin(), runs.end(), [](const matrix_run& x) { return x.shard == 0; });
  // A rerun (--no-resume) appends a newer record of the same run; a changed fixture's record
  // has a run id the plan does not have.
  record(f.shards[0], record_of(f.plan, r, "failed"));
  json foreign = record_of(f.plan, r);
  foreign["run_id"] = "00000000000000ff";
  record(f.shards[0], foreign);
  auto m = f.merge();
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->superseded, 1u);
  EXPECT_EQ(m->foreign, 1u);
  bool found = false;
  ASSERT_TRUE(results_dir(f.out).for_each_record([&](const json& rec, record_location) -> status {
    EXPECT_NE(rec["run_id"], "00000000000000ff");
    if (rec["run_id"] == r.run_id) {
      found = true;
      EXPECT_EQ(rec["verdict"], "failed") << "the newest record of a run counts";
    }
    return {};
  }));
  EXPECT_TRUE(found);
}

TEST(Merge, TheSameRecordInAnotherFormIsADuplicateNotAConflict) {
  fixture_dirs f;
  // Shard 1 again, its records rewritten by another JSON tool (a space evalbox does not write).
  fs::path other = f.tmp.path() / "reformatted-1";
  fs::copy(f.shards[1], other, fs::copy_options::recursive);
  std::string text;
  ASSERT_TRUE(results_dir(f.shards[1]).for_each_record([&](const json& r, record_location) {
    std::string line = r.dump();
    line.insert(1, " ");
    text += line + "\n";
    return status{};
  }));
  ASSERT_TRUE(write_file(other / "results.jsonl", text));
  auto m = f.merge({f.shards[0], f.shards[1], other, f.shards[2]});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->duplicates, shard_size(f.plan, 1));
  EXPECT_EQ(m->added, m->planned);
}

// The merge counts a line as a record exactly when the reports do: a line results_dir skips
// (garbled, not an object, nested deeper than any record) leaves its run missing, and a run id
// given twice in one line is the last one, as in the document.
TEST(Merge, LinesTheReportsWouldSkipAreNoRecords) {
  fixture_dirs f;
  const auto runs = matrix_runs(f.plan);
  std::vector<matrix_run> mine;
  for (const auto& r : runs)
    if (r.shard == 0) mine.push_back(r);
  ASSERT_GE(mine.size(), 4u);
  std::string text;
  auto line_of = [&](const matrix_run& r) { return canonical_json(record_of(f.plan, r)); };
  // 0: garbled after the keys the merge looks for.
  std::string garbled = line_of(mine[0]);
  garbled.insert(garbled.size() - 1, ",}");
  // 1: nested 600 levels deep in a field.
  json deep = record_of(f.plan, mine[1]);
  std::string nested = std::string(600, '[') + std::string(600, ']');
  std::string deep_line = canonical_json(deep);
  deep_line.insert(deep_line.size() - 1, ",\"extra\":" + nested);
  // 2: an array holding a record.
  std::string array = "[" + line_of(mine[2]) + "]";
  // 3: its run id given twice; the second (a foreign id) counts.
  std::string twice = line_of(mine[3]);
  twice.insert(twice.size() - 1, ",\"run_id\":\"00000000000000ff\"");
  for (const auto& l : {garbled, deep_line, array, twice}) text += l + "\n";
  for (size_t i = 4; i < mine.size(); ++i) text += line_of(mine[i]) + "\n";
  ASSERT_TRUE(write_file(f.shards[0] / "results.jsonl", text));
  size_t records = 0;
  ASSERT_TRUE(results_dir(f.shards[0]).for_each_record([&](const json&, record_location) {
    ++records;
    return status{};
  }));
  EXPECT_EQ(records, mine.size() - 3) << "results_dir reads the twice-keyed line only";
  auto m = f.merge();
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_FALSE(m->written);
  EXPECT_EQ(m->missing, 4u);
  EXPECT_EQ(m->foreign, 1u) << "the line whose last run_id is of no planned run";
  ASSERT_EQ(m->gaps.size(), 1u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NE(m->gaps[0].first_missing[i].find(mine[i].run_id), std::string::npos);
}

TEST(Merge, ATornLastLineOfAnInterruptedMergeIsDropped) {
  fixture_dirs f;
  ASSERT_TRUE(f.merge({f.shards[0]}, /*partial=*/true));
  ASSERT_TRUE(append_durable(f.out / "results.jsonl", "{\"schema\":\"evalbox.run.v1\",\"run_"));
  auto m = f.merge({f.shards[1], f.shards[2]});
  ASSERT_TRUE(m) << m.error().message;
  auto ids = results_dir(f.out).recorded_ids();
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->size(), m->planned) << "no record was swallowed by the torn line";
}

TEST(Merge, IntoAnotherRunsDirectoryIsRefused) {
  fixture_dirs f;
  merge_options o;
  o.shards = {f.shards[0], f.shards[1]};
  o.into = f.shards[2];
  auto m = merge_shards(o);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("not a merge"), std::string::npos) << m.error().message;
  o.into = f.shards[1];
  auto n = merge_shards(o);
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message.find("both a shard and --into"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::harness::scale

namespace evalbox::harness::scale {
namespace {

// Every report a merge writes is the one `evalbox report` writes of the merged directory, byte
// for byte, also when the merge read the runs' files from the shards while it was still
// bringing them in, and when a shard's run directory holds links an attacker planted: a
// transcript that is a symlink to a host file, a run directory that is a symlink.
TEST(Merge, EveryReportEqualsTheReportOfTheMergedDirectory) {
  fixture_dirs f;
  const auto runs = matrix_runs(f.plan);
  auto in_shard = [&](const matrix_run& r) {
    return results_dir(f.shards[static_cast<size_t>(r.shard)]).run_dir(r.run_id);
  };
  ASSERT_TRUE(write_file(f.tmp.path() / "secret", "host secret\n"));
  ASSERT_TRUE(write_file(in_shard(runs[0]) / "workspace.diff", "--- a/x\n+++ b/x\n"));
  ASSERT_TRUE(remove_tree(in_shard(runs[1]) / "transcript.jsonl"));
  fs::create_symlink(f.tmp.path() / "secret", in_shard(runs[1]) / "transcript.jsonl");
  fs::create_symlink("../../../secret", in_shard(runs[2]) / "workspace.diff");
  ASSERT_TRUE(remove_tree(in_shard(runs[3])));
  fs::create_symlink(in_shard(runs[0]), in_shard(runs[3]));
  auto m = f.merge();
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->without_dir, 1u) << "the run directory that is a symlink is not brought";
  EXPECT_FALSE(fs::exists(f.out / ".merge-reports")) << "the reports' staging directory is gone";
  const fs::path copy = f.tmp.path() / "as-merged";
  ASSERT_TRUE(make_dirs(copy));
  for (report_format fmt : all_report_formats)
    fs::copy_file(f.out / report_file_name(fmt), copy / report_file_name(fmt));
  auto index = run_index::of_results(results_dir(f.out));
  ASSERT_TRUE(index) << index.error().message;
  ASSERT_TRUE(write_reports(f.out, *index, f.plan.suite, f.plan.baseline));
  for (report_format fmt : all_report_formats)
    EXPECT_EQ(slurp(copy / report_file_name(fmt)), slurp(f.out / report_file_name(fmt)))
        << report_file_name(fmt);
  const std::string html = slurp(f.out / "report.html");
  EXPECT_EQ(html.find("host secret"), std::string::npos) << "no link is followed out of a run";
  EXPECT_NE(html.find("+++ b/x"), std::string::npos) << "the real diff is embedded";
  EXPECT_NE(html.find(fmt::format("unreadable: runs/{}/transcript.jsonl", runs[1].run_id)),
            std::string::npos);
}

// A first merge that fails midway (here: a run directory nested too deep to bring) leaves a
// directory that merging again finishes, with nothing counted twice and no report of the
// failed attempt.
TEST(Merge, AFirstMergeThatFailedMidwayIsFinishedByMergingAgain) {
  fixture_dirs f;
  const auto runs = matrix_runs(f.plan);
  const matrix_run& late = runs.back();
  fs::path deep = results_dir(f.shards[static_cast<size_t>(late.shard)]).run_dir(late.run_id);
  for (int i = 0; i < 70; ++i) deep /= "d";
  ASSERT_TRUE(make_dirs(deep));
  auto failed = f.merge();
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("nested too deep"), std::string::npos)
      << failed.error().message;
  for (report_format fmt : all_report_formats)
    EXPECT_FALSE(fs::exists(f.out / report_file_name(fmt))) << report_file_name(fmt);
  EXPECT_FALSE(fs::exists(f.out / ".merge-reports"));
  EXPECT_TRUE(fs::exists(f.out / "plan.json")) << "the directory says what it is a merge of";

  ASSERT_TRUE(remove_tree(
      results_dir(f.shards[static_cast<size_t>(late.shard)]).run_dir(late.run_id) / "d"));
  auto m = f.merge();
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->written);
  EXPECT_EQ(m->recorded, m->planned);
  EXPECT_EQ(m->added + m->duplicates, m->planned);
  auto ids = results_dir(f.out).recorded_ids();
  ASSERT_TRUE(ids);
  size_t lines = 0;
  ASSERT_TRUE(results_dir(f.out).for_each_record([&](const json&, record_location) {
    ++lines;
    return status{};
  }));
  EXPECT_EQ(lines, m->planned) << "each run recorded once";
  EXPECT_EQ(ids->size(), m->planned);
  fixture_dirs fresh;
  ASSERT_TRUE(fresh.merge());
  EXPECT_EQ(slurp(f.out / "summary.json"), slurp(fresh.out / "summary.json"));
}

}  // namespace
}  // namespace evalbox::harness::scale
