// `evalbox validate`: fixtures and suites checked without running anything, as a typed report
// the command line prints as text or as evalbox.validate.v1 JSON (to_json). A fixture is
// loaded with its checks; a suite with its fixtures, each candidate's adapter settings and,
// for every fixture in an image, whether each candidate's client can start there. An image a
// fixture names is imported into the store (or checked when it is there), and a Harbor task's
// image resolved first (harbor_images.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/json_fwd.h"
#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/fixture/harbor_images.h"
#include "sandbox/image/pull.h"

namespace evalbox::sandbox {
inline namespace prepare {
class preparer;
}  // namespace prepare
}  // namespace evalbox::sandbox

namespace evalbox::harness {
inline namespace validate {

// What runs of a fixture will use as their root.
struct validated_image {
  std::string reference;
  std::string id;
  std::string manifest_digest;
  std::vector<std::string> layers;
  uint64_t bytes = 0;
  std::vector<std::string> env;
  std::string working_dir;
  bool imported_now = false;  // unpacked by this validation (else the store had it)
};

struct validated_input {
  enum class kind { fixture, suite };
  std::string path;  // as given
  kind what = kind::fixture;
  std::string id;       // a fixture's id ("" when it could not be loaded)
  std::string digest;   // a fixture's digest (a fixture file alone has none)
  std::string name;     // a suite's name
  std::string summary;  // one line saying what it is, for a valid input
  std::vector<validated_image> images;
  // What a valid input will do that its user should know (a gateway candidate's upstream and
  // budget, a login file that still goes into the sandbox), one line each.
  std::vector<std::string> notes;
  std::vector<config_error> errors;

  [[nodiscard]] bool valid() const noexcept { return errors.empty(); }
};

struct validate_report {
  std::vector<validated_input> inputs;
  [[nodiscard]] bool valid() const noexcept;
};

struct validate_options {
  std::vector<std::string> images;             // --image REF=SOURCE, over a suite's images:
  const adapter_registry* adapters = nullptr;  // the adapters candidates may name
  std::filesystem::path state_root;            // where Harbor images are saved and built
  // The store's preparer, asked for only when an input names an image.
  std::function<sandbox::preparer&()> preparer;
  say_fn say;  // progress of image saves and builds
  // Registry images: pinned (pulled, or under --pull never only checked to resolve) before the
  // images are checked; nullptr leaves registry references as written.
  registry_pins* pins = nullptr;
  sandbox::image::pull_policy pull = sandbox::image::pull_policy::missing;
};

// Each of `paths`: a directory, fixture.yaml or task.toml is a fixture; another file is a
// fixture file alone when its schema says so, else a suite.
validate_report validate_inputs(const std::vector<std::string>& paths,
                                const validate_options& options);

// Adapter-level validation of every candidate (its settings), as config errors. Candidates
// naming an adapter `adapters` does not have were reported by load_suite.
std::vector<config_error> validate_candidates(const suite_spec& suite,
                                              const adapter_registry& adapters);

// The report as evalbox.validate.v1 (docs/cli.md, "evalbox validate --json").
json to_json(const validate_report& report);

// "  image REF: ID (N layer(s), SIZE[, imported now]; WorkingDir W, PATH P)": what runs will use.
std::string describe(const validated_image& image);

}  // namespace validate
}  // namespace evalbox::harness
