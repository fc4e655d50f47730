// Fuzzes results.jsonl as `evalbox run` (resume) and `evalbox report` read it: a results
// directory is a file users hand over, merge from shards and edit. The input is written to
// results.jsonl in a scratch directory, then walked, indexed and rendered into every report.
#include <sstream>

#include "base/fs.h"
#include "harness/report/report.h"
#include "harness/results/results.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  const auto root = fuzz::scratch_dir() / "results";
  harness::results_dir dir(root);
  fuzz::check(dir.create().has_value(), "create the results directory");
  fuzz::check(write_file(dir.results_file(), fuzz::as_text(data, size)).has_value(),
              "write results.jsonl");

  // Resume: the ids already recorded.
  auto ids = dir.recorded_ids();
  fuzz::check(ids.has_value(), "recorded_ids reads any results.jsonl");

  // Every record the walk reports reads back, by its location, as the same record.
  auto reader = harness::record_reader::open(dir.results_file());
  fuzz::check(reader.has_value(), "open results.jsonl");
  size_t records = 0;
  auto walked = dir.for_each_record([&](const json& record, harness::record_location where) {
    ++records;
    auto again = reader->read(where);
    fuzz::check(again.has_value() && *again == record, "a record reads back by its location");
    return status{};
  });
  fuzz::check(walked.has_value(), "for_each_record reads any results.jsonl");
  fuzz::check(ids->size() <= records, "no more ids than records");

  // Reports: index, statistics, and every renderer, as `evalbox report` runs them.
  auto runs = harness::run_index::of_results(dir);
  fuzz::check(runs.has_value(), "run_index reads any results.jsonl");
  fuzz::check(runs->records_seen() == records, "the index sees every record");
  std::string suite = runs->suite_name("fuzz");
  for (std::optional<std::string> baseline :
       {std::optional<std::string>(), std::optional<std::string>("baseline")}) {
    auto summary = harness::summarize_runs(*runs, baseline);
    if (!summary) continue;  // an error that says why is a fine answer to a hostile file
    std::ostringstream md, junit, html;
    fuzz::check(harness::write_markdown(md, *summary, *runs, suite).has_value(), "report.md");
    fuzz::check(harness::write_junit(junit, *runs, suite).has_value(), "junit.xml");
    fuzz::check(harness::write_html(html, *summary, *runs, suite, root).has_value(), "report.html");
    (void)harness::render_terminal_summary(*summary);
    // The index parses only the fields the reports read (report_fields): the reports must be
    // those of the whole records, whatever their shape.
    auto all = dir.read_records();
    fuzz::check(all.has_value(), "read_records reads any results.jsonl");
    auto current = harness::latest_records(*all);
    auto whole = harness::summarize_records(current, baseline);
    fuzz::check(whole.has_value(), "the whole records summarize as the index does");
    fuzz::check(md.str() == harness::render_markdown(*whole, current, suite),
                "report.md from the index is the whole records' report.md");
    fuzz::check(junit.str() == harness::render_junit(current, suite),
                "junit.xml from the index is the whole records' junit.xml");
    fuzz::check(html.str() == harness::render_html(*whole, current, suite, root),
                "report.html from the index is the whole records' report.html");
  }
  return 0;
}
