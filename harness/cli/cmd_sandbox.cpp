// `evalbox sandbox exec|shell`: run a command (or an interactive shell) in a throwaway sandbox
// over a host directory, like bwrap but with evalbox's own boundary: the workspace is a
// copy-on-write view (the host directory is never modified), the home is empty, the network
// is off unless allowed, and the limits are those given. With --image the root is an image's
// (imported into the store first if needed), writable and thrown away with the sandbox.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>

#include "harness/cli/commands.h"
#include "harness/cli/interactive.h"
#include "harness/runner/request.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/json.h"
#include "sandbox/base/units.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/preparer/preparer.h"

namespace evalbox::cli {
namespace {
namespace fs = std::filesystem;
using namespace evalbox::sandbox;

// Exit codes of `sandbox exec`, after timeout(1) and env(1).
constexpr int exit_timed_out = 124;
constexpr int exit_sandbox_error = 125;
constexpr int exit_not_found = 127;

struct exec_args {
  std::string workspace;
  std::string image;
  std::string network = "none";
  std::string memory = "2GiB";
  std::string wall = "10m";
  std::string cpu = "10m";
  std::string disk = "1GiB";
  uint64_t pids = 512;
  bool no_landlock = false;
  std::string state_dir;
  std::string record;
  std::vector<std::string> command;
};

cancel_token* g_cancel = nullptr;
extern "C" void on_terminate(int) {
  if (g_cancel) g_cancel->requested.store(true);
}

// A name with a '/' is a host file (made absolute); a bare name is looked up on the sandbox's
// own PATH when it starts (the image's, or the host's system directories) — never on the PATH of
// the shell that runs evalbox.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return fs::absolute(name).lexically_normal().string();
  return name;
}

result<network_policy> parse_network(const std::string& text) {
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

result<session_request> make_request(const exec_args& a, const image_summary* image) {
  if (a.command.empty()) return make_error(error_kind::invalid_argument, "no command given");
  harness::exec_request_inputs in;
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
  in.network = EB_TRY(parse_network(a.network));
  in.landlock = !a.no_landlock;
  return harness::make_exec_request(in);
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

// `interactive`: the shell (interactive.h: a pseudo-terminal when stdin is a terminal).
int run_exec(const exec_args& a, bool interactive = false) {
  if (a.workspace.empty() && a.image.empty()) {
    fmt::print(stderr,
               "evalbox sandbox: give --workspace DIR (a host directory seen at /workspace), "
               "--image REF (an image as the root), or both\n");
    return exit_usage;
  }
  auto opts = default_preparer_options();
  if (!a.state_dir.empty()) opts.state_root = fs::absolute(a.state_dir);
  preparer prep(opts);
  std::optional<image_summary> image;
  if (!a.image.empty()) {
    // The first use unpacks the image: said layer by layer; Ctrl-C stops it and keeps no
    // partial layer.
    std::atomic<bool> stop{false};
    static std::atomic<bool>* g_stop = nullptr;
    g_stop = &stop;
    struct sigaction on_int {
    }, old{};
    on_int.sa_handler = [](int) {
      if (g_stop) g_stop->store(true);
    };
    sigemptyset(&on_int.sa_mask);
    ::sigaction(SIGINT, &on_int, &old);
    auto img = prep.resolve_image(a.image, fs::current_path(), &stop, [](const std::string& l) {
      fmt::print(stderr, "evalbox sandbox: {}\n", l);
    });
    ::sigaction(SIGINT, &old, nullptr);
    g_stop = nullptr;
    if (!img && img.error().kind == error_kind::cancelled) {
      fmt::print(stderr, "evalbox sandbox: interrupted; no partial layer was kept\n");
      return exit_sigint;
    }
    if (!img) {
      fmt::print(stderr, "evalbox sandbox: --image: {}\n", img.error().message);
      return img.error().kind == error_kind::invalid_argument ||
                     img.error().kind == error_kind::not_found
                 ? exit_usage
                 : exit_sandbox_error;
    }
    if (img->layers_unpacked)
      fmt::print(stderr, "evalbox sandbox: imported {} ({} layer(s))\n", img->reference,
                 img->layers.size());
    image = std::move(*img);
  }
  auto req = make_request(a, image ? &*image : nullptr);
  if (!req) {
    fmt::print(stderr, "evalbox sandbox: {}\n", req.error().message);
    return req.error().kind == error_kind::not_found ? exit_not_found : exit_usage;
  }
  auto session = prep.prepare(*req);
  if (!session) {
    fmt::print(stderr, "evalbox sandbox: prepare: {}\n", session.error().message);
    return session.error().kind == error_kind::invalid_argument ? exit_usage : exit_sandbox_error;
  }
  launch_options lo;
  lo.label = interactive ? "shell" : "exec";
  result<run_record> rec = std::unexpected(error{});
  if (interactive) {
    cancel_token cancel;
    rec = launch_interactive(*session, lo, cancel);
  } else {
    cancel_token cancel;
    g_cancel = &cancel;
    // SIGINT from the terminal reaches the program itself (same foreground group); SIGTERM and
    // SIGHUP stop the run through the helper so that teardown still happens.
    struct sigaction sa {};
    sa.sa_handler = on_terminate;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGHUP, &sa, nullptr);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    struct sigaction old_int {};
    ::sigaction(SIGINT, &ign, &old_int);
    lo.inherit_stdio = true;
    rec = launch(*session, lo, &cancel);
    ::sigaction(SIGINT, &old_int, nullptr);
    g_cancel = nullptr;
  }
  if (auto closed = session->close(); !closed) {
    fmt::print(stderr, "evalbox sandbox: teardown: {}\n", closed.error().message);
  }
  if (!rec) {
    fmt::print(stderr, "evalbox sandbox: {}\n", rec.error().message);
    return exit_sandbox_error;
  }
  if (!a.record.empty()) {
    if (auto w = write_file_atomic(a.record, pretty_json(rec->to_json())); !w) {
      fmt::print(stderr, "evalbox sandbox: --record: {}\n", w.error().message);
    }
  }
  if (!rec->ok()) {
    // A program that is not there is the command's mistake (127, as a shell says), not the
    // sandbox's.
    if (rec->error_step.starts_with("execve") && rec->error.find("ENOENT") != std::string::npos) {
      fmt::print(stderr, "evalbox sandbox: {}: not found in the sandbox ({})\n", a.command[0],
                 rec->error_step);
      return exit_not_found;
    }
    fmt::print(stderr, "evalbox sandbox: sandbox error: {}\n", rec->error);
    return exit_sandbox_error;
  }
  switch (rec->outcome) {
    case outcome_kind::timed_out:
      fmt::print(stderr, "evalbox sandbox: killed: wall-time limit of {} reached\n", a.wall);
      break;
    case outcome_kind::cpu_limit:
      fmt::print(stderr, "evalbox sandbox: killed: CPU-time limit of {} reached\n", a.cpu);
      break;
    case outcome_kind::oom_killed:
      fmt::print(stderr, "evalbox sandbox: killed: memory limit of {} reached\n", a.memory);
      break;
    case outcome_kind::cancelled:
      fmt::print(stderr, "evalbox sandbox: cancelled\n");
      break;
    default:
      break;
  }
  return exit_code_for(*rec);
}

void add_common(CLI::App* cmd, exec_args& a) {
  cmd->add_option("--workspace", a.workspace,
                  "host directory seen at /workspace (copy-on-write: never modified); without "
                  "it, --image's working directory is the workspace")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--image", a.image,
                  "an image as the root (oci:DIR[:TAG], oci-archive:FILE[:TAG], "
                  "docker-archive:FILE[:NAME:TAG], rootfs:DIR), imported into the store first "
                  "if needed; its Env applies; writes to / are thrown away with the sandbox");
  // Defaults are captured from exec_args, so --help and docs/cli.md show the real ones.
  cmd->add_option("--network", a.network,
                  "none (loopback only), allow:HOST:PORT[,HOST:PORT...] (loopback IPs "
                  "relayed, names through a CONNECT proxy), or unsafe-host")
      ->capture_default_str();
  cmd->add_option("--memory", a.memory, "memory limit")->capture_default_str();
  cmd->add_option("--wall", a.wall, "wall-time limit")->capture_default_str();
  cmd->add_option("--cpu", a.cpu, "CPU-time limit")->capture_default_str();
  cmd->add_option("--disk", a.disk, "disk quota of the workspace and /tmp")->capture_default_str();
  cmd->add_option("--pids", a.pids, "process limit")->capture_default_str();
  cmd->add_flag("--no-landlock", a.no_landlock,
                "turn Landlock off (for programs that build their own sandbox with mount)");
  cmd->add_option("--state-dir", a.state_dir,
                  "where run state lives (default: EVALBOX_STATE_DIR or the standard location)");
  cmd->add_option("--record", a.record,
                  "write the run record (evalbox.run-record.v1) here (default: none is kept)");
}

}  // namespace

void register_sandbox(CLI::App& app, action& out) {
  auto* sb = app.add_subcommand("sandbox", "Run a command or a shell in a throwaway sandbox");
  sb->require_subcommand(1);

  auto ea = std::make_shared<exec_args>();
  auto* exec = sb->add_subcommand(
      "exec",
      "Run CMD in a throwaway sandbox over --workspace and exit with its exit code\n"
      "(128+N when killed by signal N, 124 when the wall limit killed it, 125 when the\n"
      "sandbox itself failed; the message is on stderr).\n"
      "\n"
      "Examples:\n"
      "  evalbox sandbox exec --workspace . -- make test\n"
      "  evalbox sandbox exec --workspace . --memory 512MiB --wall 30s -- python3 run.py\n"
      "  evalbox sandbox exec --workspace . --network allow:127.0.0.1:8080 -- curl "
      "127.0.0.1:8080\n"
      "  evalbox sandbox exec --workspace . --record run.json -- sh -c 'echo hi'\n"
      "  evalbox sandbox exec --image oci:images/py313 -- python3 --version\n"
      "\n"
      "A bare CMD is looked up on the sandbox's own PATH (the image's, or the host's system\n"
      "directories), never on yours; a CMD with a '/' is a host file, mounted read-only.");
  add_common(exec, *ea);
  exec->add_option("command", ea->command, "the command and its arguments (after --)")->required();
  exec->callback([&out, ea] { out = [ea] { return run_exec(*ea); }; });

  auto sa = std::make_shared<exec_args>();
  auto* shell = sb->add_subcommand(
      "shell",
      "An interactive shell (bash -i, else sh -i) in a throwaway sandbox over --workspace\n"
      "(or in --image): for looking around a fixture as the agent would see it. When stdin\n"
      "is a terminal the shell gets a pseudo-terminal of its own (tty, job control, vi and\n"
      "less work; the window size follows yours); otherwise stdin and stdout are passed\n"
      "through as they are. Exit the shell to tear the sandbox down; its exit status is\n"
      "evalbox's.\n"
      "\n"
      "Examples:\n"
      "  evalbox sandbox shell --workspace fixtures/examples/off-by-one/workspace\n"
      "  evalbox sandbox shell --image oci-archive:debian.tar   # apt-get install is fine");
  add_common(shell, *sa);
  shell->callback([&out, sa] {
    out = [sa] {
      exec_args a = *sa;
      a.command = interactive_shell_argv();
      return run_exec(a, /*interactive=*/true);
    };
  });
}

}  // namespace evalbox::cli
