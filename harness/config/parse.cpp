// Strict YAML -> spec conversion for fixtures and suites. yaml-cpp throws; every call into it is
// in this file, and each failure becomes a config_error with the node's line and column.
// One file of about 850 lines because the YAML reader below has YAML::Node in its interface
// and yaml-cpp stays out of headers; what needs no YAML lives elsewhere (validate.h for single
// values, harness/fixture for the file system).
#include "harness/config/parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "harness/config/validate.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/units.h"

namespace evalbox::harness {

namespace {

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

// A mapping's entries by key, checked against the keys the format allows.
struct fields {
  YAML::Node node;
  std::vector<std::pair<std::string, YAML::Node>> entries;  // in file order
  std::map<std::string, YAML::Node> keys;                   // values by key

  [[nodiscard]] bool has(const std::string& k) const { return keys.contains(k); }
  [[nodiscard]] YAML::Node get(const std::string& k) const {
    auto it = keys.find(k);
    return it == keys.end() ? YAML::Node() : it->second;
  }
};

class reader {
 public:
  // `text`: the file's content, to point into a scalar (a pattern's error) when it can.
  reader(std::string file, std::vector<config_error>& errors, std::string_view text = {})
      : file_(std::move(file)), errors_(errors), text_(text) {}

  source_location at(const YAML::Node& n) const {
    if (!n.IsDefined()) return {file_, 0, 0};
    auto m = n.Mark();
    if (m.line < 0) return {file_, 0, 0};
    return {file_, m.line + 1, m.column + 1};
  }
  source_location at(const YAML::Mark& m) const {
    if (m.line < 0) return {file_, 0, 0};
    return {file_, m.line + 1, m.column + 1};
  }

  void fail(source_location where, std::string what, std::string hint = {}) {
    errors_.push_back({std::move(where), std::move(what), std::move(hint)});
  }
  void fail(const YAML::Node& n, std::string what, std::string hint = {}) {
    fail(at(n), std::move(what), std::move(hint));
  }

  [[nodiscard]] size_t error_count() const { return errors_.size(); }
  [[nodiscard]] const std::string& file() const { return file_; }

  // Checks that `n` is a mapping whose keys are all in `known` and that `required` are there.
  std::optional<fields> mapping(const YAML::Node& n, std::string_view what,
                                std::span<const std::string_view> known,
                                std::span<const std::string_view> required,
                                bool allow_unknown = false) {
    if (!n.IsMap()) {
      fail(n, fmt::format("{} must be a mapping, found {}", what, type_name(n)),
           fmt::format("write it as `key: value` lines with keys: {}", fmt::join(known, ", ")));
      return std::nullopt;
    }
    fields f;
    f.node = n;
    for (auto it = n.begin(); it != n.end(); ++it) {
      // A copy (Node is a handle): it-> returns a proxy that dies with this statement, so a
      // reference to its `first` dangled (ASan: stack-use-after-scope).
      const YAML::Node key = it->first;
      if (!key.IsScalar()) {
        fail(key, fmt::format("{} has a key that is not a plain name", what));
        continue;
      }
      std::string k = key.Scalar();
      if (f.keys.contains(k)) {
        fail(key, fmt::format("{} has '{}' twice", what, k), "keep one of them");
        continue;
      }
      if (!allow_unknown && std::find(known.begin(), known.end(), k) == known.end()) {
        fail(key, fmt::format("unknown key '{}' in {}", k, what), unknown_hint(k, known));
        continue;
      }
      f.keys.emplace(k, it->second);
      f.entries.emplace_back(k, it->second);
    }
    for (auto r : required) {
      if (!f.keys.contains(std::string(r)))
        fail(n, fmt::format("{} is missing '{}'", what, r), fmt::format("add `{}: ...`", r));
    }
    return f;
  }

  static std::string unknown_hint(std::string_view k, std::span<const std::string_view> known) {
    if (auto best = closest(k, known); !best.empty())
      return fmt::format("did you mean '{}'?", best);
    return fmt::format("the keys allowed here are: {}", fmt::join(known, ", "));
  }

  std::optional<std::string> string(const YAML::Node& n, std::string_view what,
                                    bool allow_empty = false) {
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

  std::optional<double> number(const YAML::Node& n, std::string_view what) {
    if (n.IsScalar() && n.Tag() != "!") {
      const std::string& s = n.Scalar();
      double v = 0;
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (!s.empty() && ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v))
        return v;
    }
    fail(n, fmt::format("{} must be a number, found {}", what, describe(n)));
    return std::nullopt;
  }

  std::optional<uint64_t> positive_integer(const YAML::Node& n, std::string_view what) {
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

  std::optional<std::vector<std::string>> string_list(const YAML::Node& n, std::string_view what,
                                                      bool allow_empty_list = false) {
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

  // A pattern, compiled now (once per fixture load, never per evaluation). An error points at
  // the offending character when the scalar is written on one line without escapes, else at
  // the scalar, saying where in the pattern.
  std::optional<pattern> regex(const YAML::Node& n, std::string_view what) {
    auto s = string(n, what);
    if (!s) return std::nullopt;
    auto compiled = pattern::compile(*s);
    if (compiled) return std::move(*compiled);
    const pattern_problem& p = compiled.error();
    source_location where = at(n);
    std::string what_is_wrong =
        fmt::format("{} is not a valid regular expression: {}", what, p.what);
    if (p.offset) {
      if (auto column = column_in_scalar(n, *p.offset))
        where.column = *column;
      else
        what_is_wrong += fmt::format(" (at character {} of the pattern)", *p.offset + 1);
    }
    fail(std::move(where), std::move(what_is_wrong), p.hint());
    return std::nullopt;
  }

  // The 1-based column of byte `offset` of scalar `n`'s value, when the value appears verbatim
  // on its line (plain or quoted, without escapes or line folding).
  std::optional<int> column_in_scalar(const YAML::Node& n, size_t offset) const {
    const YAML::Mark m = n.Mark();
    if (m.pos < 0 || m.column < 0 || static_cast<size_t>(m.pos) >= text_.size())
      return std::nullopt;
    const std::string& value = n.Scalar();
    size_t start = static_cast<size_t>(m.pos);
    int quote = text_[start] == '"' || text_[start] == '\'' ? 1 : 0;
    std::string_view raw = text_.substr(start + static_cast<size_t>(quote));
    if (value.find('\n') != std::string::npos || !raw.starts_with(value)) return std::nullopt;
    return m.column + 1 + quote + static_cast<int>(offset);
  }

  std::optional<std::string> relative_path(const YAML::Node& n, std::string_view what) {
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

  // A YAML value as JSON. Plain scalars become null, booleans and numbers when they read as
  // such (YAML 1.2 core schema); quoted scalars stay strings.
  json to_json(const YAML::Node& n) {
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

  std::string describe(const YAML::Node& n) {
    if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
    return std::string(type_name(n));
  }

 private:
  std::string file_;
  std::vector<config_error>& errors_;
  std::string_view text_;
};

// Loads YAML text; on a syntax error records it and returns an undefined node.
YAML::Node load_yaml(reader& r, std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    return root;
  } catch (const YAML::ParserException& e) {
    r.fail(r.at(e.mark), fmt::format("YAML syntax error: {}", e.msg),
           "check indentation, quoting and that ':' is followed by a space");
  } catch (const YAML::Exception& e) {
    r.fail(r.at(e.mark), fmt::format("YAML error: {}", e.msg));
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool check_schema(reader& r, const fields& f, std::string_view expected) {
  auto s = r.string(f.get("schema"), "schema");
  if (s && *s != expected) {
    r.fail(f.get("schema"), fmt::format("schema '{}' is not '{}'", *s, expected),
           fmt::format("write `schema: {}`", expected));
    return false;
  }
  return s.has_value();
}

// limits: {wall, cpu, memory, pids, disk, output}
limits_spec parse_limits(reader& r, const YAML::Node& n, std::string_view what) {
  static constexpr std::string_view known[] = {"wall", "cpu", "memory", "pids", "disk", "output"};
  limits_spec out;
  auto f = r.mapping(n, what, known, {});
  if (!f) return out;
  for (const auto& [key, value] : f->entries) {
    std::string name = fmt::format("{}.{}", what, key);
    if (key == "pids") {
      out.pids = r.positive_integer(value, name);
      continue;
    }
    if (!value.IsScalar() || value.Scalar().empty()) {
      r.fail(value, fmt::format("{} must be a value like {}", name,
                                key == "wall" || key == "cpu" ? "10m or 90s" : "2GiB"));
      continue;
    }
    bool duration = key == "wall" || key == "cpu";
    auto parsed = duration ? parse_duration_ms(value.Scalar()) : parse_bytes(value.Scalar());
    if (!parsed) {
      r.fail(value, fmt::format("{}: {}", name, parsed.error().message),
             duration ? "units: ms, s, m, h, d (e.g. 10m, 1h30m)"
                      : "units: B, KiB, MiB, GiB, TiB (or K, M, G, T in powers of 1000)");
      continue;
    }
    if (*parsed == 0) {
      r.fail(value, fmt::format("{} must be greater than zero", name));
      continue;
    }
    if (key == "wall") out.wall_ms = *parsed;
    if (key == "cpu") out.cpu_ms = *parsed;
    if (key == "memory") out.memory_bytes = *parsed;
    if (key == "disk") out.disk_bytes = *parsed;
    if (key == "output") out.output_bytes = *parsed;
  }
  return out;
}

// network: none | {allow: [host:port, ...]}
network_spec parse_network(reader& r, const YAML::Node& n, std::string_view what) {
  network_spec out;
  if (n.IsScalar()) {
    if (n.Scalar() != "none")
      r.fail(n, fmt::format("{} '{}' is not a network policy", what, n.Scalar()),
             "write `none`, or `{allow: [host:port, ...]}` to reach only those hosts");
    return out;
  }
  static constexpr std::string_view known[] = {"allow"};
  auto f = r.mapping(n, what, known, known);
  if (!f || !f->has("allow")) return out;
  out.mode = network_spec::mode_kind::allow;
  YAML::Node list = f->get("allow");
  auto hosts = r.string_list(list, fmt::format("{}.allow", what));
  if (!hosts) return out;
  for (size_t i = 0; i < hosts->size(); ++i) {
    if (std::string why = host_port_problem((*hosts)[i]); !why.empty())
      r.fail(list[i], fmt::format("{}.allow entry '{}' {}", what, (*hosts)[i], why),
             "write host:port, e.g. api.openai.com:443");
  }
  out.allow = std::move(*hosts);
  return out;
}

// environment: {image: REF, workdir: /dir}
std::optional<environment_spec> parse_environment(reader& r, const YAML::Node& n) {
  static constexpr std::string_view known[] = {"image", "workdir"};
  static constexpr std::string_view required[] = {"image"};
  auto f = r.mapping(n, "environment", known, required);
  if (!f) return std::nullopt;
  environment_spec e;
  e.where = r.at(n);
  const size_t before = r.error_count();
  if (f->has("image")) {
    YAML::Node image = f->get("image");
    e.image_where = r.at(image);
    if (auto s = r.string(image, "environment.image")) {
      if (std::string why = image_reference_problem(*s); !why.empty())
        r.fail(image, fmt::format("environment.image {}", why),
               "write oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:NAME:TAG] or "
               "rootfs:DIR (paths relative to this file)");
      else
        e.image = *s;
    }
  }
  if (f->has("workdir")) {
    YAML::Node w = f->get("workdir");
    e.workdir_where = r.at(w);
    if (auto s = r.string(w, "environment.workdir")) {
      fs::path p(*s);
      if (!p.is_absolute() || p.lexically_normal() != p || p == "/" ||
          !is_safe_relative(p.relative_path()))
        r.fail(
            w,
            fmt::format("environment.workdir '{}' must be an absolute directory other than /", *s),
            "a directory inside the image, e.g. /app");
      else
        e.workdir = *s;
    }
  }
  if (r.error_count() != before) return std::nullopt;
  return e;
}

void parse_file_check(reader& r, const YAML::Node& n, const std::string& what, file_check& out) {
  static constexpr std::string_view known[] = {"path",     "exists",  "absent", "equals",
                                               "contains", "matches", "json"};
  static constexpr std::string_view required[] = {"path"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return;
  if (f->has("path")) {
    if (auto p = r.relative_path(f->get("path"), what + ".path")) out.path = *p;
  }
  std::vector<std::string> preds;
  for (const auto& [k, v] : f->entries)
    if (k != "path") preds.push_back(k);
  if (preds.size() != 1) {
    r.fail(n,
           preds.empty() ? fmt::format("{} has no predicate", what)
                         : fmt::format("{} has {} predicates ({}); it needs exactly one", what,
                                       preds.size(), fmt::join(preds, ", ")),
           "use exactly one of exists, absent, equals, contains, matches, json");
    return;
  }
  const std::string& p = preds.front();
  YAML::Node v = f->get(p);
  std::string name = fmt::format("{}.{}", what, p);
  using k = file_check::predicate_kind;
  if (p == "exists" || p == "absent") {
    out.predicate = p == "exists" ? k::exists : k::absent;
    if (!v.IsScalar() || v.Scalar() != "true")
      r.fail(v, fmt::format("{} must be `true`", name),
             p == "exists" ? "to require that the file is missing, write `absent: true`"
                           : "to require that the file exists, write `exists: true`");
  } else if (p == "equals" || p == "contains") {
    out.predicate = p == "equals" ? k::equals : k::contains;
    if (auto s = r.string(v, name, p == "equals")) out.text = *s;
  } else if (p == "matches") {
    out.predicate = k::matches;
    if (auto re = r.regex(v, name)) out.regex = std::move(*re);
  } else if (p == "json") {
    out.predicate = k::json;
    static constexpr std::string_view jk[] = {"pointer", "equals"};
    auto jf = r.mapping(v, name, jk, jk);
    if (!jf) return;
    if (jf->has("pointer")) {
      if (auto ptr = r.string(jf->get("pointer"), name + ".pointer", true)) {
        try {
          json::json_pointer check(*ptr);
          out.pointer = *ptr;
        } catch (const json::exception& e) {
          r.fail(jf->get("pointer"),
                 fmt::format("{}.pointer '{}' is not a JSON pointer", name, *ptr),
                 "write it like /a/b/0 (RFC 6901), or \"\" for the whole document");
        }
      }
    }
    if (jf->has("equals")) out.expected = r.to_json(jf->get("equals"));
  }
}

void parse_git_check(reader& r, const YAML::Node& n, const std::string& what, git_check& out) {
  static constexpr std::string_view known[] = {"paths", "state"};
  auto f = r.mapping(n, what, known, known);
  if (!f) return;
  if (f->has("paths")) {
    YAML::Node list = f->get("paths");
    if (auto paths = r.string_list(list, what + ".paths")) {
      for (size_t i = 0; i < paths->size(); ++i) {
        if (r.relative_path(list[i], fmt::format("{}.paths[{}]", what, i)))
          out.paths.push_back((*paths)[i]);
      }
    }
  }
  if (f->has("state")) {
    if (auto s = r.string(f->get("state"), what + ".state")) {
      if (*s == "changed")
        out.state = git_check::state_kind::changed;
      else if (*s == "unchanged")
        out.state = git_check::state_kind::unchanged;
      else
        r.fail(f->get("state"), fmt::format("{}.state '{}' is not a git state", what, *s),
               "write `changed` or `unchanged`");
    }
  }
}

void parse_transcript_check(reader& r, const YAML::Node& n, const std::string& what,
                            transcript_check& out) {
  static constexpr std::string_view known[] = {"command_matches", "final_message_matches",
                                               "tool_used", "forbid_command", "max_steps"};
  auto f = r.mapping(n, what, known, {});
  if (!f) return;
  if (f->entries.size() != 1) {
    r.fail(n,
           f->entries.empty()
               ? fmt::format("{} has no predicate", what)
               : fmt::format("{} has {} predicates; it needs exactly one", what, f->entries.size()),
           fmt::format("use exactly one of {}", fmt::join(known, ", ")));
    return;
  }
  const auto& [k, v] = f->entries.front();
  std::string name = fmt::format("{}.{}", what, k);
  using pk = transcript_check::predicate_kind;
  if (k == "max_steps") {
    out.predicate = pk::max_steps;
    if (auto m = r.positive_integer(v, name)) out.max_steps = *m;
    return;
  }
  if (k == "tool_used") {
    out.predicate = pk::tool_used;
    if (auto s = r.string(v, name)) out.tool = *s;
    return;
  }
  out.predicate = k == "command_matches"         ? pk::command_matches
                  : k == "final_message_matches" ? pk::final_message_matches
                                                 : pk::forbid_command;
  if (auto re = r.regex(v, name)) out.regex = std::move(*re);
}

// tests: {command, patch, report: pytest | {junit: PATH}, fail_to_pass: [...], pass_to_pass}
void parse_tests_check(reader& r, const YAML::Node& n, const std::string& what, tests_check& out) {
  static constexpr std::string_view known[] = {"command", "patch", "report", "fail_to_pass",
                                               "pass_to_pass"};
  static constexpr std::string_view required[] = {"command"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return;
  if (f->has("command")) {
    if (auto s = r.string(f->get("command"), what + ".command")) out.command = *s;
  }
  if (f->has("patch")) {
    YAML::Node p = f->get("patch");
    if (auto s = r.string(p, what + ".patch")) {
      // The patch is the grader's: under grader/, which the agent never sees.
      fs::path rel(*s);
      auto it = rel.begin();
      if (it == rel.end() || *it != "grader" || !is_safe_relative(rel) ||
          rel.lexically_normal() == "grader")
        r.fail(p, fmt::format("{}.patch '{}' must be a file under grader/", what, *s),
               "put the patch in the fixture's grader/ directory (hidden from the agent) and "
               "write e.g. `patch: grader/test.patch`");
      else
        out.patch = rel.lexically_relative("grader").generic_string();
    }
  }
  if (f->has("report")) {
    YAML::Node rep = f->get("report");
    if (rep.IsScalar() && rep.Scalar() == "pytest") {
      out.report = tests_check::report_kind::pytest;
    } else if (rep.IsMap()) {
      static constexpr std::string_view junit_keys[] = {"junit"};
      if (auto jf = r.mapping(rep, what + ".report", junit_keys, junit_keys);
          jf && jf->has("junit"))
        if (auto p = r.relative_path(jf->get("junit"), what + ".report.junit")) {
          out.report = tests_check::report_kind::junit;
          out.junit_path = *p;
        }
    } else {
      r.fail(rep, fmt::format("{}.report must be `pytest` or `{{junit: PATH}}`", what),
             "pytest reads the command's output (run pytest with -rA); junit reads the XML "
             "report the command writes at PATH (relative to /workspace)");
    }
  }
  auto names = [&](const char* key, std::vector<std::string>& into) {
    if (!f->has(key)) return;
    if (auto l = r.string_list(f->get(key), fmt::format("{}.{}", what, key), true)) into = *l;
  };
  names("fail_to_pass", out.fail_to_pass);
  names("pass_to_pass", out.pass_to_pass);
  if (out.fail_to_pass.empty() && out.pass_to_pass.empty() && f->has("command"))
    r.fail(n, fmt::format("{} names no test", what),
           "list the tests the change must make pass in fail_to_pass (and those that must keep "
           "passing in pass_to_pass)");
}

// judge: {propositions: [...], evidence: [final_message | diff | commands | "file:PATH"],
// judge: NAME}. Whether NAME is one of the suite's judges is checked with the suite
// (check_judges in judges.h): a fixture alone does not know them.
void parse_judge_check(reader& r, const YAML::Node& n, const std::string& what, judge_check& out) {
  static constexpr std::string_view known[] = {"propositions", "evidence", "judge"};
  static constexpr std::string_view required[] = {"propositions"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return;
  out.judge_where = r.at(n);
  if (f->has("propositions")) {
    YAML::Node p = f->get("propositions");
    if (auto l = r.string_list(p, what + ".propositions")) {
      out.propositions = *l;
      if (l->size() > max_judge_propositions)
        r.fail(p,
               fmt::format("{}.propositions has {} entries; at most {}", what, l->size(),
                           max_judge_propositions),
               "split them into several judge checks");
      for (size_t i = 0; i < l->size(); ++i)
        if ((*l)[i].size() > max_judge_proposition_bytes)
          r.fail(p[i], fmt::format("{}.propositions[{}] is longer than {} bytes", what, i,
                                   max_judge_proposition_bytes));
    }
  }
  if (f->has("evidence")) {
    YAML::Node e = f->get("evidence");
    if (auto l = r.string_list(e, what + ".evidence", true)) {
      std::set<std::string> seen;
      for (size_t i = 0; i < l->size(); ++i) {
        const std::string& s = (*l)[i];
        judge_check::evidence_spec item;
        using ek = judge_check::evidence_kind;
        if (s == "final_message") {
          item.kind = ek::final_message;
        } else if (s == "diff") {
          item.kind = ek::diff;
        } else if (s == "commands") {
          item.kind = ek::commands;
        } else if (s.starts_with("file:")) {
          item.kind = ek::file;
          item.path = s.substr(5);
          if (item.path.empty() || !is_safe_relative(fs::path(item.path))) {
            r.fail(e[i],
                   fmt::format("{}.evidence[{}] '{}' must name a relative path without "
                               "'..'",
                               what, i, s),
                   "paths are relative to /workspace, e.g. file:NOTES.md");
            continue;
          }
        } else {
          r.fail(e[i], fmt::format("{}.evidence[{}] '{}' is not a kind of evidence", what, i, s),
                 "use final_message, diff, commands or file:PATH");
          continue;
        }
        if (!seen.insert(item.label()).second) {
          r.fail(e[i], fmt::format("{}.evidence names '{}' twice", what, s), "keep one");
          continue;
        }
        out.evidence.push_back(std::move(item));
      }
    }
  }
  if (f->has("judge")) {
    out.judge_where = r.at(f->get("judge"));
    if (auto s = r.string(f->get("judge"), what + ".judge")) out.judge = *s;
  }
}

std::optional<check_spec> parse_check(reader& r, const YAML::Node& n, size_t index) {
  static constexpr std::string_view known[] = {"id",  "weight",     "shell", "file",
                                               "git", "transcript", "tests", "judge"};
  static constexpr std::string_view required[] = {"id"};
  std::string what = fmt::format("checks[{}]", index);
  auto f = r.mapping(n, what, known, required);
  if (!f) return std::nullopt;
  check_spec c;
  c.where = r.at(n);
  if (f->has("id")) {
    if (auto id = r.string(f->get("id"), what + ".id")) {
      c.id = *id;
      if (!is_valid_id(*id, true))
        r.fail(f->get("id"), fmt::format("check id '{}' is not a valid id", *id),
               "use letters, digits, '.', '_' and '-', starting with a letter or digit");
      else
        what = fmt::format("checks.{}", *id);
    }
  }
  if (f->has("weight")) {
    if (auto w = r.number(f->get("weight"), what + ".weight")) {
      if (*w < 0)
        r.fail(f->get("weight"), fmt::format("{}.weight must not be negative", what),
               "0 makes the check informational");
      c.weight = *w;
    }
  }
  std::vector<std::string> kinds;
  for (const auto& [k, v] : f->entries)
    if (k != "id" && k != "weight") kinds.push_back(k);
  if (kinds.size() != 1) {
    r.fail(n,
           kinds.empty() ? fmt::format("{} says nothing to check", what)
                         : fmt::format("{} has {} kinds ({}); it needs exactly one", what,
                                       kinds.size(), fmt::join(kinds, ", ")),
           "give exactly one of shell, file, git, transcript, tests, judge");
    return c;
  }
  const std::string& k = kinds.front();
  YAML::Node v = f->get(k);
  if (k == "shell") {
    c.kind = check_kind::shell;
    if (auto s = r.string(v, what + ".shell")) c.shell = *s;
  } else if (k == "file") {
    c.kind = check_kind::file;
    parse_file_check(r, v, what + ".file", c.file);
  } else if (k == "git") {
    c.kind = check_kind::git;
    parse_git_check(r, v, what + ".git", c.git);
  } else if (k == "tests") {
    c.kind = check_kind::tests;
    parse_tests_check(r, v, what + ".tests", c.tests);
  } else if (k == "judge") {
    c.kind = check_kind::judge;
    parse_judge_check(r, v, what + ".judge", c.judge);
  } else {
    c.kind = check_kind::transcript;
    parse_transcript_check(r, v, what + ".transcript", c.transcript);
  }
  return c;
}

// workspace: {git: URL-or-PATH, commit: SHA}. The source is untrusted text handed to git:
// harness/fixture/git_source.cpp refuses what git would read as an option or a transport
// helper; here only the form is checked.
std::optional<git_workspace_spec> parse_git_workspace(reader& r, const YAML::Node& n) {
  static constexpr std::string_view known[] = {"git", "commit"};
  auto f = r.mapping(n, "workspace", known, known);
  if (!f) return std::nullopt;
  git_workspace_spec g;
  g.where = r.at(n);
  bool ok = f->has("git") && f->has("commit");
  if (f->has("git")) {
    g.source_where = r.at(f->get("git"));
    if (auto s = r.string(f->get("git"), "workspace.git"))
      g.source = *s;
    else
      ok = false;
  }
  if (f->has("commit")) {
    YAML::Node c = f->get("commit");
    g.commit_where = r.at(c);
    if (auto s = r.string(c, "workspace.commit")) {
      g.commit = *s;
      bool hex =
          s->size() >= 7 && s->size() <= 64 && std::all_of(s->begin(), s->end(), [](char ch) {
            return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
          });
      if (!hex) {
        r.fail(c, fmt::format("workspace.commit '{}' is not a commit id", *s),
               "give the commit's hexadecimal id (lowercase, 7 to 64 digits; the full 40 is "
               "best), not a branch or tag name, so that every run starts from the same tree");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return g;
}

// fixtures: [path or glob, ...] as written; harness/fixture resolves them (load_suite).
void parse_fixture_entries(reader& r, const YAML::Node& n, std::vector<fixture_entry>& out) {
  auto list = r.string_list(n, "fixtures");
  if (!list) return;
  for (size_t i = 0; i < list->size(); ++i) out.push_back({(*list)[i], r.at(n[i])});
}

std::optional<candidate_spec> parse_candidate(reader& r, const YAML::Node& n, size_t index,
                                              const fs::path& base,
                                              std::span<const std::string> adapters) {
  static constexpr std::string_view common[] = {"id",      "adapter",    "home_files", "env",
                                                "network", "credential", "credentials"};
  static constexpr std::string_view required[] = {"id", "adapter"};
  std::string what = fmt::format("candidates[{}]", index);
  auto f = r.mapping(n, what, common, required, /*allow_unknown=*/true);
  if (!f) return std::nullopt;
  candidate_spec c;
  c.where = r.at(n);
  if (f->has("id")) {
    if (auto id = r.string(f->get("id"), what + ".id")) {
      c.id = *id;
      if (!is_valid_id(*id, false))
        r.fail(f->get("id"), fmt::format("candidate id '{}' is not a valid id", *id),
               "use [a-z0-9][a-z0-9._-]*");
      else
        what = fmt::format("candidates.{}", *id);
    }
  }
  if (f->has("adapter")) {
    if (auto a = r.string(f->get("adapter"), what + ".adapter")) {
      c.adapter = *a;
      if (std::find(adapters.begin(), adapters.end(), *a) == adapters.end())
        r.fail(f->get("adapter"), fmt::format("{} names unknown adapter '{}'", what, *a),
               adapters.empty() ? std::string("no adapter is registered")
                                : fmt::format("known adapters: {}", fmt::join(adapters, ", ")));
    }
  }
  if (f->has("home_files")) {
    YAML::Node h = f->get("home_files");
    if (auto hf = r.mapping(h, what + ".home_files", {}, {}, true)) {
      for (const auto& [target, source] : hf->entries) {
        std::string name = fmt::format("{}.home_files['{}']", what, target);
        if (!is_safe_relative(fs::path(target))) {
          r.fail(source,
                 fmt::format("{}: target '{}' must be a relative path without '..'", name, target),
                 "targets are relative to the agent's home directory");
          continue;
        }
        auto src = r.string(source, name);
        if (!src) continue;
        fs::path full = normalize(base / expand_home(*src));
        std::error_code ec;
        if (!fs::exists(full, ec)) {
          r.fail(source,
                 fmt::format("{}: source '{}' does not exist ({})", name, *src, full.string()),
                 "sources are relative to the suite file");
          continue;
        }
        c.home_files[target] = full;
      }
    }
  }
  if (f->has("env")) {
    if (auto ef = r.mapping(f->get("env"), what + ".env", {}, {}, true)) {
      for (const auto& [k, v] : ef->entries) {
        if (!is_env_name(k)) {
          r.fail(v, fmt::format("{}.env: '{}' is not a variable name", what, k),
                 "use letters, digits and '_', not starting with a digit");
          continue;
        }
        if (auto s = r.string(v, fmt::format("{}.env.{}", what, k), true)) c.env[k] = *s;
      }
    }
  }
  if (f->has("network")) c.network = parse_network(r, f->get("network"), what + ".network");
  if (f->has("credential") && f->has("credentials"))
    r.fail(f->get("credentials"), fmt::format("{} has both credential and credentials", what),
           "list every handle under `credentials`");
  if (f->has("credential")) {
    if (auto s = r.string(f->get("credential"), what + ".credential")) c.credentials.push_back(*s);
  }
  if (f->has("credentials")) {
    if (auto l = r.string_list(f->get("credentials"), what + ".credentials")) c.credentials = *l;
  }
  for (const auto& [k, v] : f->entries) {
    if (std::find(std::begin(common), std::end(common), k) != std::end(common)) continue;
    c.settings[k] = setting{r.to_json(v), r.at(v)};
  }
  return c;
}

// credentials: {handle: path, ...}; paths relative to the suite file, `~` expanded.
void parse_credentials(reader& r, const YAML::Node& n, const fs::path& base_dir, suite_spec& spec) {
  if (auto cf = r.mapping(n, "credentials", {}, {}, true)) {
    for (const auto& [handle, path] : cf->entries) {
      if (!is_valid_id(handle, true)) {
        r.fail(path, fmt::format("credential handle '{}' is not a valid name", handle),
               "use letters, digits, '.', '_' and '-'");
        continue;
      }
      if (auto p = r.string(path, fmt::format("credentials.{}", handle)))
        spec.credentials[handle] = normalize(base_dir / expand_home(*p));
    }
  }
}

// candidates: [...]: each one, ids unique, each credential handle defined by the suite (so
// credentials are parsed first).
void parse_candidates(reader& r, const YAML::Node& list, const fs::path& base_dir,
                      std::span<const std::string> adapters, suite_spec& spec) {
  if (!list.IsSequence() || list.size() == 0) {
    r.fail(list,
           list.IsSequence() ? std::string("candidates must not be empty")
                             : fmt::format("candidates must be a list, found {}", type_name(list)),
           "add at least one `- {id: ..., adapter: ...}`");
    return;
  }
  std::map<std::string, source_location> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    auto c = parse_candidate(r, list[i], i, base_dir, adapters);
    if (!c) continue;
    if (!c->id.empty()) {
      auto [it, fresh] = ids.emplace(c->id, c->where);
      if (!fresh)
        r.fail(c->where, fmt::format("candidate id '{}' is used twice", c->id),
               fmt::format("the first is at {}; give each candidate its own id",
                           it->second.to_string()));
    }
    for (const auto& h : c->credentials) {
      if (!spec.credentials.contains(h))
        r.fail(c->where,
               fmt::format("candidate '{}' uses credential '{}', which the suite does not "
                           "define",
                           c->id, h),
               fmt::format("add `credentials: {{{}: PATH}}` at the top level of the suite", h));
    }
    spec.candidates.push_back(std::move(*c));
  }
}

// baseline: a candidate id (so candidates are parsed first).
void parse_baseline(reader& r, const YAML::Node& n, suite_spec& spec) {
  auto b = r.string(n, "baseline");
  if (!b) return;
  spec.baseline = *b;
  if (!spec.candidates.empty() && !spec.find_candidate(*b)) {
    std::set<std::string> ids;
    for (const auto& c : spec.candidates)
      if (!c.id.empty()) ids.insert(c.id);
    r.fail(n, fmt::format("baseline '{}' is not a candidate", *b),
           fmt::format("name one of: {}", fmt::join(ids, ", ")));
  }
}

// prices: {model or candidate id: {input_per_mtok, output_per_mtok}}, both non-negative.
void parse_prices(reader& r, const YAML::Node& n, suite_spec& spec) {
  auto pf = r.mapping(n, "prices", {}, {}, true);
  if (!pf) return;
  static constexpr std::string_view pk[] = {"input_per_mtok", "output_per_mtok"};
  for (const auto& [model, v] : pf->entries) {
    std::string name = fmt::format("prices.{}", model);
    auto p = r.mapping(v, name, pk, pk);
    if (!p) continue;
    price_spec price;
    bool ok = true;
    for (auto key : pk) {
      std::string k(key);
      if (!p->has(k)) {
        ok = false;
        continue;
      }
      auto num = r.number(p->get(k), name + "." + k);
      if (!num || *num < 0) {
        if (num) r.fail(p->get(k), fmt::format("{}.{} must not be negative", name, k));
        ok = false;
        continue;
      }
      (k == "input_per_mtok" ? price.input_per_mtok : price.output_per_mtok) = *num;
    }
    if (ok) spec.prices[model] = price;
  }
}

// Harbor tasks' suite keys (docs/harbor.md). images: {REF: SOURCE}: the image evalbox reads for
// a registry reference a task.toml names, its path relative to the suite file.
void parse_images(reader& r, const YAML::Node& n, const fs::path& base_dir, suite_spec& spec) {
  auto m = r.mapping(n, "images", {}, {}, true);
  if (!m) return;
  for (const auto& [ref, v] : m->entries) {
    auto source = r.string(v, fmt::format("images.{}", ref));
    if (!source) continue;
    if (std::string why = image_reference_problem(*source); !why.empty())
      r.fail(v, fmt::format("images.{} {}", ref, why),
             "write oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:NAME:TAG] or "
             "rootfs:DIR (paths relative to this file)");
    else
      spec.images[ref] = resolve_image_reference(*source, base_dir);
  }
}

// harbor: {threshold: X}: the reward a Harbor task's run must reach (default 1.0).
void parse_harbor(reader& r, const YAML::Node& n, suite_spec& spec) {
  static constexpr std::string_view known[] = {"threshold"};
  auto m = r.mapping(n, "harbor", known, {});
  if (!m || !m->has("threshold")) return;
  if (auto t = r.number(m->get("threshold"), "harbor.threshold")) spec.harbor_threshold = *t;
}

// judges: {NAME: {adapter, model, base_url, api_key_env, argv, votes, timeout, retries,
// max_evidence, max_output_tokens}} (docs/suite-format.md).
void parse_judges(reader& r, const YAML::Node& n, const fs::path& base_dir, suite_spec& spec) {
  auto m = r.mapping(n, "judges", {}, {}, true);
  if (!m) return;
  static constexpr std::string_view known[] = {
      "adapter", "model",   "base_url", "api_key_env",  "argv",
      "votes",   "timeout", "retries",  "max_evidence", "max_output_tokens"};
  static constexpr std::string_view required[] = {"adapter"};
  for (const auto& [name, v] : m->entries) {
    const std::string what = fmt::format("judges.{}", name);
    if (!is_valid_id(name, true)) {
      r.fail(v, fmt::format("judge name '{}' is not a valid name", name),
             "use letters, digits, '.', '_' and '-'");
      continue;
    }
    auto f = r.mapping(v, what, known, required);
    if (!f) continue;
    const size_t before = r.error_count();
    judge_spec j;
    j.name = name;
    j.where = r.at(v);
    using ak = judge_spec::adapter_kind;
    if (f->has("adapter")) {
      if (auto a = r.string(f->get("adapter"), what + ".adapter")) {
        if (*a == "openai-responses")
          j.adapter = ak::openai_responses;
        else if (*a == "anthropic-messages")
          j.adapter = ak::anthropic_messages;
        else if (*a == "command")
          j.adapter = ak::command;
        else
          r.fail(f->get("adapter"), fmt::format("{}.adapter '{}' is not a judge adapter", what, *a),
                 "use openai-responses, anthropic-messages or command");
      }
    }
    const bool http = j.adapter != ak::command;
    if (f->has("model")) {
      if (auto s = r.string(f->get("model"), what + ".model")) j.model = *s;
    } else if (http) {
      r.fail(v, fmt::format("{} is missing 'model'", what), "add `model: ...`");
    }
    if (f->has("argv")) {
      if (!http) {
        if (auto l = r.string_list(f->get("argv"), what + ".argv")) {
          j.argv = *l;
          // Like a command candidate's program: relative to the suite file when it names a path.
          if (j.argv[0].find('/') != std::string::npos && !fs::path(j.argv[0]).is_absolute())
            j.argv[0] = normalize(base_dir / j.argv[0]).string();
        }
      } else {
        r.fail(f->get("argv"), fmt::format("{}.argv is for `adapter: command`", what));
      }
    } else if (!http) {
      r.fail(v, fmt::format("{} is missing 'argv'", what),
             "give the program that reads the request JSON on stdin, e.g. argv: [./judge.sh]");
    }
    if (f->has("base_url")) {
      YAML::Node b = f->get("base_url");
      if (auto s = r.string(b, what + ".base_url")) {
        if (!http)
          r.fail(b, fmt::format("{}.base_url is for the HTTP adapters", what));
        else if (!s->starts_with("http://") && !s->starts_with("https://"))
          r.fail(b, fmt::format("{}.base_url '{}' must start with http:// or https://", what, *s),
                 "e.g. https://api.openai.com");
        else
          j.base_url = *s;
      }
    } else if (http) {
      j.base_url = j.adapter == ak::openai_responses ? "https://api.openai.com"
                                                     : "https://api.anthropic.com";
    }
    while (j.base_url.ends_with('/')) j.base_url.pop_back();
    if (f->has("api_key_env")) {
      YAML::Node k = f->get("api_key_env");
      if (auto s = r.string(k, what + ".api_key_env")) {
        const bool valid = std::all_of(s->begin(), s->end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
        if (!valid || std::isdigit(static_cast<unsigned char>(s->front())))
          r.fail(k, fmt::format("{}.api_key_env '{}' is not a variable name", what, *s),
                 "name the variable that holds the key, e.g. OPENAI_API_KEY (never the key)");
        else
          j.api_key_env = *s;
      }
    } else if (http) {
      j.api_key_env = j.adapter == ak::openai_responses ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY";
    }
    if (f->has("votes")) {
      if (auto c = r.positive_integer(f->get("votes"), what + ".votes")) {
        if (*c > max_judge_votes)
          r.fail(f->get("votes"), fmt::format("{}.votes is more than {}", what, max_judge_votes));
        else
          j.votes = static_cast<int>(*c);
      }
    }
    if (f->has("retries")) {
      YAML::Node rn = f->get("retries");
      if (rn.IsScalar() && rn.Scalar() == "0") {
        j.retries = 0;
      } else if (auto c = r.positive_integer(rn, what + ".retries")) {
        if (*c > 10)
          r.fail(rn, fmt::format("{}.retries is more than 10", what));
        else
          j.retries = static_cast<int>(*c);
      }
    }
    if (f->has("timeout")) {
      YAML::Node t = f->get("timeout");
      auto ms = t.IsScalar()
                    ? parse_duration_ms(t.Scalar())
                    : result<uint64_t>(make_error(error_kind::invalid_argument, "not a duration"));
      if (!ms || *ms == 0)
        r.fail(t, fmt::format("{}.timeout must be a duration like 60s or 2m", what));
      else
        j.timeout_ms = *ms;
    }
    if (f->has("max_evidence")) {
      YAML::Node t = f->get("max_evidence");
      auto b = t.IsScalar()
                   ? parse_bytes(t.Scalar())
                   : result<uint64_t>(make_error(error_kind::invalid_argument, "not a size"));
      if (!b || *b == 0 || *b > (1u << 20))
        r.fail(t, fmt::format("{}.max_evidence must be a size from 1B to 1MiB, e.g. 32KiB", what));
      else
        j.max_evidence_bytes = *b;
    }
    if (f->has("max_output_tokens")) {
      if (auto c = r.positive_integer(f->get("max_output_tokens"), what + ".max_output_tokens"))
        j.max_output_tokens = *c;
    }
    if (r.error_count() == before) spec.judges[name] = std::move(j);
  }
}

}  // namespace

fixture_spec parse_fixture_yaml(std::string_view text, std::string_view display,
                                std::vector<config_error>& errors) {
  reader r(std::string(display), errors, text);
  fixture_spec spec;
  YAML::Node root = load_yaml(r, text);
  if (!root.IsDefined()) return spec;
  static constexpr std::string_view known[] = {
      "schema", "id",      "description", "prompt",    "follow_up",   "setup",
      "limits", "network", "checks",      "threshold", "environment", "workspace"};
  static constexpr std::string_view required[] = {"schema", "id", "prompt", "checks"};
  if (root.IsNull()) {
    r.fail(source_location{r.file(), 0, 0}, "the file is empty",
           "start with `schema: evalbox.fixture.v1`, or run `evalbox fixture new NAME`");
    return spec;
  }
  auto f = r.mapping(root, "the fixture", known, required);
  if (!f) return spec;
  if (f->has("schema")) check_schema(r, *f, fixture_schema);
  if (f->has("id")) {
    if (auto id = r.string(f->get("id"), "id")) {
      spec.id = *id;
      if (!is_valid_id(*id, false))
        r.fail(f->get("id"), fmt::format("fixture id '{}' is not a valid id", *id),
               "use lowercase letters, digits, '.', '_' and '-', starting with a letter or "
               "digit");
    }
  }
  if (f->has("description")) {
    if (auto s = r.string(f->get("description"), "description", true)) spec.description = *s;
  }
  if (f->has("prompt")) {
    if (auto s = r.string(f->get("prompt"), "prompt")) spec.prompt = *s;
  }
  if (f->has("follow_up")) {
    if (auto s = r.string(f->get("follow_up"), "follow_up")) spec.follow_up = *s;
  }
  if (f->has("setup")) {
    if (auto l = r.string_list(f->get("setup"), "setup", true)) spec.setup = *l;
  }
  if (f->has("limits")) spec.limits = parse_limits(r, f->get("limits"), "limits");
  if (f->has("network")) spec.network = parse_network(r, f->get("network"), "network");
  if (f->has("environment")) spec.environment = parse_environment(r, f->get("environment"));
  if (f->has("workspace")) spec.git_workspace = parse_git_workspace(r, f->get("workspace"));
  if (f->has("threshold")) {
    if (auto t = r.number(f->get("threshold"), "threshold")) {
      if (*t < 0 || *t > 1)
        r.fail(f->get("threshold"), fmt::format("threshold {} is outside 0..1", *t),
               "it is the weighted share of checks that must pass; 1 means all");
      spec.threshold = *t;
    }
  }
  if (f->has("checks")) {
    YAML::Node checks = f->get("checks");
    if (!checks.IsSequence() || checks.size() == 0) {
      r.fail(checks,
             checks.IsSequence()
                 ? std::string("checks must not be empty")
                 : fmt::format("checks must be a list, found {}", type_name(checks)),
             "add at least one check: shell, file, git, transcript, tests or judge");
    } else {
      std::map<std::string, source_location> ids;
      double total = 0;
      size_t errors_before = r.error_count();
      for (size_t i = 0; i < checks.size(); ++i) {
        auto c = parse_check(r, checks[i], i);
        if (!c) continue;
        if (!c->id.empty()) {
          auto [it, fresh] = ids.emplace(c->id, c->where);
          if (!fresh)
            r.fail(c->where, fmt::format("check id '{}' is used twice", c->id),
                   fmt::format("the first is at {}; give each check its own id",
                               it->second.to_string()));
        }
        total += std::max(c->weight, 0.0);
        spec.checks.push_back(std::move(*c));
      }
      if (!spec.checks.empty() && total <= 0 && r.error_count() == errors_before)
        r.fail(checks, "every check has weight 0", "give at least one check a positive weight");
    }
  }
  return spec;
}

suite_spec parse_suite_yaml(std::string_view text, std::string_view display,
                            const std::filesystem::path& base_dir,
                            std::span<const std::string> adapters,
                            std::vector<config_error>& errors) {
  reader r(std::string(display), errors);
  suite_spec spec;
  YAML::Node root = load_yaml(r, text);
  if (!root.IsDefined()) return spec;
  static constexpr std::string_view known[] = {
      "schema",      "name",        "description", "fixtures", "candidates", "trials",
      "concurrency", "credentials", "limits",      "baseline", "prices",     "results",
      "environment", "images",      "harbor",      "judges"};
  static constexpr std::string_view required[] = {"schema", "name", "fixtures", "candidates"};
  if (root.IsNull()) {
    r.fail(source_location{r.file(), 0, 0}, "the file is empty",
           "start with `schema: evalbox.suite.v1`");
    return spec;
  }
  auto f = r.mapping(root, "the suite", known, required);
  if (!f) return spec;
  if (f->has("schema")) check_schema(r, *f, suite_schema);
  if (f->has("name")) {
    if (auto s = r.string(f->get("name"), "name")) {
      spec.name = *s;
      if (!is_valid_id(*s, true))
        r.fail(f->get("name"), fmt::format("suite name '{}' is not a valid name", *s),
               "it names the results directory: use letters, digits, '.', '_' and '-'");
    }
  }
  if (f->has("description")) {
    if (auto s = r.string(f->get("description"), "description", true)) spec.description = *s;
  }
  if (f->has("fixtures")) parse_fixture_entries(r, f->get("fixtures"), spec.fixture_entries);
  if (f->has("trials")) {
    if (auto t = r.positive_integer(f->get("trials"), "trials")) {
      if (*t > 10000)
        r.fail(f->get("trials"), "trials is more than 10000");
      else
        spec.trials = static_cast<int>(*t);
    }
  }
  if (f->has("concurrency")) {
    if (auto c = r.positive_integer(f->get("concurrency"), "concurrency")) {
      if (*c > 1024)
        r.fail(f->get("concurrency"), "concurrency is more than 1024");
      else
        spec.concurrency = static_cast<int>(*c);
    }
  }
  if (f->has("credentials")) parse_credentials(r, f->get("credentials"), base_dir, spec);
  if (f->has("limits")) spec.default_limits = parse_limits(r, f->get("limits"), "limits");
  if (f->has("environment")) spec.default_environment = parse_environment(r, f->get("environment"));
  if (f->has("candidates")) parse_candidates(r, f->get("candidates"), base_dir, adapters, spec);
  if (f->has("baseline")) parse_baseline(r, f->get("baseline"), spec);
  if (f->has("prices")) parse_prices(r, f->get("prices"), spec);
  if (f->has("images")) parse_images(r, f->get("images"), base_dir, spec);
  if (f->has("harbor")) parse_harbor(r, f->get("harbor"), spec);
  if (f->has("judges")) parse_judges(r, f->get("judges"), base_dir, spec);
  if (f->has("results")) {
    if (auto s = r.string(f->get("results"), "results"))
      spec.results_dir = normalize(base_dir / expand_home(*s));
  } else if (!spec.name.empty()) {
    spec.results_dir = fs::path("results") / spec.name;
  }
  return spec;
}

std::string peek_schema(std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (root.IsMap() && root["schema"] && root["schema"].IsScalar()) return root["schema"].Scalar();
  } catch (const YAML::Exception&) {
  }
  return {};
}

}  // namespace evalbox::harness
