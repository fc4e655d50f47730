// Fuzzes the reader of run records (evalbox.run-record.v1, the helper's record file that the
// launcher reads back). Whatever it accepts must write and read back as the same record.
#include "sandbox/protocol/run_record.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  auto j = parse_json(fuzz::as_text(data, size), "record.json");
  if (!j) return 0;
  // from_json answers with an optional or a result<>: both test and dereference alike.
  auto record = sandbox::run_record::from_json(*j);
  if (!record) return 0;
  json written = record->to_json();
  auto again = sandbox::run_record::from_json(written);
  fuzz::check(static_cast<bool>(again), "a record evalbox wrote reads back");
  fuzz::check(again->to_json() == written, "a record reads back unchanged");
  (void)canonical_json(written);
  (void)pretty_json(written);
  return 0;
}
