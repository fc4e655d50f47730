// `evalbox merge`: joins the results directories of a plan's shards into one results directory
// and writes its reports. docs/scale-out.md says how to use it; docs/results.md what it writes.
//
// Theory of operation. A shard's directory holds plan.json (its plan's identity and its K of
// N), results.jsonl and runs/<id>/. Merging is two passes over every input, one record in
// memory at a time:
//   1. index: each input's newest record of each planned run (an older record of a rerun is
//      superseded, a record of another plan is left out), with where its line lies and a
//      digest of the line (evalbox writes records in canonical form, so a record is the same
//      bytes wherever it is copied); only the top-level schema and run id are read out of a
//      line (a SAX parse that validates it, no document). The inputs are read on as many
//      threads as there are CPUs, then compared in order: across inputs, one record per run —
//      the same record again is a duplicate (a shard given twice, or merged before), a
//      different one is a conflict that stops the merge before anything is written. The runs
//      of the plan that no input records are missing.
//   2. write (only when nothing is missing, or with `partial`): a first merge writes plan.json
//      (which shards the output is the merge of) before anything else. Then two workers: one
//      brings, for each run not yet in the output, its runs/<id>/ directory, hard-linked file
//      by file (copied where links cannot be made, or with `copy`), then appends its line,
//      read back by where pass 1 found it, to results.jsonl. A directory is complete before
//      its record is appended, so a merge killed midway is finished by merging again. The
//      other indexes the output's records and each line as it is appended (report_fields()
//      only: the same index `evalbox report` builds of the merged file) and renders every
//      report into a staging directory, reading the runs' files from the inputs they are
//      being brought from (the same files); the reports are put in place once every record is
//      appended, and are byte for byte those `evalbox report` writes of the merged directory.
//
// Memory: no record is kept, and no file is read whole. Per planned run, 68 bytes: its id and
// where it sits in the plan (24 + 4 bytes), and the slot of the record it is taken from
// (source, offset, length, 128-bit digest: 40 bytes, padded); while the inputs are read, 48
// bytes per record of every input, to find each one's newest record of each run before
// comparing them; then the reports' run index (a few hundred bytes per run, docs/report.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "harness/plan/identity.h"
#include "harness/report/report.h"

namespace evalbox::harness::scale {

struct merge_options {
  std::vector<std::filesystem::path> shards;  // results directories written by `evalbox run`
  std::filesystem::path into;                 // created if missing; may hold an earlier merge
  bool partial = false;  // write even when planned runs are missing (the reports say how many)
  bool copy = false;     // copy run directories rather than hard-linking them
};

// The planned runs of one shard that have no record in any input.
struct shard_gap {
  int shard = 0;
  std::vector<std::filesystem::path> dirs;  // the inputs that hold this shard (none: not given)
  uint64_t planned = 0;                     // runs of this shard
  uint64_t missing = 0;                     // of them without a record
  // The first `listed` of them, "fixture/candidate#trial (run id)", in plan order: enough to
  // tell which runs a shard did not reach, without a name per run of a shard never given.
  static constexpr uint64_t listed = 20;
  std::vector<std::string> first_missing;
};

struct merge_report {
  plan_identity plan;  // the output's plan.json
  uint64_t planned = 0;
  uint64_t recorded = 0;        // planned runs with a record (in the output, after a write)
  uint64_t missing = 0;         // planned - recorded
  uint64_t added = 0;           // records appended to the output by this merge
  uint64_t duplicates = 0;      // records of a run id already recorded, with the same content
  uint64_t superseded = 0;      // older records of a run within one input (a rerun), left out
  uint64_t foreign = 0;         // records of another plan (before a fixture changed), left out
  uint64_t linked = 0;          // files hard-linked into the output
  uint64_t copied = 0;          // files copied (another filesystem, or links refused)
  uint64_t without_dir = 0;     // records whose input had no runs/<id>/ to bring along
  std::vector<shard_gap> gaps;  // shards with missing runs, by K
  bool written = false;  // false: runs are missing and `partial` was not given; nothing written
  std::optional<stats::summary> summary;  // the reports' summary, when written
};

// Validates every input, then (see above) writes the output and its reports. Errors: an input
// that is not a readable results directory with a plan.json, inputs of different plans or
// shard counts, an output that holds something else, and two different records for one run id
// (the message names both: directory, line, run). None of them writes anything.
result<merge_report> merge_shards(const merge_options& options);

}  // namespace evalbox::harness::scale
