// suite_run.h, exit_status.h and the protected roots of run_suite: the product rules every
// caller of the runner gets, reached without root.
#include "harness/runner/suite_run.h"

#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

bool has(const std::vector<fs::path>& roots, const fs::path& p) {
  return std::find(roots.begin(), roots.end(), p) != roots.end();
}

suite_spec suite_at(const fs::path& file, std::vector<fs::path> fixture_dirs) {
  suite_spec s;
  s.file = file;
  for (auto& d : fixture_dirs) {
    fixture_spec f;
    f.dir = d;
    s.fixtures.push_back(std::move(f));
  }
  return s;
}

TEST(ProtectedRoots, TheHostHomeIsProtectedForEveryCallerOfTheRunner) {
  runner_options o;
  o.results_dir = "/srv/results/x";
  auto roots = protected_roots_for(suite_at("/srv/suites/s.yaml", {"/srv/fx/a"}), o, "/home/ana");
  EXPECT_TRUE(has(roots, "/home/ana"));
}

TEST(ProtectedRoots, AHomeThatHoldsTheSuiteTheFixturesOrTheResultsIsNotProtectedWholesale) {
  runner_options o;
  o.results_dir = "/srv/results/x";
  EXPECT_FALSE(
      has(protected_roots_for(suite_at("/home/ana/s.yaml", {}), o, "/home/ana"), "/home/ana"))
      << "suite file";
  EXPECT_FALSE(has(protected_roots_for(suite_at("/srv/s.yaml", {"/home/ana/fx"}), o, "/home/ana"),
                   "/home/ana"))
      << "fixture";
  o.results_dir = "/home/ana/results";
  EXPECT_FALSE(has(protected_roots_for(suite_at("/srv/s.yaml", {}), o, "/home/ana"), "/home/ana"))
      << "results";
  o.results_dir = "/srv/results";
  o.workspace_override = "/home/ana/kept/ws";
  EXPECT_FALSE(has(protected_roots_for(suite_at("/srv/s.yaml", {}), o, "/home/ana"), "/home/ana"))
      << "workspace override";
}

TEST(ProtectedRoots, CallerRootsStayAndTheHomeCanBeLeftOut) {
  runner_options o;
  o.results_dir = "/srv/results";
  o.protected_roots = {"/srv/secrets", "/srv"};
  o.protect_host_home = false;
  auto roots = protected_roots_for(suite_at("/opt/s.yaml", {}), o, "/home/ana");
  EXPECT_TRUE(has(roots, "/srv/secrets"));
  EXPECT_FALSE(has(roots, "/srv")) << "it holds the results";
  EXPECT_FALSE(has(roots, "/home/ana"));
  EXPECT_FALSE(
      has(protected_roots_for(suite_at("/opt/s.yaml", {}), runner_options{}, std::nullopt), "/"));
}

TEST(ExitStatus, TheWorstEndingDecides) {
  EXPECT_EQ(exit_status(run_ending::passed), 0);
  EXPECT_EQ(exit_status(run_ending::task_failed), 1);
  EXPECT_EQ(exit_status(run_ending::execution_error), 2);
  EXPECT_EQ(exit_status(run_ending::grader_error), 3);
  ending_tally t;
  t.add(run_ending::task_failed);
  t.add(run_ending::grader_error);
  EXPECT_EQ(exit_status(t.worst()), exit_grader_failed);
  EXPECT_EQ(exit_status_of_signal(SIGINT), 130);
  EXPECT_EQ(exit_status_of_signal(SIGTERM), 143);
}

}  // namespace
}  // namespace evalbox::harness
