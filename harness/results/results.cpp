// The results directory (see results.h).
#include "harness/results/results.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cstring>

#include "sandbox/base/fs.h"
#include "sandbox/base/json_checks.h"

namespace evalbox::harness {

namespace fs = std::filesystem;

namespace {

// One line of results.jsonl as a run record, or null when it is something else (a line from a
// future schema, a blank line, garbage): readers skip those.
json parse_record(std::string_view line) {
  if (json_too_deep(line)) return nullptr;  // no record nests that deep; reports would overflow
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return nullptr;
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || *schema != run_schema) return nullptr;
  return j;
}

}  // namespace

fs::path results_dir::run_dir(const std::string& run_id) const { return root_ / "runs" / run_id; }

status results_dir::create() const { return make_dirs(root_ / "runs"); }

status results_dir::for_each_record(
    const std::function<status(const json& record, record_location where)>& visit) const {
  const fs::path file = results_file();
  unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return {};
    return sys_error(errno, "open {}", file.string());
  }
  std::string chunk(64 * 1024, '\0');
  std::string partial;       // the start of a line that continues in the next chunk
  uint64_t line_offset = 0;  // where the line being assembled starts in the file
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", file.string());
    if (n == 0) break;  // what is left in `partial` is a torn last line: the run is not recorded
    const char* data = chunk.data();
    size_t start = 0, end = static_cast<size_t>(n);
    while (start < end) {
      const void* nl = std::memchr(data + start, '\n', end - start);
      if (!nl) {
        partial.append(data + start, end - start);
        break;
      }
      size_t stop = static_cast<size_t>(static_cast<const char*>(nl) - data);
      std::string_view line(data + start, stop - start);
      if (!partial.empty()) {
        partial.append(line);
        line = partial;
      }
      record_location where{line_offset, line.size()};
      line_offset += line.size() + 1;
      start = stop + 1;
      if (!line.empty()) {
        json record = parse_record(line);
        if (!record.is_null()) EB_TRY(visit(record, where));
      }
      partial.clear();
    }
  }
  return {};
}

result<std::vector<json>> results_dir::read_records() const {
  std::vector<json> out;
  EB_TRY(for_each_record([&](const json& record, record_location) -> status {
    out.push_back(record);
    return {};
  }));
  return out;
}

result<std::set<std::string>> results_dir::recorded_ids() const {
  std::set<std::string> ids;
  EB_TRY(for_each_record([&](const json& record, record_location) -> status {
    auto id = record.find("run_id");
    ids.insert(id != record.end() && id->is_string() ? id->get<std::string>() : std::string());
    return {};
  }));
  return ids;
}

status results_dir::record(const json& run) const {
  std::string id = run.value("run_id", "");
  EB_TRY(write_file_atomic(run_dir(id) / "run.json", pretty_json(run)));
  // One write per record under O_APPEND: concurrent shard processes never interleave lines.
  return append_durable(results_file(), canonical_json(run) + "\n");
}

result<record_reader> record_reader::open(const fs::path& results_file) {
  unique_fd fd(::open(results_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", results_file.string());
  return record_reader(std::move(fd), results_file);
}

result<json> record_reader::read(record_location where) const {
  std::string& line = line_;
  line.resize(static_cast<size_t>(where.size));
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::pread(fd_.get(), line.data() + done, line.size() - done,
                        static_cast<off_t>(where.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", path_.string());
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  json record = done == line.size() ? parse_record(line) : json();
  if (record.is_null())
    return make_error(error_kind::io, "{}: no run record at byte {} any more (was it rewritten?)",
                      path_.string(), where.offset);
  return record;
}

}  // namespace evalbox::harness
