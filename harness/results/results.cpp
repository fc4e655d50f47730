// The results directory (see results.h).
#include "harness/results/results.h"

#include <sys/file.h>

#include "sandbox/base/fs.h"

namespace evalbox::harness {

namespace fs = std::filesystem;

fs::path results_dir::run_dir(const std::string& run_id) const { return root_ / "runs" / run_id; }

status results_dir::create() const { return make_dirs(root_ / "runs"); }

result<std::vector<json>> results_dir::read_records() const {
  std::vector<json> out;
  std::error_code ec;
  if (!fs::exists(results_file(), ec)) return out;
  std::string text = EB_TRY(read_file(results_file(), 1ull << 32));
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a torn last line: the run is not recorded
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    json j = json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_object() && j.value("schema", "") == run_schema) out.push_back(std::move(j));
  }
  return out;
}

result<std::set<std::string>> results_dir::recorded_ids() const {
  std::set<std::string> ids;
  for (const auto& r : EB_TRY(read_records())) ids.insert(r.value("run_id", ""));
  return ids;
}

status results_dir::record(const json& run) const {
  std::string id = run.value("run_id", "");
  EB_TRY(write_file_atomic(run_dir(id) / "run.json", pretty_json(run)));
  // One write per record under O_APPEND: concurrent shard processes never interleave lines.
  return append_durable(results_file(), canonical_json(run) + "\n");
}

}  // namespace evalbox::harness
