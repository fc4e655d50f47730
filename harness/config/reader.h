// The YAML reader the parsers of harness/config share: it walks yaml-cpp nodes, converts
// scalars to typed values and records every problem as a config_error at the node's
// FILE:LINE:COL, with a hint. Private to harness/config: only its parse*.cpp files include it,
// and they include yaml-cpp themselves. This header only names YAML::Node and YAML::Mark (as
// pattern.h names re2::RE2), so that yaml-cpp stays out of headers (scripts/check-layering).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json.h"
#include "harness/config/pattern.h"
#include "harness/config/spec.h"

// yaml-cpp's names, declared to keep its header out of this one.
namespace YAML {  // NOLINT(readability-identifier-naming)
class Node;       // NOLINT(readability-identifier-naming)
struct Mark;      // NOLINT(readability-identifier-naming)
}  // namespace YAML

namespace evalbox::harness {
inline namespace config {
namespace parsing {

// "a scalar", "a list", "a mapping" or "nothing": what a node is, for messages.
std::string_view type_name(const YAML::Node& n);

// A mapping's entries, checked against the keys the format allows (reader::mapping). Mappings
// in these files have a handful of keys, so a lookup is a walk over `entries`.
struct fields {
  std::vector<std::pair<std::string, YAML::Node>> entries;  // in file order, keys unique

  [[nodiscard]] bool has(std::string_view key) const;
  // The value of `key`, or an undefined node.
  [[nodiscard]] YAML::Node get(std::string_view key) const;
};

// Reads the nodes of one file and collects its problems in `errors`. Every method that returns
// an empty optional has recorded why; a value means the node was as the format wants it.
class reader {
 public:
  // `text`: the file's content, to point into a scalar (a pattern's error) when it can.
  reader(std::string file, std::vector<config_error>& errors, std::string_view text = {})
      : file_(std::move(file)), errors_(errors), text_(text) {}

  [[nodiscard]] source_location at(const YAML::Node& n) const;
  [[nodiscard]] source_location at(const YAML::Mark& m) const;

  void fail(source_location where, std::string what, std::string hint = {});
  void fail(const YAML::Node& n, std::string what, std::string hint = {});

  [[nodiscard]] size_t error_count() const { return errors_.size(); }
  [[nodiscard]] const std::string& file() const { return file_; }

  // Checks that `n` is a mapping whose keys are all in `known` and that `required` are there.
  std::optional<fields> mapping(const YAML::Node& n, std::string_view what,
                                std::span<const std::string_view> known,
                                std::span<const std::string_view> required,
                                bool allow_unknown = false);
  // "did you mean 'x'?" for a misspelled key, else the keys allowed.
  static std::string unknown_hint(std::string_view k, std::span<const std::string_view> known);

  std::optional<std::string> string(const YAML::Node& n, std::string_view what,
                                    bool allow_empty = false);
  std::optional<double> number(const YAML::Node& n, std::string_view what);
  std::optional<uint64_t> positive_integer(const YAML::Node& n, std::string_view what);
  // A duration in milliseconds, or a size in bytes, greater than zero. Every duration and size
  // of both formats is read here, by the one parser of each unit (base/units.h), and
  // reported one way: "WHAT: what the parser says", with the units as the hint.
  std::optional<uint64_t> duration_ms(const YAML::Node& n, std::string_view what);
  std::optional<uint64_t> size_bytes(const YAML::Node& n, std::string_view what);
  std::optional<std::vector<std::string>> string_list(const YAML::Node& n, std::string_view what,
                                                      bool allow_empty_list = false);

  // A pattern, compiled now (once per fixture load, never per evaluation). An error points at
  // the offending character when the scalar is written on one line without escapes, else at
  // the scalar, saying where in the pattern.
  std::optional<pattern> regex(const YAML::Node& n, std::string_view what);

  // A path relative to /workspace whose every component is plain (a trailing '/' is fine).
  std::optional<std::string> relative_path(const YAML::Node& n, std::string_view what);

  // A YAML value as JSON. Plain scalars become null, booleans and numbers when they read as
  // such (YAML 1.2 core schema); quoted scalars stay strings.
  json to_json(const YAML::Node& n);

  // 'the scalar' or what the node is, for messages.
  std::string describe(const YAML::Node& n);

 private:
  // The 1-based column of byte `offset` of scalar `n`'s value, when the value appears verbatim
  // on its line (plain or quoted, without escapes or line folding).
  [[nodiscard]] std::optional<int> column_in_scalar(const YAML::Node& n, size_t offset) const;

  std::string file_;
  std::vector<config_error>& errors_;
  std::string_view text_;
};

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
