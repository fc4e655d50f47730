// mountinfo parsing (see mountinfo.h). Fields, space separated (proc(5)):
//   id parent major:minor root mount_point options [optional...] - fstype source super_options
#include "sandbox/sys/mountinfo.h"

#include <charconv>

#include "base/fs.h"

namespace evalbox::sys {

namespace fs = std::filesystem;

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view s) {
  auto oct = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && oct(s[i + 1]) && oct(s[i + 2]) && oct(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += s[i];
  }
  return out;
}

// The next space-separated field of `line` from `pos` (empty at the end).
std::string_view next_field(std::string_view line, size_t& pos) {
  while (pos < line.size() && line[pos] == ' ') ++pos;
  size_t end = line.find(' ', pos);
  if (end == std::string_view::npos) end = line.size();
  std::string_view field = line.substr(pos, end - pos);
  pos = end;
  return field;
}

bool to_int(std::string_view s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::vector<mount_entry> parse_mountinfo(std::string_view text) {
  std::vector<mount_entry> out;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t pos = 0;
    mount_entry e;
    std::string_view id = next_field(line, pos), parent = next_field(line, pos);
    (void)next_field(line, pos);  // major:minor
    (void)next_field(line, pos);  // root within its file system
    std::string_view mount_point = next_field(line, pos), options = next_field(line, pos);
    if (!to_int(id, e.id) || !to_int(parent, e.parent_id) || options.empty()) continue;
    bool separator = false;
    for (std::string_view f = next_field(line, pos); !f.empty(); f = next_field(line, pos)) {
      if (f == "-") {
        separator = true;
        break;
      }
      if (!e.optional.empty()) e.optional += ' ';
      e.optional += f;
    }
    std::string_view fstype = next_field(line, pos), source = next_field(line, pos);
    std::string_view super_options = next_field(line, pos);
    if (!separator || super_options.empty()) continue;
    e.mount_point = unescape(mount_point);
    e.options = options;
    e.fstype = fstype;
    e.source = unescape(source);
    e.super_options = super_options;
    out.push_back(std::move(e));
  }
  return out;
}

result<std::vector<mount_entry>> read_mountinfo(const fs::path& file) {
  auto text = EB_TRY(read_file(file));
  return parse_mountinfo(text);
}

}  // namespace evalbox::sys
