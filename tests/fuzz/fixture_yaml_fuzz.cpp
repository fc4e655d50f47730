// Fuzzes the fixture.yaml loader (harness/config): strict parsing of a file users write. Any
// text either yields a fixture with a valid id and at least one check, or problems that each
// name the file, a line and a column.
#include "harness/config/parse.h"
#include "harness/config/validate.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  std::string_view text = fuzz::as_text(data, size);
  std::vector<harness::config_error> errors;
  auto spec = harness::parse_fixture_yaml(text, "fixture.yaml", errors);
  for (const auto& e : errors) {
    fuzz::check(!e.what.empty(), "every problem says what it is");
    fuzz::check(e.where.file == "fixture.yaml", "every problem names the file");
    fuzz::check(e.where.line >= 0 && e.where.column >= 0, "lines and columns are not negative");
  }
  if (errors.empty()) {
    fuzz::check(harness::is_valid_id(spec.id), "an accepted fixture has a valid id");
    fuzz::check(!spec.checks.empty(), "an accepted fixture has a check");
  }
  (void)harness::peek_schema(text);
  return 0;
}
