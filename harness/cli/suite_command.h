// What `evalbox run`, `evalbox fixture test`, `evalbox fixture shell` and `evalbox runs shell`
// share on the command line, around harness::run_and_report: signal handling (Ctrl-C stops
// scheduling and kills running sandboxes), the progress line, Harbor tasks' images resolved
// before anything runs, and loading a runnable suite.
#pragma once

#include <atomic>
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/config/spec.h"
#include "harness/plan/plan.h"
#include "harness/runner/suite_run.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's own names
class App;       // NOLINT(readability-identifier-naming)
}  // namespace CLI

namespace evalbox::harness::cli {

// The runner's options as the command line starts them: the sandbox's from the EVALBOX_*
// variables (sandbox::default_preparer_options) and the grading test hook from EVALBOX_FAULT,
// each read here once.
struct suite_run_options : harness::runner_options {
  suite_run_options();
  bool quiet = false;  // no progress output
  // A person's shell instead of the agent (harness::runner_options::interactive), given the
  // suite's cancel token, which SIGINT and SIGTERM set.
  std::function<result<sandbox::run_record>(const sandbox::prepared_session&,
                                            sandbox::launch_options, sandbox::cancel_token&)>
      shell;
};

struct suite_run : harness::suite_run {
  int signal = 0;  // SIGINT/SIGTERM that stopped it, else 0
};

// Runs `runs` of `suite` with SIGINT/SIGTERM watched and progress shown, then writes the
// reports (harness::run_and_report).
result<suite_run> run_planned(const harness::suite_spec& suite,
                              const std::vector<harness::run_spec>& runs,
                              const suite_run_options& options);

// What a run or regrade left as it was, on stderr: planned runs not recorded yet (not_run),
// and runs graded by other checks that kept no final state to grade again (stale).
void say_regrade_leftovers(const harness::run_totals& t, const std::filesystem::path& results);

// Prints a line of progress (an image saved or built) as "evalbox: LINE" on stderr.
void say_progress(const std::string& line);

// How a command that runs or checks a suite gets its images: --image, --pull, --force-build,
// --images-lock.
struct image_args {
  std::vector<std::string> images;  // --image REF=SOURCE (Harbor tasks' docker_image)
  std::string pull = "missing";     // --pull missing|always|never
  bool force_build = false;         // --force-build: Harbor tasks build environment/
  std::string images_lock;          // --images-lock FILE: registry digests to use
  // Out: every registry reference pinned, reference -> digest (images.lock).
  std::map<std::string, std::string> pinned;
};
// Adds --image, --pull, --force-build and --images-lock to `cmd`, into `a`.
void add_image_options(CLI::App* cmd, image_args& a);

// For a command: harness::resolve_suite_images with `a`: the images of --image over the
// suite's and the state directory's image caches, registry images pulled as --pull says (with
// progress, Ctrl-C stopping a pull cleanly) and pinned to their digests, the problems printed
// to stderr. Returns exit_ok, exit_usage when an image cannot be had (the message says how to
// get it), or 130/143 when interrupted.
int resolve_suite_images(harness::suite_spec& suite, image_args& a);

// The pin function of harness::registry_pins for a command: `prep` pulls (or finds) each
// reference as `policy` says, saying what it downloaded; under `check_only` (validate --pull
// never) a reference the store lacks is only asked of its registry.
std::function<result<std::string>(const std::string&)> pin_with(sandbox::preparer& prep,
                                                                sandbox::image::pull_policy policy,
                                                                const std::atomic<bool>* cancel,
                                                                bool check_only = false);

// For a command that hands a suite to other machines (slurm): every registry reference of
// `suite` (docker:// environments, Harbor tasks' docker_image not mapped by images:) pinned to
// the digest it names now — the store's when it has it, else asked of the registry, nothing
// pulled. A reference that cannot be resolved is said and left to the machines.
std::map<std::string, std::string> pin_for_elsewhere(const harness::suite_spec& suite);

// `pinned` merged into <results>/images.lock (what --images-lock reads back elsewhere).
void record_images_lock(const std::filesystem::path& results_dir,
                        const std::map<std::string, std::string>& pinned);

// The suite at `path`, loaded and its candidates validated, for a command that plans runs
// (run, slurm, k8s). On a problem it prints the messages and returns the exit code:
// exit_usage for a suite that is wrong or missing, exit_internal for one that cannot be read.
std::expected<harness::suite_spec, int> load_runnable_suite(const std::string& path);

// The suite at `file` (--suite) whose defaults fixtures run with outside it (fixture test and
// shell, runs shell); nothing when `file` is empty. On a problem it prints the messages and
// returns exit_usage.
std::expected<std::optional<harness::suite_spec>, int> load_parent_suite(const std::string& file);

// The suite of one run of the fixture at `dir` with the defaults of `suite_file` (may be empty),
// its images resolved: with `candidate` that candidate of the suite (its home and credentials,
// leased as in a run), else `default_id`, an empty managed home (adapter noop). `fixture shell`
// and a session from a fixture are such runs. On a problem it prints the messages and returns
// the exit code (exit_usage for a suite or fixture that does not load, or a candidate the suite
// lacks).
std::expected<harness::suite_spec, int> one_run_suite(const std::string& dir,
                                                      const std::string& suite_file,
                                                      const std::string& candidate,
                                                      const std::string& default_id,
                                                      image_args& images, std::string_view cmd);

// `evalbox cache warm`: the caches of `suite` (those named in `only`, else every one) warmed
// where the cache store of `state_root` lacks them (again, replacing them, with `force`)
// (harness::warm_suite), with SIGINT/SIGTERM watched (a cancelled warm stores nothing); one
// line per cache ready on stdout (key, name, target, files, size). Returns the exit code.
int warm_suite_caches(const harness::suite_spec& suite, const std::set<std::string>& only,
                      bool force, const std::filesystem::path& state_root);

}  // namespace evalbox::harness::cli
