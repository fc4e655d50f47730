// Fuzzes a run's kept final state as `evalbox regrade` reads it back (final_state.h): the
// manifest is a file of the results directory, which users hand over, merge and edit. The input
// is written as runs/r/final-state.json; what read_final_state accepts must be safe to write
// back — every path relative and normal, no path twice — and writing each tree as a layer must
// stay inside the layer (objects are missing here: a file entry is an error, never a write
// elsewhere).
#include <sys/stat.h>

#include <set>
#include <string>

#include "base/fs.h"
#include "harness/results/final_state.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  namespace fs = std::filesystem;
  const fs::path root = fuzz::scratch_dir() / "results";
  fuzz::check(make_dirs(root / "runs" / "r").has_value(), "make the run directory");
  fuzz::check(write_file(root / "runs" / "r" / harness::final_state_file, fuzz::as_text(data, size))
                  .has_value(),
              "write the manifest");
  auto trees = harness::read_final_state(root, "r");
  if (!trees) {
    fuzz::check(trees.error().kind == error_kind::invalid_argument,
                "a bad manifest is an invalid_argument error");
    return 0;
  }
  const fs::path out = fuzz::scratch_dir() / "layers";
  (void)remove_tree(out);
  fuzz::check(make_dirs(out).has_value(), "make the layers directory");
  int n = 0;
  for (const auto& t : *trees) {
    std::set<std::string> seen;
    for (const auto& e : t.entries) {
      fuzz::check(!e.path.empty() && e.path.front() != '/', "every path is relative");
      fuzz::check(fs::path(e.path).lexically_normal().generic_string() == e.path,
                  "every path is normal");
      for (const auto& part : fs::path(e.path)) fuzz::check(part != "..", "no path climbs");
      fuzz::check(seen.insert(e.path).second, "no path twice");
      fuzz::check(e.mode <= 01777, "no setuid or setgid bit");
    }
    (void)harness::write_state_layer(root, t, {}, out / std::to_string(n++), ::getuid(),
                                     ::getgid());
  }
  // Nothing was written beside the layers.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fuzz::scratch_dir(), ec))
    fuzz::check(entry.path().filename() == "results" || entry.path().filename() == "layers",
                "nothing written outside the layers");
  return 0;
}
