// `evalbox validate PATH...`: checks fixtures and suites (and each candidate's adapter settings)
// without running anything; every problem is printed as FILE:LINE:COL: what (hint: how).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/agent/adapter.h"
#include "harness/agent/host_client.h"
#include "harness/cli/commands.h"
#include "harness/cli/registry.h"
#include "harness/cli/session.h"
#include "harness/config/parse.h"
#include "harness/fixture/harbor_images.h"
#include "harness/fixture/load.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"
#include "sandbox/base/units.h"
#include "sandbox/preparer/preparer.h"

namespace evalbox::cli {

namespace {

namespace fs = std::filesystem;
using harness::config_error;

enum class kind { fixture, fixture_file, suite };

// A directory or a file named fixture.yaml is a fixture; other files say what they are in
// `schema:`, and a file without one is taken for a suite (its errors then say so).
kind classify(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec) || p.filename() == "fixture.yaml" || p.filename() == "task.toml")
    return kind::fixture;
  auto text = read_file(p, 1u << 20);
  // A fixture.yaml under another name (e.g. a test input) is checked as a file alone.
  if (text && harness::peek_schema(*text).starts_with("evalbox.fixture")) return kind::fixture_file;
  return kind::suite;
}

// Imports (or, when the store has it, checks) each image the fixtures name, once; a failure
// is a config error at the `image:` line. Returns one line per image saying what runs will use.
struct image_check {
  std::vector<std::string> lines;                          // what runs will use
  std::map<std::string, sandbox::image_summary> resolved;  // by image_ref
};

image_check check_images(sandbox::preparer& prep,
                         const std::vector<const harness::fixture_spec*>& fixtures,
                         std::vector<config_error>& errors, json& out) {
  image_check result;
  auto& lines = result.lines;
  std::map<std::string, bool> seen;
  for (const auto* f : fixtures) {
    if (!f->environment || f->environment->image_ref.empty()) continue;
    const auto& env = *f->environment;
    if (!seen.emplace(env.image_ref, true).second) continue;
    auto img = prep.resolve_image(env.image_ref, f->dir);
    if (!img) {
      errors.push_back({env.image_where,
                        fmt::format("environment.image {}: {}", env.image, img.error().message),
                        "`evalbox image import REF` shows the import step by step"});
      continue;
    }
    std::string path;
    for (const auto& kv : img->env)
      if (kv.starts_with("PATH=")) path = kv.substr(5);
    const std::string workdir = img->working_dir.empty() ? "none" : img->working_dir;
    lines.push_back(fmt::format(
        "  image {}: {} ({} layer(s), {}{}; WorkingDir {}, PATH {})", img->reference,
        img->id.substr(0, 19), img->layers.size(), format_bytes(img->bytes),
        img->layers_unpacked ? ", imported now" : "", workdir, path.empty() ? "unset" : path));
    out.push_back({{"reference", img->reference},
                   {"id", img->id},
                   {"manifest_digest", img->manifest_digest},
                   {"layers", img->layers},
                   {"bytes", img->bytes},
                   {"env", img->env},
                   {"working_dir", img->working_dir}});
    result.resolved.emplace(env.image_ref, std::move(*img));
  }
  return result;
}

// Each candidate's client in each fixture's image: planned as a run would be, then checked to
// start there (harness/agent/host_client.h). A client that cannot is reported at the
// candidate, with the fixture and why; a plan that fails for other reasons (a client not
// installed) is left to the run, which says so.
void check_clients(sandbox::preparer& prep, const harness::suite_spec& suite,
                   const image_check& images, std::vector<config_error>& errors) {
  auto registry = make_registry();
  for (const auto& f : suite.fixtures) {
    if (!f.environment) continue;
    auto img = images.resolved.find(f.environment->image_ref);
    if (img == images.resolved.end()) continue;
    harness::image_view view;
    view.reference = img->second.reference;
    for (const auto& kv : img->second.env)
      if (kv.starts_with("PATH=")) {
        std::string_view rest = std::string_view(kv).substr(5);
        while (true) {
          auto colon = rest.find(':');
          view.path_dirs.emplace_back(rest.substr(0, colon));
          if (colon == std::string_view::npos) break;
          rest.remove_prefix(colon + 1);
        }
      }
    const std::string id = img->second.id;
    view.has_file = [&prep, id](const fs::path& p) { return prep.image_has_file(id, p); };
    for (const auto& c : suite.candidates) {
      const auto* a = registry.find(c.adapter);
      if (!a) continue;
      auto plan = a->plan({f, c, 0, "validate", suite.credentials});
      if (!plan) continue;
      if (auto ok = harness::adapt_to_image(*plan, view); !ok)
        errors.push_back({c.where,
                          fmt::format("candidate {} cannot run in fixture {}'s image: {}", c.id,
                                      f.id, ok.error().message),
                          "give the fixture an image with what the client needs, or leave the "
                          "candidate out of it"});
    }
  }
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
      "problem as FILE:LINE:COL; exits 64 when any input is invalid. An image a fixture names "
      "(environment: {image: ...}) is imported into the store, or checked when it is there, "
      "and what runs will use is printed.");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  auto image_args = std::make_shared<std::vector<std::string>>();
  cmd->add_option("paths", *paths,
                  "fixture directories (fixture.yaml, or a Harbor task's task.toml) and suite "
                  "files")
      ->required();
  cmd->add_flag("--json", *as_json, "print evalbox.validate.v1 JSON on stdout");
  cmd->add_option("--image", *image_args,
                  "REF=SOURCE: the image for a Harbor task's docker_image REF (repeatable; over "
                  "a suite's images:), e.g. org/task:1.0=docker-archive:task.tar "
                  "(docs/harbor.md)");
  cmd->callback([&out, paths, as_json, image_args] {
    out = [paths, as_json, image_args] {
      auto registry = make_registry();
      // Made on first need: only inputs that name an image use the store.
      std::optional<sandbox::preparer> preparer;
      auto prep = [&]() -> sandbox::preparer& {
        if (!preparer) preparer.emplace(sandbox::default_preparer_options());
        return *preparer;
      };
      json report{{"schema", "evalbox.validate.v1"}, {"inputs", json::array()}};
      size_t bad = 0;
      for (const auto& arg : *paths) {
        fs::path p(arg);
        std::vector<config_error> errors;
        json entry{{"path", arg}};
        std::string summary;
        std::vector<std::string> image_lines;
        json images = json::array();
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
          if (f && f->harbor) {
            // A Harbor task's image is named as a registry reference or a Dockerfile: resolved
            // (the --image options, a podman store, a build) before it can be checked.
            harness::suite_spec alone;
            alone.fixtures.push_back(std::move(*f));
            auto more = harness::resolve_suite_images(
                alone, *image_args, sandbox::default_preparer_options().state_root, say_progress);
            if (!more)
              errors.push_back({{arg, 0, 0}, more.error().message, ""});
            else
              errors.insert(errors.end(), more->begin(), more->end());
            f = std::move(alone.fixtures.front());
          }
          if (f) {
            image_lines = check_images(prep(), {&*f}, errors, images).lines;
            entry["id"] = f->id;
            entry["digest"] = f->digest;
            summary = fmt::format("fixture {}: {} check{}, digest {}", f->id, f->checks.size(),
                                  f->checks.size() == 1 ? "" : "s", f->digest.substr(0, 12));
            if (f->harbor)
              summary = fmt::format(
                  "Harbor task {}: verifier tests/test.sh, passes at reward >= {}, network {}, "
                  "digest {}",
                  f->id, f->threshold, f->harbor->internet ? "host (internet allowed)" : "none",
                  f->digest.substr(0, 12));
          } else if (errors.empty()) {
            errors.push_back({{arg, 0, 0}, f.error().message, ""});
          }
        } else {
          entry["kind"] = "suite";
          auto s = harness::load_suite(p, registry.ids(), &errors);
          if (s) {
            auto more = validate_candidates(*s);
            errors.insert(errors.end(), more.begin(), more.end());
            auto unresolved = harness::resolve_suite_images(
                *s, *image_args, sandbox::default_preparer_options().state_root, say_progress);
            if (!unresolved)
              errors.push_back({{arg, 0, 0}, unresolved.error().message, ""});
            else
              errors.insert(errors.end(), unresolved->begin(), unresolved->end());
            std::vector<const harness::fixture_spec*> fixtures;
            for (const auto& fx : s->fixtures) fixtures.push_back(&fx);
            auto checked = check_images(prep(), fixtures, errors, images);
            check_clients(prep(), *s, checked, errors);
            image_lines = std::move(checked.lines);
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
        entry["images"] = images;
        entry["errors"] = json::array();
        for (const auto& e : errors) entry["errors"].push_back(error_json(e));
        report["inputs"].push_back(entry);
        if (!errors.empty()) ++bad;
        if (*as_json) continue;
        if (errors.empty()) {
          fmt::print("ok   {} ({})\n", summary, arg);
          for (const auto& l : image_lines) fmt::print("{}\n", l);
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
