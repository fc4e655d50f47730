// Validating fixtures and suites without running them (see validate.h).
#include "harness/validate/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/fs.h"
#include "base/json.h"
#include "base/units.h"
#include "harness/agent/host_client.h"
#include "harness/agent/settings.h"
#include "harness/config/parse.h"
#include "harness/fixture/load.h"
#include "harness/gateway/login.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness {
inline namespace validate {

namespace fs = std::filesystem;

namespace {

enum class input_kind { fixture, fixture_file, suite };

// A directory or a file named fixture.yaml (or task.toml) is a fixture; other files say what
// they are in `schema:`, and a file without one is taken for a suite (its errors then say so).
input_kind classify(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec) || p.filename() == "fixture.yaml" || p.filename() == "task.toml")
    return input_kind::fixture;
  auto text = read_file(p, 1u << 20);
  // A fixture.yaml under another name (e.g. a test input) is checked as a file alone.
  if (text && peek_schema(*text).starts_with("evalbox.fixture")) return input_kind::fixture_file;
  return input_kind::suite;
}

std::string image_path(const std::vector<std::string>& env) {
  for (const auto& kv : env)
    if (kv.starts_with("PATH=")) return kv.substr(5);
  return "";
}

// One input's validation: each kind of input is a pass over the same state.
class input_check {
 public:
  input_check(const std::string& path, const validate_options& options) : options_(options) {
    in_.path = path;
  }

  validated_input run() {
    switch (classify(in_.path)) {
      case input_kind::fixture_file:
        fixture_file();
        break;
      case input_kind::fixture:
        fixture();
        break;
      case input_kind::suite:
        suite();
        break;
    }
    return std::move(in_);
  }

 private:
  void problem(std::string message) {
    in_.errors.push_back({{in_.path, 0, 0}, std::move(message), ""});
  }

  // A fixture.yaml alone: its fields and checks, not its directory.
  void fixture_file() {
    in_.what = validated_input::kind::fixture;
    auto text = read_file(in_.path, 1u << 20);
    if (!text) return problem(text.error().message);
    auto f = parse_fixture_yaml(*text, in_.path, in_.errors);
    in_.id = f.id;
    in_.summary =
        fmt::format("fixture file {}: {} checks (directory not checked)", f.id, f.checks.size());
  }

  void fixture() {
    in_.what = validated_input::kind::fixture;
    auto f = load_fixture(in_.path, &in_.errors);
    if (!f) {
      if (in_.errors.empty()) problem(f.error().message);
      return;
    }
    if (f->harbor) {
      // A Harbor task's image is named as a registry reference or a Dockerfile: resolved (the
      // --image options, a podman store, a build) before it can be checked.
      suite_spec alone;
      alone.fixtures.push_back(std::move(*f));
      images_of(alone);
      f = std::move(alone.fixtures.front());
    }
    check_images({&*f});
    in_.id = f->id;
    in_.digest = f->digest;
    in_.summary = fmt::format("fixture {}: {} check{}, digest {}", f->id, f->checks.size(),
                              f->checks.size() == 1 ? "" : "s", f->digest.substr(0, 12));
    if (f->harbor)
      in_.summary = fmt::format(
          "Harbor task {}: verifier tests/test.sh, passes at reward >= {}, network {}, {}digest "
          "{}",
          f->id, f->threshold, f->harbor->internet ? "host (internet allowed)" : "none",
          f->harbor->skills_dir.empty()
              ? std::string()
              : fmt::format("skills from {} in its image (for clients that take skills), ",
                            f->harbor->skills_dir),
          f->digest.substr(0, 12));
  }

  void suite() {
    in_.what = validated_input::kind::suite;
    auto s = load_suite(in_.path, options_.adapters->ids(), &in_.errors);
    if (!s) {
      if (in_.errors.empty()) problem(s.error().message);
      return;
    }
    auto more = validate_candidates(*s, *options_.adapters);
    in_.errors.insert(in_.errors.end(), more.begin(), more.end());
    images_of(*s);
    std::vector<const fixture_spec*> fixtures;
    for (const auto& fx : s->fixtures) fixtures.push_back(&fx);
    check_images(fixtures);
    check_clients(*s);
    check_gateways(*s);
    in_.name = s->name;
    in_.summary =
        fmt::format("suite {}: {} fixtures × {} candidates × {} trial{} = {} runs", s->name,
                    s->fixtures.size(), s->candidates.size(), s->trials, s->trials == 1 ? "" : "s",
                    s->fixtures.size() * s->candidates.size() * s->trials);
  }

  // Each gateway candidate: its key or login can be read on the host (never printed), and
  // what its runs will do is said (docs/agents.md, "The model gateway", "Logins").
  void check_gateways(const suite_spec& s) {
    for (const auto& c : s.candidates) {
      if (!c.gateway) continue;
      std::string note =
          fmt::format("candidate {}: model gateway to {}", c.id, c.gateway->upstream);
      auto key = gateway_key(c, s.credentials);
      if (!key) {
        in_.errors.push_back({c.gateway->where, key.error().message,
                              "give the gateway its key: gateway.key_env, one credential "
                              "holding the key or a login file, or api_key_env"});
      } else if (key->login_file) {
        if (auto kind = gateway::login_kind_of(key->value))
          note += fmt::format(
              ", authenticated by the {} login in credential '{}' (its token is sent and "
              "refreshed on the host; the file never enters the sandbox)",
              gateway::to_string(*kind), key->handle);
        else
          in_.errors.push_back(
              {c.gateway->where,
               fmt::format("candidate {}: credential '{}' ({}) is neither an API key on one line "
                           "nor a login the gateway can use",
                           c.id, key->handle, key->source.string()),
               "the gateway serves API keys, Claude's OAuth credentials (.credentials.json) and "
               "Codex's ChatGPT login (auth.json); docs/agents.md, \"Logins\""});
      } else if (!c.gateway->token_url.empty()) {
        in_.errors.push_back({c.gateway->where,
                              fmt::format("candidate {}: gateway.token_url is for a login "
                                          "credential, and this candidate's is an API key",
                                          c.id),
                              "remove token_url"});
      }
      if (key && !key->handle.empty())
        if (auto it = s.shared_credentials.find(key->handle);
            it != s.shared_credentials.end() && it->second.requests_per_minute > 0)
          note += fmt::format(
              ", at most {} request{} a minute with credential '{}' (every run "
              "together)",
              it->second.requests_per_minute, it->second.requests_per_minute == 1 ? "" : "s",
              key->handle);
      if (c.budget && !c.budget->empty())
        note += fmt::format(", budget per run {}", c.budget->to_json().dump());
      in_.notes.push_back(note);
    }
    if (s.suite_budget)
      in_.notes.push_back(
          fmt::format("suite budget {}: evalbox run stops starting runs once the "
                      "results directory's runs have spent it",
                      s.suite_budget->to_json().dump()));
  }

  // The Harbor tasks' images of `s`, resolved (a problem for each that cannot be had).
  void images_of(suite_spec& s) {
    auto unresolved =
        resolve_suite_images(s, options_.images, options_.state_root, options_.say, options_.pins);
    if (!unresolved) return problem(unresolved.error().message);
    in_.errors.insert(in_.errors.end(), unresolved->begin(), unresolved->end());
  }

  // Imports (or, when the store has it, checks) each image the fixtures name, once; a failure
  // is a config error at the `image:` line.
  void check_images(const std::vector<const fixture_spec*>& fixtures) {
    std::set<std::string> seen;
    for (const auto* f : fixtures) {
      if (!f->environment || f->environment->image_ref.empty()) continue;
      const auto& env = *f->environment;
      if (!seen.insert(env.image_ref).second) continue;
      auto img = options_.preparer().resolve_image(env.image_ref, f->dir, nullptr, options_.say,
                                                   options_.pull);
      // --pull never: a registry image the store lacks was checked to resolve (pinned), not
      // pulled; there is nothing more to look at before a run pulls it.
      if (!img && img.error().kind == error_kind::not_found &&
          options_.pull == sandbox::image::pull_policy::never &&
          env.image_ref.starts_with("docker://"))
        continue;
      if (!img) {
        in_.errors.push_back(
            {env.image_where,
             fmt::format("environment.image {}: {}", env.image, img.error().message),
             "`evalbox image import REF` shows the import step by step"});
        continue;
      }
      in_.images.push_back({img->reference, img->id, img->manifest_digest, img->layers, img->bytes,
                            img->env, img->working_dir, img->layers_unpacked > 0});
      resolved_.emplace(env.image_ref, std::move(*img));
    }
  }

  // Each candidate's client in each fixture's image: planned as a run would be, then checked
  // to start there (host_client.h). A client that cannot is reported at the candidate, with
  // the fixture and why; a plan that fails for other reasons (a client not installed) is left
  // to the run, which says so.
  void check_clients(const suite_spec& s) {
    for (const auto& f : s.fixtures) {
      if (!f.environment) continue;
      auto img = resolved_.find(f.environment->image_ref);
      if (img == resolved_.end()) continue;
      const image_view view = view_of(img->second);
      for (const auto& c : s.candidates) {
        const auto* a = options_.adapters->find(c.adapter);
        if (!a) continue;
        auto plan = a->plan({f, c, 0, "validate", s.credentials});
        if (!plan) continue;
        if (auto ok = adapt_to_image(*plan, view); !ok)
          in_.errors.push_back({c.where,
                                fmt::format("candidate {} cannot run in fixture {}'s image: {}",
                                            c.id, f.id, ok.error().message),
                                "give the fixture an image with what the client needs, or leave "
                                "the candidate out of it"});
      }
    }
  }

  image_view view_of(const sandbox::image_summary& image) {
    image_view view;
    view.reference = image.reference;
    for (const auto& kv : image.env) {
      if (!kv.starts_with("PATH=")) continue;
      std::string_view rest = std::string_view(kv).substr(5);
      while (true) {
        auto colon = rest.find(':');
        view.path_dirs.emplace_back(rest.substr(0, colon));
        if (colon == std::string_view::npos) break;
        rest.remove_prefix(colon + 1);
      }
    }
    view.has_file = [prep = &options_.preparer(), id = image.id](const fs::path& p) {
      return prep->image_has_file(id, p);
    };
    return view;
  }

  const validate_options& options_;
  validated_input in_;
  std::map<std::string, sandbox::image_summary> resolved_;  // by image_ref
};

json error_json(const config_error& e) {
  return json{{"file", e.where.file},
              {"line", e.where.line},
              {"column", e.where.column},
              {"message", e.what},
              {"hint", e.hint}};
}

}  // namespace

bool validate_report::valid() const noexcept {
  return std::all_of(inputs.begin(), inputs.end(),
                     [](const validated_input& i) { return i.valid(); });
}

validate_report validate_inputs(const std::vector<std::string>& paths,
                                const validate_options& options) {
  validate_report report;
  for (const auto& p : paths) report.inputs.push_back(input_check(p, options).run());
  return report;
}

std::vector<config_error> validate_candidates(const suite_spec& suite,
                                              const adapter_registry& adapters) {
  std::vector<config_error> errors;
  for (const auto& c : suite.candidates) {
    const auto* a = adapters.find(c.adapter);
    if (!a) continue;
    auto e = a->validate(c);
    errors.insert(errors.end(), e.begin(), e.end());
  }
  return errors;
}

json to_json(const validate_report& report) {
  json inputs = json::array();
  for (const auto& in : report.inputs) {
    json entry{{"path", in.path},
               {"kind", in.what == validated_input::kind::suite ? "suite" : "fixture"}};
    if (in.what == validated_input::kind::suite) {
      if (!in.name.empty()) entry["name"] = in.name;
    } else if (!in.digest.empty()) {
      entry["id"] = in.id;
      entry["digest"] = in.digest;
    }
    entry["valid"] = in.valid();
    json images = json::array();
    for (const auto& i : in.images)
      images.push_back({{"reference", i.reference},
                        {"id", i.id},
                        {"manifest_digest", i.manifest_digest},
                        {"layers", i.layers},
                        {"bytes", i.bytes},
                        {"env", i.env},
                        {"working_dir", i.working_dir}});
    entry["images"] = std::move(images);
    entry["notes"] = in.notes;
    entry["errors"] = json::array();
    for (const auto& e : in.errors) entry["errors"].push_back(error_json(e));
    inputs.push_back(std::move(entry));
  }
  return json{{"schema", "evalbox.validate.v1"}, {"inputs", inputs}, {"valid", report.valid()}};
}

std::string describe(const validated_image& i) {
  const std::string path = image_path(i.env);
  return fmt::format("  image {}: {} ({} layer(s), {}{}; WorkingDir {}, PATH {})", i.reference,
                     i.id.substr(0, 19), i.layers.size(), format_bytes(i.bytes),
                     i.imported_now ? ", imported now" : "",
                     i.working_dir.empty() ? "none" : i.working_dir, path.empty() ? "unset" : path);
}

}  // namespace validate
}  // namespace evalbox::harness
