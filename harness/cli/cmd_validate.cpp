// `evalbox validate PATH...`: checks fixtures and suites (and each candidate's adapter settings)
// without running anything; every problem is printed as FILE:LINE:COL: what (hint: how).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "harness/agent/adapter.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/session.h"
#include "harness/config/parse.h"
#include "harness/fixture/load.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"

namespace evalbox::cli {

namespace {

namespace fs = std::filesystem;
using harness::config_error;

enum class kind { fixture, fixture_file, suite };

// A directory or a file named fixture.yaml is a fixture; other files say what they are in
// `schema:`, and a file without one is taken for a suite (its errors then say so).
kind classify(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec) || p.filename() == "fixture.yaml") return kind::fixture;
  auto text = read_file(p, 1u << 20);
  // A fixture.yaml under another name (e.g. a test input) is checked as a file alone.
  if (text && harness::peek_schema(*text).starts_with("evalbox.fixture")) return kind::fixture_file;
  return kind::suite;
}

json error_json(const config_error& e) {
  return json{{"file", e.where.file},
              {"line", e.where.line},
              {"column", e.where.column},
              {"message", e.what},
              {"hint", e.hint}};
}

}  // namespace

void register_validate(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "validate",
      "Check fixtures (directories) and suites (files) without running anything. Prints every "
      "problem as FILE:LINE:COL; exits 64 when any input is invalid.");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("paths", *paths, "fixture directories and suite files")->required();
  cmd->add_flag("--json", *as_json, "print evalbox.validate.v1 JSON on stdout");
  cmd->callback([&out, paths, as_json] {
    out = [paths, as_json] {
      auto registry = make_registry();
      json report{{"schema", "evalbox.validate.v1"}, {"inputs", json::array()}};
      size_t bad = 0;
      for (const auto& arg : *paths) {
        fs::path p(arg);
        std::vector<config_error> errors;
        json entry{{"path", arg}};
        std::string summary;
        kind k = classify(p);
        if (k == kind::fixture_file) {
          entry["kind"] = "fixture";
          auto text = read_file(p, 1u << 20);
          if (!text) {
            errors.push_back({{arg, 0, 0}, text.error().message, ""});
          } else {
            auto f = harness::parse_fixture_yaml(*text, arg, errors);
            summary = fmt::format("fixture file {}: {} checks (directory not checked)", f.id,
                                  f.checks.size());
          }
        } else if (k == kind::fixture) {
          entry["kind"] = "fixture";
          auto f = harness::load_fixture(p, &errors);
          if (f) {
            entry["id"] = f->id;
            entry["digest"] = f->digest;
            summary = fmt::format("fixture {}: {} check{}, digest {}", f->id, f->checks.size(),
                                  f->checks.size() == 1 ? "" : "s", f->digest.substr(0, 12));
          } else if (errors.empty()) {
            errors.push_back({{arg, 0, 0}, f.error().message, ""});
          }
        } else {
          entry["kind"] = "suite";
          auto s = harness::load_suite(p, registry.ids(), &errors);
          if (s) {
            auto more = validate_candidates(*s);
            errors.insert(errors.end(), more.begin(), more.end());
            entry["name"] = s->name;
            summary = fmt::format("suite {}: {} fixtures × {} candidates × {} trial{} = {} runs",
                                  s->name, s->fixtures.size(), s->candidates.size(), s->trials,
                                  s->trials == 1 ? "" : "s",
                                  s->fixtures.size() * s->candidates.size() * s->trials);
          } else if (errors.empty()) {
            errors.push_back({{arg, 0, 0}, s.error().message, ""});
          }
        }
        entry["valid"] = errors.empty();
        entry["errors"] = json::array();
        for (const auto& e : errors) entry["errors"].push_back(error_json(e));
        report["inputs"].push_back(entry);
        if (!errors.empty()) ++bad;
        if (*as_json) continue;
        if (errors.empty()) {
          fmt::print("ok   {} ({})\n", summary, arg);
        } else {
          fmt::print("FAIL {} ({} problem{})\n", arg, errors.size(), errors.size() == 1 ? "" : "s");
          for (const auto& e : errors) fmt::print(stderr, "{}\n", e.message());
        }
      }
      report["valid"] = bad == 0;
      if (*as_json) fmt::print("{}", pretty_json(report));
      return bad == 0 ? exit_ok : exit_usage;
    };
  });
}

}  // namespace evalbox::cli
