// `evalbox sandbox exec|shell` below the command line (sandbox_exec.h).
#include "harness/runner/sandbox_exec.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string_view>

#include "base/fs.h"
#include "base/json.h"
#include "base/units.h"
#include "harness/runner/exit_status.h"
#include "harness/runner/request.h"

namespace evalbox::harness {
inline namespace runner {
namespace {
namespace fs = std::filesystem;
using namespace evalbox::sandbox;

// A name with a '/' is a host file (made absolute); a bare name is looked up on the sandbox's
// own PATH when it starts (the image's, or the host's system directories) — never on the PATH of
// the shell that runs evalbox.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return fs::absolute(name).lexically_normal().string();
  return name;
}

result<session_request> make_request(const exec_options& a, const image_summary* image) {
  if (a.command.empty()) return make_error(error_kind::invalid_argument, "no command given");
  exec_request_inputs in;
  in.session_id =
      fmt::format("sandbox-{}-{}", ::getpid(),
                  std::chrono::steady_clock::now().time_since_epoch().count() % 1000000);
  in.argv = a.command;
  in.argv[0] = resolve_program(a.command[0]);
  in.workspace = a.workspace;
  in.image = image;
  for (const char* k : {"TERM", "LANG", "LC_ALL", "COLORTERM"})
    if (const char* v = std::getenv(k); v && *v) in.passed_env[k] = v;
  in.limits.memory_bytes = EB_TRY_CTX(parse_bytes(a.memory), "--memory");
  in.limits.wall_ms = EB_TRY_CTX(parse_duration_ms(a.wall), "--wall");
  in.limits.cpu_ms = EB_TRY_CTX(parse_duration_ms(a.cpu), "--cpu");
  in.limits.disk_bytes = EB_TRY_CTX(parse_bytes(a.disk), "--disk");
  in.limits.pids = a.pids;
  in.network = EB_TRY(parse_exec_network(a.network));
  in.landlock = a.landlock;
  return make_exec_request(in);
}

// The image as the store resolved it (the first use unpacks it, said layer by layer), or the
// exit status and what was said.
std::expected<image_summary, int> resolve(preparer& prep, const exec_options& a,
                                          const exec_hooks& hooks) {
  if (hooks.importing) hooks.importing(true);
  auto img = prep.resolve_image(a.image, fs::current_path(), hooks.stop_import, hooks.say);
  if (hooks.importing) hooks.importing(false);
  if (!img && img.error().kind == error_kind::cancelled) {
    hooks.say("interrupted; no partial layer was kept");
    return std::unexpected(exit_sigint);
  }
  if (!img) {
    hooks.say(fmt::format("--image: {}", img.error().message));
    return std::unexpected(img.error().kind == error_kind::invalid_argument ||
                                   img.error().kind == error_kind::not_found
                               ? exit_usage
                               : exit_sandbox_error);
  }
  if (img->layers_unpacked)
    hooks.say(fmt::format("imported {} ({} layer(s))", img->reference, img->layers.size()));
  return std::move(*img);
}

}  // namespace

result<network_policy> parse_exec_network(const std::string& text) {
  network_policy n;
  if (text == "none") return n;
  if (text == "unsafe-host") {
    n.mode = network_mode::host;
    n.unsafe_host_network = true;
    return n;
  }
  if (text.starts_with("allow:")) {
    n.mode = network_mode::allow;
    std::string_view rest = std::string_view(text).substr(6);
    while (!rest.empty()) {
      auto comma = rest.find(',');
      n.allow.emplace_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (n.allow.empty())
      return make_error(error_kind::invalid_argument, "--network allow: is empty");
    return n;
  }
  return make_error(error_kind::invalid_argument,
                    "--network {}: expected none, allow:HOST:PORT[,HOST:PORT...] or unsafe-host",
                    text);
}

int exit_code_for(const run_record& rec) {
  switch (rec.outcome) {
    case outcome_kind::exited:
      return rec.exit_code;
    case outcome_kind::signaled:
      return 128 + rec.signal;
    case outcome_kind::timed_out:
      return exit_timed_out;
    case outcome_kind::cpu_limit:
      return 128 + SIGXCPU;
    case outcome_kind::oom_killed:
      return 128 + SIGKILL;
    case outcome_kind::output_limit:
      return 128 + SIGPIPE;
    case outcome_kind::cancelled:
      return exit_sigint;
  }
  return exit_internal;
}

namespace {
bool not_found_in_sandbox(const run_record& rec) {
  return rec.error_step.starts_with("execve") && rec.error.find("ENOENT") != std::string::npos;
}
}  // namespace

int exec_exit_status(const run_record& rec) {
  if (!rec.ok()) return not_found_in_sandbox(rec) ? exit_not_found : exit_sandbox_error;
  return exit_code_for(rec);
}

std::optional<std::string> exec_ending_line(const exec_options& a, const run_record& rec) {
  if (!rec.ok()) {
    if (not_found_in_sandbox(rec))
      return fmt::format("{}: not found in the sandbox ({})",
                         a.command.empty() ? std::string() : a.command[0], rec.error_step);
    return fmt::format("sandbox error: {}", rec.error);
  }
  switch (rec.outcome) {
    case outcome_kind::timed_out:
      return fmt::format("killed: wall-time limit of {} reached", a.wall);
    case outcome_kind::cpu_limit:
      return fmt::format("killed: CPU-time limit of {} reached", a.cpu);
    case outcome_kind::oom_killed:
      return fmt::format("killed: memory limit of {} reached", a.memory);
    case outcome_kind::cancelled:
      return "cancelled";
    default:
      return std::nullopt;
  }
}

exec_outcome exec_in_sandbox(const exec_options& a, const exec_hooks& hooks) {
  if (a.workspace.empty() && a.image.empty()) {
    hooks.say(
        "give --workspace DIR (a host directory seen at /workspace), --image REF (an image as "
        "the root), or both");
    return {exit_usage, std::nullopt};
  }
  auto opts = default_preparer_options();
  if (!a.state_dir.empty()) opts.state_root = fs::absolute(a.state_dir);
  preparer prep(opts);
  std::optional<image_summary> image;
  if (!a.image.empty()) {
    auto img = resolve(prep, a, hooks);
    if (!img) return {img.error(), std::nullopt};
    image = std::move(*img);
  }
  auto req = make_request(a, image ? &*image : nullptr);
  if (!req) {
    hooks.say(req.error().message);
    return {req.error().kind == error_kind::not_found ? exit_not_found : exit_usage, std::nullopt};
  }
  auto session = prep.prepare(*req);
  if (!session) {
    hooks.say(fmt::format("prepare: {}", session.error().message));
    return {session.error().kind == error_kind::invalid_argument ? exit_usage : exit_sandbox_error,
            std::nullopt};
  }
  launch_options lo;
  lo.label = a.interactive ? "shell" : "exec";
  auto rec = hooks.launch(*session, lo);
  if (auto closed = session->close(); !closed)
    hooks.say(fmt::format("teardown: {}", closed.error().message));
  if (!rec) {
    hooks.say(rec.error().message);
    return {exit_sandbox_error, std::nullopt};
  }
  if (!a.record.empty()) {
    if (auto w = write_file_atomic(a.record, pretty_json(rec->to_json())); !w)
      hooks.say(fmt::format("--record: {}", w.error().message));
  }
  if (auto line = exec_ending_line(a, *rec)) hooks.say(*line);
  return {exec_exit_status(*rec), std::move(*rec)};
}

}  // namespace runner
}  // namespace evalbox::harness
