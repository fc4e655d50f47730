// Fuzzes the task.toml reader (harness/fixture/harbor.cpp): a Harbor task's task.toml comes from
// whoever wrote the benchmark. Any text either yields a task with its verifier check and sane
// limits, or problems that each name the file, a line and a column; warnings too.
#include "harness/fixture/harbor.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  std::string_view text = fuzz::as_text(data, size);
  std::vector<harness::config_error> errors, warnings;
  auto spec = harness::parse_task_toml(text, "task.toml", errors, warnings);
  for (const auto* list : {&errors, &warnings})
    for (const auto& e : *list) {
      fuzz::check(!e.what.empty(), "every problem says what it is");
      fuzz::check(e.where.file == "task.toml", "every problem names the file");
      fuzz::check(e.where.line >= 0 && e.where.column >= 0, "lines and columns are not negative");
    }
  fuzz::check(spec.harbor.has_value(), "a task.toml always describes a Harbor task");
  if (errors.empty()) {
    fuzz::check(spec.checks.size() == 1 && spec.checks[0].kind == harness::check_kind::verifier,
                "an accepted task has exactly its verifier as a check");
    fuzz::check(!spec.limits.wall_ms || *spec.limits.wall_ms > 0, "a wall limit is positive");
    fuzz::check(!spec.limits.memory_bytes || *spec.limits.memory_bytes > 0,
                "a memory limit is positive");
    fuzz::check(!spec.harbor->verifier_wall_ms || *spec.harbor->verifier_wall_ms > 0,
                "a verifier timeout is positive");
    (void)spec.harbor->metadata.dump();
  }
  return 0;
}
