// Copying native session files out of the managed home, and stderr tails (see native.h).
#include "harness/agent/native.h"

#include <sys/stat.h>

#include <vector>

#include "base/fs.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/transcripts/read_limits.h"

namespace evalbox::harness {
inline namespace agent {

namespace fs = std::filesystem;

void copy_native_files(const fs::path& home, const fs::path& below, const fs::path& dest_dir,
                       const native_destination& destination) {
  std::error_code ec;
  fs::path root = home;
  for (const auto& part : below) {
    root /= part;
    if (fs::symlink_status(root, ec).type() != fs::file_type::directory) return;
  }
  // Without follow_directory_symlink the walk does not descend through links.
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    if (it->is_symlink(entry_ec) || !it->is_regular_file(entry_ec)) continue;
    auto rel = destination(it->path().lexically_relative(root));
    if (!rel || !is_safe_relative(*rel)) continue;
    fs::path target = dest_dir / *rel;
    if (!make_dirs(target.parent_path())) continue;
    fs::copy_file(it->path(), target, fs::copy_options::overwrite_existing, entry_ec);
  }
}

result<std::string> read_native_stream(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::string();
    return sys_error(errno, "stat {}", path.string());
  }
  auto too_large = [&](uint64_t size) {
    return make_error(error_kind::invalid_argument,
                      "{} is {} bytes, larger than {}: evalbox reads at most that of an agent's "
                      "output stream or session file (lower the run's output limit, "
                      "limits.output)",
                      path.string(), size, format_bytes(max_native_stream_bytes));
  };
  if (static_cast<uint64_t>(st.st_size) > max_native_stream_bytes)
    return too_large(static_cast<uint64_t>(st.st_size));
  auto text = read_file(path, max_native_stream_bytes);
  if (!text && text.error().kind == error_kind::invalid_argument)  // it grew meanwhile
    return too_large(max_native_stream_bytes + 1);
  return text;
}

std::string tail_lines(const fs::path& path, size_t max_lines,
                       const std::function<bool(std::string_view line)>& keep) {
  std::string text = read_file(path, 1u << 20).value_or("");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (keep(line)) lines.push_back(std::move(line));
    start = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return log::scrub(out);
}

}  // namespace agent
}  // namespace evalbox::harness
