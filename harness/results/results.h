// The results directory: runs/<run_id>/{run.json, transcript.jsonl, native/, workspace.diff},
// results.jsonl (one line per finished run, appended and fsynced), and the reports written
// from results.jsonl alone (summary.json, report.md, junit.xml). docs/results.md documents the
// evalbox.run.v1 record every line of results.jsonl carries.
//
// results.jsonl grows with every run, so readers walk it one line at a time (for_each_line, the
// one scanner of the file; for_each_record parses each line on top of it) and come back for a
// record by its place in the file (record_reader) rather than holding every record in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "base/unique_fd.h"

namespace evalbox::harness {
inline namespace results {

inline constexpr std::string_view run_schema = "evalbox.run.v1";
// A run's transcript in its directory: made durable with run.json when the run is recorded.
inline constexpr std::string_view transcript_file_name = "transcript.jsonl";

// Where one record's line lies in results.jsonl (its newline excluded). Lines are only ever
// appended, so a location stays valid while the file grows.
struct record_location {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The fields of a record a reader uses, as dotted paths: "grading.checks[].id" is the "id" of
// every element of the array "grading.checks". A record parsed with them holds only those
// fields (so reading a few fields of a record of several kilobytes builds a few values, not
// the whole document): a value found where a path leads is kept whole when it is a scalar, and
// as an empty object or array of its type otherwise, so a reader's type tests (is_string,
// is_object, is_array) answer as they would on the full record. Repeated keys keep the last
// value, as a full parse does.
class record_fields {
 public:
  explicit record_fields(std::initializer_list<std::string_view> paths);
  record_fields(record_fields&&) noexcept;
  record_fields& operator=(record_fields&&) noexcept;
  ~record_fields();

  struct node;  // results.cpp
  [[nodiscard]] const node& root() const noexcept { return *root_; }

 private:
  std::unique_ptr<node> root_;
};

// One line of results.jsonl as an evalbox.run.v1 record (only `keep`'s fields of it, when
// given), or null when it is something else: a line from a future schema, a blank line,
// garbage, a document nested deeper than max_json_depth. Readers skip those.
json parse_record(std::string_view line, const record_fields* keep = nullptr);

// The top-level "run_id" of a line that is an evalbox.run.v1 record as parse_record decides it
// (empty when the run id is not a string), or nullopt when the line is no record. The line is
// lexed whole but no document is built: for a reader that only places records by their run id
// (a merge reads every record of every shard).
std::optional<std::string> record_run_id(std::string_view line);

// The scanner of results.jsonl, under every reader of it: calls `visit` with each complete line
// of `results_file`, in file order, and where it lies. A line is handed over as it is written,
// blank or not JSON alike (which of them are records is parse_record's and record_run_id's
// question), without its '\n' (a '\r' before it stays: JSON whitespace). A torn last line (no
// '\n': a crash mid-append) is not handed over, and a missing file has no lines. Memory holds
// one read's chunk and the longest line, never the file: a line is a view into the chunk, copied
// only when it straddles two reads, and valid only during the call. An error from `visit` stops
// the scan and is returned.
status for_each_line(
    const std::filesystem::path& results_file,
    const std::function<status(std::string_view line, record_location where)>& visit);

class results_dir {
 public:
  explicit results_dir(std::filesystem::path root) : root_(std::move(root)) {}
  [[nodiscard]] const std::filesystem::path& root() const noexcept { return root_; }
  [[nodiscard]] std::filesystem::path run_dir(const std::string& run_id) const;
  [[nodiscard]] std::filesystem::path results_file() const { return root_ / "results.jsonl"; }

  status create() const;
  // Calls `visit` with every complete evalbox.run.v1 record of results.jsonl, in file order,
  // and where it lies (for_each_line, each line parsed with parse_record); only the record being
  // visited is in memory. Lines that are not such a record are skipped, and so is a torn last
  // line (a crash mid-append). A missing file has no records. An error from `visit` stops the
  // walk and is returned.
  status for_each_record(
      const std::function<status(const json& record, record_location where)>& visit) const;
  // The same, each record parsed with only `keep`'s fields (parse_record).
  status for_each_record(
      const record_fields& keep,
      const std::function<status(const json& record, record_location where)>& visit) const;
  // Every complete record in results.jsonl, in memory (for small directories; reports use
  // for_each_record).
  [[nodiscard]] result<std::vector<json>> read_records() const;
  // Run ids already recorded (for resume).
  [[nodiscard]] result<std::set<std::string>> recorded_ids() const;
  // Writes runs/<id>/run.json atomically, makes it and the run's transcript.jsonl durable (one
  // sync_durable), then appends the record to results.jsonl (fdatasynced; append_durable: a
  // failure, such as a full disk, leaves no partial line behind, so a later run resumes from
  // what was recorded). The line is the run's commit: what it points to is on disk before it.
  status record(const json& run) const;

 private:
  std::filesystem::path root_;
};

// Reads records of one results.jsonl back by their location, one at a time.
class record_reader {
 public:
  static result<record_reader> open(const std::filesystem::path& results_file);
  // The record at `where` (as for_each_record reported it), with only `keep`'s fields if given.
  // Threads may read at once.
  [[nodiscard]] result<json> read(record_location where, const record_fields* keep = nullptr) const;

 private:
  explicit record_reader(unique_fd fd, std::filesystem::path path)
      : fd_(std::move(fd)), path_(std::move(path)) {}
  unique_fd fd_;
  std::filesystem::path path_;
};

// Bytes written aside, one piece after another, into an unlinked temporary file (under TMPDIR,
// else /tmp; gone when the last descriptor closes, a crash included), to be read back by their
// location: a reader that needs a few fields of each record several times keeps them here, in
// a form of its own, rather than in memory or parsing the whole record again.
class record_spill {
 public:
  class reader;
  static result<record_spill> create();
  // Appends `bytes` (buffered); where to read them back once finish() has flushed.
  result<record_location> add(std::string_view bytes);
  // Flushes what is buffered; the reader of every piece added.
  result<reader> finish() &&;

 private:
  explicit record_spill(unique_fd fd, std::filesystem::path shown)
      : fd_(std::move(fd)), shown_(std::move(shown)) {}
  status flush();
  unique_fd fd_;
  std::filesystem::path shown_;
  std::string buffer_;
  uint64_t written_ = 0;  // bytes in the file, before buffer_
};

class record_spill::reader {
 public:
  // The piece at `where` (as add() returned it) into `out`. Threads may read at once.
  status read(record_location where, std::string& out) const;

 private:
  friend class record_spill;
  reader(unique_fd fd, std::filesystem::path shown)
      : fd_(std::move(fd)), shown_(std::move(shown)) {}
  unique_fd fd_;
  std::filesystem::path shown_;
};

}  // namespace results
}  // namespace evalbox::harness
