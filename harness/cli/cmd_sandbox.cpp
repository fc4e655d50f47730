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

#include "harness/cli/commands.h"
#include "harness/cli/interactive.h"
#include "harness/runner/sandbox_exec.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {
namespace {
using namespace evalbox::sandbox;
using harness::exec_options;

// The options as typed: --no-landlock is the negation of exec_options::landlock.
struct exec_args : exec_options {
  bool no_landlock = false;
};

std::atomic<bool>* g_stop_import = nullptr;
extern "C" void on_import_interrupt(int) {
  if (g_stop_import) g_stop_import->store(true);
}

// While an image is imported (`stop` not null), SIGINT sets `stop`; afterwards (null) SIGINT is
// what it was before.
void sigint_stops(std::atomic<bool>* stop) {
  static struct sigaction old {};
  if (stop) {
    g_stop_import = stop;
    struct sigaction on_int {};
    on_int.sa_handler = on_import_interrupt;
    sigemptyset(&on_int.sa_mask);
    ::sigaction(SIGINT, &on_int, &old);
  } else {
    ::sigaction(SIGINT, &old, nullptr);
    g_stop_import = nullptr;
  }
}

cancel_token* g_cancel = nullptr;
extern "C" void on_terminate(int) {
  if (g_cancel) g_cancel->requested.store(true);
}

// The launch of `sandbox exec`: SIGINT from the terminal reaches the program itself (same
// foreground group); SIGTERM and SIGHUP stop the run through the helper so that teardown still
// happens.
result<run_record> launch_passing_stdio(const prepared_session& session, launch_options lo) {
  cancel_token cancel;
  g_cancel = &cancel;
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
  auto rec = launch_in(session, lo, &cancel);
  ::sigaction(SIGINT, &old_int, nullptr);
  g_cancel = nullptr;
  return rec;
}

// `interactive`: the shell (interactive.h: a pseudo-terminal when stdin is a terminal).
int run_exec(const exec_args& args, bool interactive = false) {
  exec_options a = args;
  a.landlock = !args.no_landlock;
  a.interactive = interactive;
  std::atomic<bool> stop{false};
  harness::exec_hooks hooks;
  hooks.say = [](const std::string& line) { fmt::print(stderr, "evalbox sandbox: {}\n", line); };
  // The first use of an image unpacks it: Ctrl-C stops that and keeps no partial layer.
  hooks.stop_import = &stop;
  hooks.importing = [&stop](bool importing) { sigint_stops(importing ? &stop : nullptr); };
  if (interactive)
    hooks.launch = [](const prepared_session& session, launch_options lo) {
      cancel_token cancel;
      return launch_interactive(session, lo, cancel);
    };
  else
    hooks.launch = launch_passing_stdio;
  return harness::exec_in_sandbox(a, hooks).exit_code;
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

}  // namespace evalbox::harness::cli
