// `evalbox compare`: the paired comparison of two results directories that share fixtures (the
// candidates of A against those of B), or of two candidates within one results directory.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "base/log.h"
#include "harness/cli/commands.h"
#include "harness/report/compare.h"
#include "harness/results/results.h"

namespace evalbox::harness::cli {

namespace {

struct compare_args {
  std::vector<std::string> dirs;
  std::string candidate;
  std::string baseline;
  bool json_out = false;
  double level = 0.95;
  std::vector<std::string> grading;    // A's side: an older grading
  std::vector<std::string> grading_b;  // B's side (or the one directory's other side)
};

// A results directory's side of the comparison, read one record at a time.
result<harness::compare_side> load(const std::string& dir,
                                   std::span<const std::string> grading = {}) {
  harness::results_dir results(dir);
  std::error_code ec;
  if (!std::filesystem::exists(results.results_file(), ec))
    return make_error(error_kind::not_found, "{}: no results.jsonl here", dir);
  harness::grading_selection selection;
  if (!grading.empty()) selection = EB_TRY(harness::select_gradings(results, grading));
  auto side = EB_TRY(harness::compare_side::of_results(results, &selection));
  if (side.outcomes.empty())
    return make_error(error_kind::not_found, "{}: results.jsonl has no complete record{}", dir,
                      grading.empty() ? "" : " of that grading");
  return side;
}

int compare_command(const compare_args& a) {
  if (a.dirs.size() == 1 && a.grading.empty() && a.grading_b.empty() &&
      (a.candidate.empty() || a.baseline.empty())) {
    fmt::print(stderr,
               "compare within one results directory needs --candidate and --baseline, or "
               "--grading (an older grading against the newest)\n");
    return exit_usage;
  }
  if (!(a.level > 0.0 && a.level < 1.0)) {
    fmt::print(stderr, "--level {} is not in (0, 1)\n", a.level);
    return exit_usage;
  }
  harness::compare_settings req;
  auto base = load(a.dirs[0], a.grading);
  if (!base) {
    fmt::print(stderr, "{}\n", base.error().message);
    return exit_usage;
  }
  auto label = [](const std::string& dir, const std::vector<std::string>& g) {
    return g.empty() ? dir : fmt::format("{} (grading {})", dir, fmt::join(g, "+"));
  };
  req.baseline_label = a.dirs.size() == 1 && a.grading.empty() && !a.grading_b.empty()
                           ? fmt::format("{} (newest grading)", a.dirs[0])
                           : label(a.dirs[0], a.grading);
  std::optional<harness::compare_side> cand;
  if (a.dirs.size() == 2) {
    auto other = load(a.dirs[1], a.grading_b);
    if (!other) {
      fmt::print(stderr, "{}\n", other.error().message);
      return exit_usage;
    }
    cand = std::move(*other);
    req.candidate_label = label(a.dirs[1], a.grading_b);
  } else if (!a.grading.empty() || !a.grading_b.empty()) {
    // The same runs under another grading: the newest unless --grading-b names one.
    auto newest = load(a.dirs[0], a.grading_b);
    if (!newest) {
      fmt::print(stderr, "{}\n", newest.error().message);
      return exit_usage;
    }
    cand = std::move(*newest);
    req.candidate_label = a.grading_b.empty() ? fmt::format("{} (newest grading)", a.dirs[0])
                                              : label(a.dirs[0], a.grading_b);
  } else {
    req.candidate_label = a.dirs[0];  // within one directory: the same side twice
  }
  if (!a.candidate.empty()) req.candidate = a.candidate;
  if (!a.baseline.empty()) req.baseline = a.baseline;
  req.options.level = a.level;
  auto r = harness::compare_results(*base, cand ? *cand : *base, req);
  if (!r) {
    fmt::print(stderr, "{}\n", r.error().message);
    return exit_usage;
  }
  if (a.json_out)
    fmt::print("{}", pretty_json(harness::compare_to_json(*r)));
  else
    fmt::print("{}", harness::render_compare_table(*r));
  return exit_ok;
}

}  // namespace

void register_compare(CLI::App& app, action& out) {
  auto a = std::make_shared<compare_args>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Paired comparison over shared fixtures: per-fixture differences, a paired "
      "interval, the sign-flip and exact McNemar tests, and a verdict.\n\n"
      "  evalbox compare A B                 every candidate id in both: B's against A's\n"
      "  evalbox compare A B --candidate X --baseline Y   X in B against Y in A\n"
      "  evalbox compare R --candidate X --baseline Y     both in one results directory\n"
      "  evalbox compare R --grading original   each candidate as its runs graded themselves "
      "against the same runs graded again (evalbox regrade): what the changed checks did");
  cmd->add_option("results", a->dirs, "RESULTS_A [RESULTS_B]: A holds the baseline side")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--candidate", a->candidate,
                  "the candidate id (in B, or in the one directory; default: the --baseline "
                  "id, or without either every id in both)");
  cmd->add_option("--baseline", a->baseline, "the baseline id (in A; default: the --candidate id)");
  cmd->add_option("--level", a->level, "confidence level of the interval and tests")
      ->capture_default_str();
  cmd->add_flag("--json", a->json_out, "print evalbox.compare.v1 JSON instead of a table");
  cmd->add_option("--grading", a->grading,
                  "A's side as an older grading of its runs: original (before any evalbox "
                  "regrade) or grading digests (repeatable, 8+ hex digits); with one results "
                  "directory, against the newest grading of the same runs (or --grading-b)");
  cmd->add_option("--grading-b", a->grading_b,
                  "B's side (or, with one results directory, the other side) as an older "
                  "grading, as --grading names one: two gradings of the same runs compared");
  cmd->callback([&out, a] { out = [a] { return compare_command(*a); }; });
}

}  // namespace evalbox::harness::cli
