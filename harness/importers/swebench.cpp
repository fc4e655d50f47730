// SWE-bench-style instances -> fixture directories and a suite (swebench.h).
#include "harness/importers/swebench.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_checks.h"
#include "base/json_get.h"
#include "harness/config/validate.h"
#include "harness/grading/test_report.h"
#include "harness/importers/swebench_specs.h"

namespace evalbox::harness {
inline namespace importers {

namespace fs = std::filesystem;

namespace {

// An instance's lines are long (patches); a line past this is refused, not read whole.
constexpr size_t max_instance_bytes = 64u << 20;

// One instance as the fixture needs it.
struct instance {
  std::string instance_id, repo, base_commit, problem_statement, test_patch, version;
  std::vector<std::string> fail_to_pass, pass_to_pass;
  std::string image, eval_script, patch;
};

// Thrown inside parse_instance only (never leaves this file): what is wrong with the instance.
struct bad_instance {
  std::string what, hint;
};

std::string text_field(const json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) throw bad_instance{fmt::format("'{}' is missing", key), ""};
    return {};
  }
  if (!it->is_string()) throw bad_instance{fmt::format("'{}' must be a string", key), ""};
  return it->get<std::string>();
}

// FAIL_TO_PASS / PASS_TO_PASS: a list of strings, or (as in SWE-bench's published files) a
// string holding one in JSON.
std::vector<std::string> test_list(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  json list = *it;
  if (list.is_string()) {
    auto parsed = parse_json(list.get<std::string>(), key);
    if (!parsed)
      throw bad_instance{fmt::format("'{}' is a string that does not hold a JSON list", key),
                         "write it as a list of test ids, or as a string holding one in JSON"};
    list = std::move(*parsed);
  }
  if (!list.is_array()) throw bad_instance{fmt::format("'{}' must be a list of test ids", key), ""};
  std::vector<std::string> out;
  for (const auto& t : list) {
    if (!t.is_string() || t.get<std::string>().empty())
      throw bad_instance{fmt::format("'{}' holds an entry that is not a test id", key), ""};
    out.push_back(t.get<std::string>());
  }
  return out;
}

bool is_hex_commit(const std::string& s) {
  return s.size() >= 7 && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool is_repo_name(const std::string& s) {
  auto slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() ||
      s.find('/', slash + 1) != std::string::npos)
    return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                              c == '.' || c == '/';
                     }) &&
         s.front() != '.' && s[slash + 1] != '.';
}

instance parse_instance(const json& j) {
  if (!j.is_object()) throw bad_instance{"an instance must be a JSON object", ""};
  instance in;
  in.instance_id = text_field(j, "instance_id", true);
  in.repo = text_field(j, "repo", true);
  in.base_commit = text_field(j, "base_commit", true);
  in.problem_statement = text_field(j, "problem_statement", true);
  in.test_patch = text_field(j, "test_patch", false);
  in.eval_script = text_field(j, "eval_script", false);
  in.patch = text_field(j, "patch", false);
  // SWE-bench writes it as a string ("3.0"); some copies of its files as a number.
  if (auto v = j.find("version"); v != j.end() && v->is_number())
    in.version = v->dump();
  else
    in.version = text_field(j, "version", false);
  in.image = text_field(j, "image", false);
  if (in.image.empty()) in.image = text_field(j, "image_name", false);
  in.fail_to_pass = test_list(j, "FAIL_TO_PASS");
  in.pass_to_pass = test_list(j, "PASS_TO_PASS");
  if (!is_repo_name(in.repo))
    throw bad_instance{fmt::format("repo '{}' is not \"owner/name\"", in.repo), ""};
  if (!is_hex_commit(in.base_commit))
    throw bad_instance{fmt::format("base_commit '{}' is not a commit id", in.base_commit),
                       "give the commit's hexadecimal id"};
  if (in.problem_statement.empty()) throw bad_instance{"problem_statement is empty", ""};
  if (in.test_patch.empty() && in.eval_script.empty())
    throw bad_instance{"the instance has neither test_patch nor eval_script",
                       "give the patch that adds the tests (test_patch)"};
  if (in.fail_to_pass.empty() && in.pass_to_pass.empty())
    throw bad_instance{"FAIL_TO_PASS and PASS_TO_PASS are both empty: nothing to grade", ""};
  return in;
}

// instance_id -> a fixture id: lowercase, other characters than [a-z0-9._-] as '-'.
std::string fixture_id(const std::string& instance_id) {
  std::string id;
  for (char c : instance_id) {
    auto u = static_cast<unsigned char>(c);
    char l = static_cast<char>(std::tolower(u));
    id += (std::isalnum(u) || c == '.' || c == '_' || c == '-') ? l : '-';
  }
  while (!id.empty() && !std::isalnum(static_cast<unsigned char>(id.front()))) id.erase(0, 1);
  if (id.size() > 128) id.resize(128);
  return id;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// A word for sh and bash: as it is when it holds only characters neither gives a meaning to,
// single-quoted otherwise.
std::string shell_word(std::string_view s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           (c != '\0' && std::strchr("%+,-./:=@_", c) != nullptr);
  });
  if (plain) return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + shell_word(w);
  return out;
}

std::string git_source(const swebench_import_options& o, const std::string& repo) {
  const std::string owner = repo.substr(0, repo.find('/')), name = repo.substr(repo.find('/') + 1);
  if (o.repos_dir) {
    std::vector<fs::path> tried;
    for (const fs::path& base :
         {*o.repos_dir / owner / name, *o.repos_dir / (owner + "__" + name), *o.repos_dir / name})
      for (const std::string suffix : {"", ".git"}) {
        fs::path p = base.string() + suffix;
        std::error_code ec;
        if (fs::is_directory(p, ec)) return normalize(fs::absolute(p, ec)).string();
        tried.push_back(p);
      }
    throw bad_instance{
        fmt::format("no repository for {} under {}", repo, o.repos_dir->string()),
        fmt::format("clone it there (e.g. `git clone --mirror URL {}`)", tried[1].string())};
  }
  return replace_all(replace_all(replace_all(o.repo_url, "{repo}", repo), "{owner}", owner),
                     "{name}", name);
}

// JSON lists, which YAML reads as flow sequences of double-quoted strings.
std::string yaml_list(const std::vector<std::string>& items, int indent) {
  if (items.empty()) return " []";
  std::string out;
  for (const auto& t : items)
    out += fmt::format("\n{:{}}- {}", "", indent + 2,
                       json(t).dump(-1, ' ', false, json::error_handler_t::replace));
  return out;
}

// What one instance's fixture is made of, decided before anything is written.
struct fixture_plan {
  std::string source;            // workspace git: (empty with official images)
  std::string image;             // environment image: (empty: the host's root)
  std::string workdir;           // environment workdir: (official images: /testbed)
  std::string command;           // the tests check's command
  std::string report;            // a log format name; "pytest" is the check's default
  bool test_patch = false;       // the check applies grader/test.patch itself
  bool test_patch_file = false;  // grader/test.patch is written (for the check or eval.sh)
  std::string eval_script;       // grader/eval.sh, when the check runs it
};

std::string fixture_yaml(const swebench_import_options& o, const instance& in,
                         const std::string& id, const fixture_plan& p) {
  std::string y = fmt::format(
      "# Imported by `evalbox import swebench` from {} (instance {}).\n"
      "schema: evalbox.fixture.v1\n"
      "id: {}\n"
      "description: {}\n"
      "prompt: {}\n",
      o.input.filename().string(), in.instance_id, id,
      yaml_scalar(fmt::format("{} at {}", in.repo, in.base_commit.substr(0, 12)), 0),
      yaml_scalar(in.problem_statement, 0));
  if (!p.source.empty())
    y += fmt::format("workspace:\n  git: {}\n  commit: {}\n", yaml_scalar(p.source, 2),
                     in.base_commit);
  if (!p.image.empty()) {
    y += fmt::format("environment:\n  image: {}\n", yaml_scalar(p.image, 2));
    if (!p.workdir.empty()) y += fmt::format("  workdir: {}\n", yaml_scalar(p.workdir, 2));
  }
  y += "checks:\n  - id: tests\n    tests:\n";
  if (p.test_patch) y += "      patch: grader/test.patch\n";
  y += fmt::format("      command: {}\n", yaml_scalar(p.command, 6));
  if (p.report != "pytest") y += fmt::format("      report: {{format: {}}}\n", p.report);
  y += fmt::format("      fail_to_pass:{}\n", yaml_list(in.fail_to_pass, 6));
  y += fmt::format("      pass_to_pass:{}\n", yaml_list(in.pass_to_pass, 6));
  return y;
}

constexpr std::string_view solve_sh =
    "#!/bin/sh\n"
    "# The instance's gold patch: the reference solution `evalbox fixture test` runs.\n"
    "set -e\n"
    "patch_file=\"$(dirname \"$0\")/gold.patch\"\n"
    "git apply --verbose --whitespace=nowarn \"$patch_file\" ||\n"
    "  patch --batch --fuzz=5 -p1 -i \"$patch_file\"\n";

// The image named for the instance by --images MAP, written relative to the fixture when the
// map's paths are relative (the map's directory and the fixture's differ); "" for none.
std::string mapped_image(const swebench_import_options& o, const instance& in) {
  std::string image;
  for (const auto& key : {in.instance_id, in.image})
    if (image.empty() && !key.empty())
      if (auto it = o.images.find(key); it != o.images.end()) image = it->second;
  if (!in.image.empty() && image.empty() && !o.images.empty())
    throw bad_instance{fmt::format("image '{}' is not in the image map", in.image),
                       "add it to the --images map (NAME: oci:DIR, docker-archive:FILE, ...)"};
  auto colon = image.find(':');
  if (colon == std::string::npos) return image;
  std::string kind = image.substr(0, colon), rest = image.substr(colon + 1);
  std::string suffix;
  if (kind == "oci" || kind == "oci-archive") {
    // oci:DIR[:TAG]: the tag follows the last ':'; a path has no ':' here.
    if (auto c2 = rest.find(':'); c2 != std::string::npos) {
      suffix = rest.substr(c2);
      rest.resize(c2);
    }
  }
  fs::path p(rest);
  if (p.is_relative()) p = o.images_base / p;
  std::error_code ec;
  return kind + ":" + normalize(fs::absolute(p, ec)).string() + suffix;
}

// The instance's test command run where the check runs it (in /workspace, or in /testbed from
// eval.sh): --test-cmd with {test_files} and {test_directives}, else the repository's from
// SWE-bench's specs followed by its test directives, else the default with {test_files}.
std::string test_command_of(const swebench_import_options& o, const instance& in,
                            const std::optional<swebench_repo_spec>& spec) {
  const std::string files = shell_words(swebench_test_directives(in.test_patch, false));
  const std::string directives =
      shell_words(swebench_test_directives(in.test_patch, spec && spec->django_directives));
  if (!o.test_command.empty())
    return replace_all(replace_all(o.test_command, "{test_files}", files), "{test_directives}",
                       directives);
  if (!spec) return replace_all(std::string(default_swebench_test_command), "{test_files}", files);
  return directives.empty() ? spec->test_command : spec->test_command + " " + directives;
}

// grader/eval.sh for an instance in its official image, as upstream's eval script
// (make_eval_script_list_py) runs it: in the conda env `testbed` in /testbed, the files the
// test patch touches put back as at base_commit (a file the commit lacks removed, so an agent's
// copy of a new test file does not stop the patch), the patch, the tests between upstream's
// markers. No `set -e`, as upstream: the tests run even when a step before them fails.
std::string official_eval_script(const instance& in, const std::optional<swebench_repo_spec>& spec,
                                 const std::string& test_command) {
  std::string sh = fmt::format(
      "#!/bin/bash\n"
      "# SWE-bench's evaluation of {} in its official image, written by\n"
      "# `evalbox import swebench --images official` after the eval script of SWE-bench's "
      "harness.\n"
      "set -uxo pipefail\n"
      "source /opt/miniconda3/bin/activate\n"
      "conda activate testbed\n"
      "cd /testbed\n",
      in.instance_id);
  if (spec)
    for (const auto& line : spec->setup) sh += line + "\n";
  sh += "git config --global --add safe.directory /testbed\n";
  const std::vector<std::string> files = patch_files(in.test_patch);
  if (!files.empty())
    sh += fmt::format(
        "for f in {}; do\n"
        "  git checkout {} -- \"$f\" 2>/dev/null || rm -f -- \"$f\"\n"
        "done\n",
        shell_words(files), in.base_commit);
  sh +=
      "git apply -v /grader/test.patch ||\n"
      "  patch --batch --fuzz=5 -p1 -i /grader/test.patch\n"
      ": '>>>>> Start Test Output'\n";
  sh += test_command + "\n";
  sh += ": '>>>>> End Test Output'\n";
  return sh;
}

fixture_plan plan_fixture(const swebench_import_options& o, const instance& in) {
  fixture_plan p;
  const auto spec = swebench_spec(in.repo, in.version);
  p.report = spec ? spec->log_format : "pytest";
  if (o.official_images) {
    p.image = swebench_official_image(in.instance_id, o.images_prefix);
    p.workdir = "/testbed";
    p.command = "bash /grader/eval.sh";
    p.test_patch_file = in.eval_script.empty();
    p.eval_script = in.eval_script.empty()
                        ? official_eval_script(in, spec, test_command_of(o, in, spec))
                        : in.eval_script;
    return p;
  }
  p.source = git_source(o, in.repo);
  p.image = mapped_image(o, in);
  if (in.eval_script.empty()) {
    p.test_patch = p.test_patch_file = true;
    p.command = test_command_of(o, in, spec);
  } else {
    p.command = "bash /grader/eval.sh";
    p.eval_script = in.eval_script;
  }
  return p;
}

// Writes one fixture into a temporary sibling of its directory, then renames it into place
// (replacing an earlier import of the same instance).
status write_fixture(const swebench_import_options& o, const instance& in, const std::string& id,
                     const fs::path& dir) {
  const fixture_plan plan = plan_fixture(o, in);
  const fs::path tmp = dir.string() + ".tmp-" + random_suffix();
  auto written = [&]() -> status {
    EB_TRY(make_dirs(tmp / "grader"));
    EB_TRY(write_file(tmp / "fixture.yaml", fixture_yaml(o, in, id, plan)));
    if (plan.test_patch_file) EB_TRY(write_file(tmp / "grader" / "test.patch", in.test_patch));
    if (!plan.eval_script.empty())
      EB_TRY(write_file(tmp / "grader" / "eval.sh", plan.eval_script, 0755));
    if (!in.patch.empty()) {
      EB_TRY(make_dirs(tmp / "solution"));
      EB_TRY(write_file(tmp / "solution" / "gold.patch", in.patch));
      EB_TRY(write_file(tmp / "solution" / "solve.sh", solve_sh, 0755));
    }
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir, ec))) EB_TRY(remove_tree(dir));
    fs::rename(tmp, dir, ec);
    if (ec) return make_error(error_kind::io, "rename {}: {}", dir.string(), ec.message());
    return {};
  }();
  if (!written) (void)remove_tree(tmp);
  return written;
}

std::string suite_yaml(const swebench_import_options& o, const std::string& name, bool gold) {
  std::string y = fmt::format(
      "# Written by `evalbox import swebench` from {}: every fixture directory here.\n"
      "# Add your agents as candidates (docs/suite-format.md, docs/agents.md).\n"
      "schema: evalbox.suite.v1\n"
      "name: {}\n"
      "fixtures: [\"*/\"]\n"
      "candidates:\n",
      o.input.filename().string(), name);
  if (gold) y += "  - {id: gold, adapter: oracle}  # the instances' gold patches\n";
  y += "  - {id: noop, adapter: noop}  # changes nothing: every instance must fail\n";
  y += "baseline: noop\n";
  return y;
}

}  // namespace

std::string yaml_scalar(std::string_view text, int indent) {
  bool block = text.find('\n') != std::string_view::npos;
  bool printable = true;
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) printable = false;
  }
  // YAML's literal blocks hold only printable UTF-8; they cannot start with a blank line's
  // worth of ambiguity when an indentation indicator is given.
  auto utf8_ok = [&] {
    for (size_t i = 0; i < text.size();) {
      size_t n = utf8_sequence_length(text.substr(i));
      if (n == 0) return false;
      i += n;
    }
    return true;
  };
  // Characters some YAML readers take for line breaks or a byte-order mark.
  for (std::string_view odd : {"\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xef\xbb\xbf"})
    if (text.find(odd) != std::string_view::npos) printable = false;
  if (block && printable && utf8_ok() && text.find('\t') == std::string_view::npos) {
    size_t trailing = 0;
    while (trailing < text.size() && text[text.size() - 1 - trailing] == '\n') ++trailing;
    const char* chomp = trailing == 0 ? "-" : trailing == 1 ? "" : "+";
    std::string out = fmt::format("|2{}\n", chomp);
    std::string_view body = text.substr(0, text.size() - trailing);
    size_t start = 0;
    while (start <= body.size()) {
      size_t end = body.find('\n', start);
      if (end == std::string_view::npos) end = body.size();
      std::string_view line = body.substr(start, end - start);
      if (!line.empty()) out += fmt::format("{:{}}", "", indent + 2);
      out += line;
      out += '\n';
      start = end + 1;
    }
    for (size_t i = 1; i < trailing; ++i) out += '\n';
    out.pop_back();  // the caller ends the line
    return out;
  }
  std::string quoted = json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  // JSON leaves these as they are; in YAML they are escaped, never raw.
  for (const auto& [raw, esc] :
       {std::pair<std::string_view, std::string_view>{"\xc2\x85", "\\u0085"},
        {"\xe2\x80\xa8", "\\u2028"},
        {"\xe2\x80\xa9", "\\u2029"},
        {"\xef\xbb\xbf", "\\ufeff"}})
    quoted = replace_all(std::move(quoted), raw, esc);
  return quoted;
}

namespace {

// The instances of the input with their line numbers: JSONL (each line one), or one JSON array
// (then numbered 1, 2, ... and `array` set). A line too long or not JSON is an error in `res`.
struct read_instances_result {
  std::vector<std::pair<int, json>> instances;
  bool array = false;
};

result<read_instances_result> read_instances(std::istream& in, const std::string& display,
                                             swebench_import_result& res) {
  std::vector<std::pair<int, std::string>> lines;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.size() > max_instance_bytes) {
      res.errors.push_back({{display, number, 1},
                            fmt::format("the line is {} bytes, more than evalbox reads of one "
                                        "instance",
                                        line.size()),
                            ""});
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.emplace_back(number, std::move(line));
  }
  read_instances_result out;
  out.array = !lines.empty() &&
              lines.front().second.find_first_not_of(" \t") != std::string::npos &&
              lines.front().second[lines.front().second.find_first_not_of(" \t")] == '[';
  if (out.array) {
    std::string all;
    for (const auto& [n, l] : lines) all += l + "\n";
    auto j = parse_json(all, display);
    if (!j || !j->is_array())
      return make_error(error_kind::invalid_argument, "{}: {}", display,
                        j ? "not a JSON array of instances" : j.error().message);
    int i = 0;
    for (auto& x : *j) out.instances.emplace_back(++i, std::move(x));
    return out;
  }
  for (auto& [n, l] : lines) {
    auto j = parse_json(l, "instance");
    if (!j) {
      res.errors.push_back({{display, n, 1},
                            fmt::format("not a JSON object: {}", j.error().message),
                            "one instance per line, as JSON"});
      continue;
    }
    out.instances.emplace_back(n, std::move(*j));
  }
  return out;
}

// The suite's name: the option's, else the output directory's name made an id.
std::string suite_name_of(const swebench_import_options& o) {
  if (!o.suite_name.empty()) return o.suite_name;
  std::error_code ec;
  std::string name;
  for (char c : normalize(fs::absolute(o.out, ec)).filename().string())
    name +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '-';
  return name.empty() ? "swebench" : name;
}

}  // namespace

result<swebench_import_result> import_swebench(const swebench_import_options& o) {
  std::ifstream in(o.input, std::ios::binary);
  if (!in)
    return make_error(error_kind::not_found, "cannot read {}: {}", o.input.string(),
                      std::strerror(errno));
  const std::string display = o.input.string();
  swebench_import_result res;
  const auto [instances, array] = EB_TRY(read_instances(in, display, res));
  EB_TRY(make_dirs(o.out));
  // An interrupted import's temporaries (the fixtures themselves are whole or absent).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o.out, ec))
    if (e.path().filename().string().find(".tmp-") != std::string::npos)
      (void)remove_tree(e.path());
  std::map<std::string, int> seen;  // fixture id -> line
  bool all_gold = true;
  size_t done = 0;
  for (const auto& [n, j] : instances) {
    if (o.cancel && o.cancel->load()) {
      res.cancelled = true;
      break;
    }
    const source_location where{display, array ? 0 : n, array ? 0 : 1};
    std::string shown_id;
    if (auto id = json_find<std::string>(j, "instance_id")) shown_id = std::move(*id);
    try {
      instance inst = parse_instance(j);
      shown_id = inst.instance_id;
      std::string id = fixture_id(inst.instance_id);
      if (!is_valid_id(id))
        throw bad_instance{fmt::format("instance_id '{}' makes no fixture id", inst.instance_id),
                           "use letters, digits, '.', '_' and '-'"};
      auto [it, fresh] = seen.emplace(id, n);
      if (!fresh)
        throw bad_instance{fmt::format("instance {} is also at line {} (fixture id {})",
                                       inst.instance_id, it->second, id),
                           "each instance once"};
      if (auto s = write_fixture(o, inst, id, o.out / id); !s)
        return std::unexpected(std::move(s).error().with_context("import " + inst.instance_id));
      if (inst.patch.empty()) all_gold = false;
      res.imported.push_back(id);
    } catch (const bad_instance& b) {
      res.errors.push_back(
          {where,
           array ? fmt::format("instance #{}{}: {}", n,
                               shown_id.empty() ? "" : " (" + shown_id + ")", b.what)
                 : fmt::format("instance{}: {}", shown_id.empty() ? "" : " " + shown_id, b.what),
           b.hint});
    }
    ++done;
    if (o.progress) o.progress(done, instances.size(), shown_id);
  }
  res.suite = o.out / "suite.yaml";
  if (!res.imported.empty())
    EB_TRY(write_file_atomic(res.suite, suite_yaml(o, suite_name_of(o), all_gold)));
  return res;
}

}  // namespace importers
}  // namespace evalbox::harness
