// The YAML reader of harness/config (reader.h): typed values from yaml-cpp nodes, and a
// config_error at the node's line and column for every value that is not as the format wants.
#include "harness/config/reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "base/fs.h"
#include "base/units.h"
#include "harness/config/validate.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

namespace fs = std::filesystem;

std::string_view type_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

bool fields::has(std::string_view key) const {
  return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == key; });
}

YAML::Node fields::get(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return v;
  return YAML::Node();
}

source_location reader::at(const YAML::Node& n) const {
  if (!n.IsDefined()) return {file_, 0, 0};
  auto m = n.Mark();
  if (m.line < 0) return {file_, 0, 0};
  return {file_, m.line + 1, m.column + 1};
}

source_location reader::at(const YAML::Mark& m) const {
  if (m.line < 0) return {file_, 0, 0};
  return {file_, m.line + 1, m.column + 1};
}

void reader::fail(source_location where, std::string what, std::string hint) {
  errors_.push_back({std::move(where), std::move(what), std::move(hint)});
}

void reader::fail(const YAML::Node& n, std::string what, std::string hint) {
  fail(at(n), std::move(what), std::move(hint));
}

std::optional<fields> reader::mapping(const YAML::Node& n, std::string_view what,
                                      std::span<const std::string_view> known,
                                      std::span<const std::string_view> required,
                                      bool allow_unknown) {
  if (!n.IsMap()) {
    fail(n, fmt::format("{} must be a mapping, found {}", what, type_name(n)),
         fmt::format("write it as `key: value` lines with keys: {}", fmt::join(known, ", ")));
    return std::nullopt;
  }
  fields f;
  for (auto it = n.begin(); it != n.end(); ++it) {
    // A copy (Node is a handle): it-> returns a proxy that dies with this statement, so a
    // reference to its `first` dangled (ASan: stack-use-after-scope).
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      fail(key, fmt::format("{} has a key that is not a plain name", what));
      continue;
    }
    std::string k = key.Scalar();
    if (f.has(k)) {
      fail(key, fmt::format("{} has '{}' twice", what, k), "keep one of them");
      continue;
    }
    if (!allow_unknown && std::find(known.begin(), known.end(), k) == known.end()) {
      fail(key, fmt::format("unknown key '{}' in {}", k, what), unknown_hint(k, known));
      continue;
    }
    f.entries.emplace_back(k, it->second);
  }
  for (auto r : required) {
    if (!f.has(r))
      fail(n, fmt::format("{} is missing '{}'", what, r), fmt::format("add `{}: ...`", r));
  }
  return f;
}

std::string reader::unknown_hint(std::string_view k, std::span<const std::string_view> known) {
  if (auto best = closest(k, known); !best.empty()) return fmt::format("did you mean '{}'?", best);
  return fmt::format("the keys allowed here are: {}", fmt::join(known, ", "));
}

std::optional<std::string> reader::string(const YAML::Node& n, std::string_view what,
                                          bool allow_empty) {
  if (!n.IsScalar()) {
    fail(n, fmt::format("{} must be a string, found {}", what, type_name(n)),
         n.IsNull() ? "give it a value" : "quote it if it is meant as text");
    return std::nullopt;
  }
  if (!allow_empty && n.Scalar().empty()) {
    fail(n, fmt::format("{} must not be empty", what));
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<double> reader::number(const YAML::Node& n, std::string_view what) {
  if (n.IsScalar() && n.Tag() != "!") {
    const std::string& s = n.Scalar();
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!s.empty() && ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v)) return v;
  }
  fail(n, fmt::format("{} must be a number, found {}", what, describe(n)));
  return std::nullopt;
}

std::optional<uint64_t> reader::positive_integer(const YAML::Node& n, std::string_view what) {
  if (n.IsScalar() && n.Tag() != "!") {
    const std::string& s = n.Scalar();
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!s.empty() && ec == std::errc() && ptr == s.data() + s.size()) {
      if (v >= 1) return v;
      fail(n, fmt::format("{} must be at least 1", what));
      return std::nullopt;
    }
  }
  fail(n, fmt::format("{} must be a whole number, found {}", what, describe(n)));
  return std::nullopt;
}

namespace {

// One unit as the formats write it: an example for a value that is not a scalar, the parser,
// and the units it reads (the hint of every message about it).
struct unit_reading {
  std::string_view example;
  result<uint64_t> (*parse)(std::string_view);
  std::string_view units;
};

constexpr unit_reading duration_reading{"10m or 90s", parse_duration_ms,
                                        "units: ms, s, m, h, d (e.g. 10m, 1h30m)"};
constexpr unit_reading size_reading{
    "2GiB", parse_bytes, "units: B, KiB, MiB, GiB, TiB (or K, M, G, T in powers of 1000)"};

std::optional<uint64_t> read_unit(reader& r, const YAML::Node& n, std::string_view what,
                                  const unit_reading& unit) {
  if (!n.IsScalar() || n.Scalar().empty()) {
    r.fail(n, fmt::format("{} must be a value like {}", what, unit.example));
    return std::nullopt;
  }
  auto parsed = unit.parse(n.Scalar());
  if (!parsed) {
    r.fail(n, fmt::format("{}: {}", what, parsed.error().message), std::string(unit.units));
    return std::nullopt;
  }
  if (*parsed == 0) {
    r.fail(n, fmt::format("{} must be greater than zero", what));
    return std::nullopt;
  }
  return *parsed;
}

}  // namespace

std::optional<uint64_t> reader::duration_ms(const YAML::Node& n, std::string_view what) {
  return read_unit(*this, n, what, duration_reading);
}

std::optional<uint64_t> reader::size_bytes(const YAML::Node& n, std::string_view what) {
  return read_unit(*this, n, what, size_reading);
}

std::optional<std::vector<std::string>> reader::string_list(const YAML::Node& n,
                                                            std::string_view what,
                                                            bool allow_empty_list) {
  if (!n.IsSequence()) {
    fail(n, fmt::format("{} must be a list, found {}", what, type_name(n)),
         "write it as [a, b] or as lines starting with '- '");
    return std::nullopt;
  }
  if (!allow_empty_list && n.size() == 0) {
    fail(n, fmt::format("{} must not be empty", what));
    return std::nullopt;
  }
  std::vector<std::string> out;
  size_t before = error_count();
  for (size_t i = 0; i < n.size(); ++i) {
    auto s = string(n[i], fmt::format("{}[{}]", what, i));
    if (s) out.push_back(*s);
  }
  if (error_count() != before) return std::nullopt;
  return out;
}

std::optional<pattern> reader::regex(const YAML::Node& n, std::string_view what) {
  auto s = string(n, what);
  if (!s) return std::nullopt;
  auto compiled = pattern::compile(*s);
  if (compiled) return std::move(*compiled);
  const pattern_problem& p = compiled.error();
  source_location where = at(n);
  std::string what_is_wrong = fmt::format("{} is not a valid regular expression: {}", what, p.what);
  if (p.offset) {
    if (auto column = column_in_scalar(n, *p.offset))
      where.column = *column;
    else
      what_is_wrong += fmt::format(" (at character {} of the pattern)", *p.offset + 1);
  }
  fail(std::move(where), std::move(what_is_wrong), p.hint());
  return std::nullopt;
}

std::optional<int> reader::column_in_scalar(const YAML::Node& n, size_t offset) const {
  const YAML::Mark m = n.Mark();
  if (m.pos < 0 || m.column < 0 || static_cast<size_t>(m.pos) >= text_.size()) return std::nullopt;
  const std::string& value = n.Scalar();
  size_t start = static_cast<size_t>(m.pos);
  int quote = text_[start] == '"' || text_[start] == '\'' ? 1 : 0;
  std::string_view raw = text_.substr(start + static_cast<size_t>(quote));
  if (value.find('\n') != std::string::npos || !raw.starts_with(value)) return std::nullopt;
  return m.column + 1 + quote + static_cast<int>(offset);
}

std::optional<std::string> reader::relative_path(const YAML::Node& n, std::string_view what) {
  auto s = string(n, what);
  if (!s) return std::nullopt;
  // A trailing '/' (a directory, for git paths) is fine; every component must be plain.
  std::string_view trimmed = *s;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.remove_suffix(1);
  if (!is_safe_relative(fs::path(trimmed))) {
    fail(n, fmt::format("{} '{}' must be a relative path without '..'", what, *s),
         "paths are relative to /workspace");
    return std::nullopt;
  }
  return s;
}

json reader::to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;
      if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      {
        int64_t v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && ptr == s.data() + s.size()) return v;
      }
      {
        double v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v)) return v;
      }
      return s;
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (size_t i = 0; i < n.size(); ++i) a.push_back(to_json(n[i]));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (auto it = n.begin(); it != n.end(); ++it)
        o[it->first.IsScalar() ? it->first.Scalar() : std::string("?")] = to_json(it->second);
      return o;
    }
  }
  return nullptr;
}

std::string reader::describe(const YAML::Node& n) {
  if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
  return std::string(type_name(n));
}

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
