// `evalbox session ...`: sessions, sandboxes that programs drive (docs/sessions.md). `start`
// starts a server process (`session serve`, hidden) that prepares the sandbox and hosts it, and
// returns once it is ready; every other command is a client of the session's protocol
// (harness/session/client.h). The composition of a session's sandbox — a fixture through the
// runner's phases (its setup done, the shell hook in place of the agent), or an image and/or a
// workspace as `sandbox exec` makes them — is here, in the composition root.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "base/base64.h"
#include "base/fs.h"
#include "base/json_get.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/suite_command.h"
#include "harness/cli/terminal.h"
#include "harness/runner/sandbox_exec.h"
#include "harness/runner/session_start.h"
#include "harness/session/client.h"
#include "harness/session/server.h"
#include "harness/session/session.h"
#include "harness/session/store.h"
#include "sandbox/launch/host_program.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {
namespace {
namespace fs = std::filesystem;
using namespace evalbox::harness::sessions;

// The state root every session command uses: --state-dir, else the environment's.
fs::path state_root_of(const std::string& state_dir) {
  if (!state_dir.empty()) return fs::absolute(state_dir);
  return sandbox::default_preparer_options().state_root;
}

int say_error(std::string_view cmd, std::string_view message, int code) {
  fmt::print(stderr, "evalbox session {}: {}\n", cmd, message);
  return code;
}

int exit_of(const client_error& e) {
  switch (error_kind_of(e.kind)) {
    case error_kind::invalid_argument:
      return exit_usage;
    case error_kind::not_found:
    case error_kind::busy:
    case error_kind::permission:
    case error_kind::unsupported:
      return exit_task_failed;
    case error_kind::cancelled:
      return exit_execution_failed;
    default:
      return exit_internal;
  }
}

// A connection to session `id` (or a prefix of one).
std::expected<client, int> open_session(std::string_view cmd, const std::string& state_dir,
                                        const std::string& id) {
  const fs::path root = state_root_of(state_dir);
  auto found = find_session(root, id);
  if (!found) return std::unexpected(say_error(cmd, found.error().message, exit_task_failed));
  if (!found->live)
    return std::unexpected(say_error(
        cmd,
        fmt::format("session {} is not running (its server is gone; `evalbox gc` removes it)",
                    found->id),
        exit_task_failed));
  auto c = client::connect(found->dir / "socket");
  if (!c) return std::unexpected(say_error(cmd, c.error().message, exit_task_failed));
  return std::move(*c);
}

// ---- the server: `evalbox session serve --id ID --spec JSON --ready-fd N` (hidden) ----

std::atomic<bool> g_stop{false};
extern "C" void on_session_stop_signal(int) { g_stop.store(true); }

// What the server says once its first session serves (or why it could not): one line on the
// ready pipe, which `session start` prints. False when nobody reads it any more.
bool tell_starter(int fd, const json& line) {
  if (fd < 0) return true;
  const std::string text = line.dump() + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// Hosts the first session on `prepared` and serves until every session of the server ended.
// The record the launch hook returns: `cancelled`, so that a fixture's run is not graded after.
struct first_session {
  const session_spec& spec;
  std::string id;
  server& srv;
  std::shared_ptr<family> fam;
  claimed_dir dir;
  int ready_fd = -1;
  const std::atomic<bool>* stop = &g_stop;
  // A fixture's session: the runner's grading of a state (runner_options::on_state_grader).
  harness::runner_options::state_grader grader;

  result<sandbox::run_record> operator()(sandbox::prepared_session& prepared,
                                         sandbox::launch_options lo) {
    session_setup setup;
    setup.id = id;
    setup.dir = dir.dir;
    setup.fam = fam;
    lo.label = "session";
    lo.limits_override =
        session_limits(lo.limits_override.value_or(prepared.request().limits), spec);
    setup.options = std::move(lo);
    setup.source = spec.to_json();
    setup.expires = std::chrono::system_clock::now() + spec.ttl;
    setup.owner = spec.owner;
    if (grader) setup.grader = grader;
    auto s = harness::session::start(std::move(setup), prepared, nullptr);
    if (!s) {
      tell_starter(ready_fd, {{"ok", false}, {"error", s.error().message}});
      return std::unexpected(std::move(s.error()));
    }
    if (auto h = srv.host(*s, std::move(dir.lock)); !h) {
      tell_starter(ready_fd, {{"ok", false}, {"error", h.error().message}});
      return std::unexpected(std::move(h.error()));
    }
    const bool heard = tell_starter(ready_fd, {{"ok", true}, {"session", (*s)->info()}});
    ready_fd = -1;
    if (!heard) fmt::print(stderr, "session {}: its starter is gone; stopping\n", id);
    std::atomic<bool> gone{!heard};
    srv.run(heard ? *stop : gone);
    // Connections let go of the session within moments of its end; the prepared session is
    // torn down after this returns.
    for (int i = 0; i < 200 && s->use_count() > 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sandbox::run_record rec;
    rec.outcome = sandbox::outcome_kind::cancelled;
    return rec;
  }
};

int serve_with_fixture(const session_spec& spec, first_session& first) {
  // `status`: what `session start` exits with (64: the suite or candidate is wrong; 2: the
  // fixture's setup failed).
  auto fail = [&](std::string why, int status) {
    if (!why.empty()) {
      fmt::print(stderr, "{}\n", why);
    } else {
      // What was said went to stderr, this server's log, which goes with its directory before
      // `session start` could read it: the reason travels in the answer.
      std::fflush(stderr);
      std::string text = read_file(first.dir.dir / "server.log", 1 << 20).value_or("");
      while (!text.empty() && text.back() == '\n') text.pop_back();
      why = text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
    }
    tell_starter(first.ready_fd, {{"ok", false}, {"error", why}, {"status", status}});
    first.ready_fd = -1;
    return status;
  };
  image_args images;
  images.pull = spec.pull;
  auto suite =
      one_run_suite(spec.fixture, spec.suite, spec.candidate, "session", images, "session serve");
  if (!suite) return fail("", suite.error());
  auto runs = harness::plan_runs(*suite, {});
  if (!runs || runs->size() != 1)
    return fail(runs ? "expected one fixture" : runs.error().message, exit_usage);
  temp_dir scratch("evalbox-session");
  suite_run_options o;
  o.results_dir = scratch.path();
  o.concurrency = 1;
  o.resume = false;
  o.quiet = true;
  o.on_state_grader = [&first](harness::runner_options::state_grader g) {
    first.grader = std::move(g);
  };
  o.shell = [&first](const sandbox::prepared_session& p, sandbox::launch_options lo,
                     sandbox::cancel_token& cancel) {
    first.stop = &cancel.requested;
    return first(const_cast<sandbox::prepared_session&>(p), std::move(lo));
  };
  auto done = run_planned(*suite, *runs, o);
  if (first.ready_fd >= 0) {
    // The runner ended before the session started: its setup failed, say, as run.json says.
    std::string why = done ? "the session could not start" : done.error().message;
    if (auto records = harness::results_dir(scratch.path()).read_records();
        records && !records->empty())
      why = json_value_or(json_member(records->front(), "execution"), "error", why);
    return fail(why, exit_execution_failed);
  }
  return exit_ok;
}

// A line of progress (an image pulled) in the server's log: its stderr.
void say_in_log(const std::string& line) { fmt::print(stderr, "{}\n", line); }

// SIGTERM, SIGINT and SIGHUP stop every session of this server (run() sees g_stop) — also
// when it was started by a thread that blocks them (`evalbox serve`'s).
void stop_on_signals() {
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_session_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

// A server of sessions under `root`, whose forks `prep` prepares; it logs on stderr.
server_options server_options_for(sandbox::preparer& prep, const fs::path& root) {
  server_options so;
  so.state_root = root;
  so.prepare = [&prep](const sandbox::session_request& r) { return prep.prepare(r); };
  so.log = say_in_log;
  return so;
}

struct serve_args {
  std::string id;
  std::string spec;  // session_spec, as JSON
  int ready_fd = -1;
};

int serve(const serve_args& a) {
  // Out of the starter's process group and terminal: the session outlives `session start`,
  // and Ctrl-C in that terminal is not the session's business. The starter reaps the parent.
  if (const pid_t p = ::fork(); p < 0) {
    return say_error("serve", "fork failed", exit_internal);
  } else if (p > 0) {
    ::_exit(0);
  }
  ::setsid();
  auto parsed = parse_json(a.spec, "the session spec");
  auto spec =
      parsed ? session_spec_of(*parsed) : result<session_spec>(std::unexpected(parsed.error()));
  if (!spec) {
    tell_starter(a.ready_fd, {{"ok", false}, {"error", spec.error().message}});
    return exit_usage;
  }
  stop_on_signals();
  sandbox::preparer prep(sandbox::default_preparer_options());  // EVALBOX_STATE_DIR: the starter's
  const fs::path root = prep.options().state_root;
  server srv(server_options_for(prep, root));
  int rc = exit_ok;
  if (spec->fixture.empty()) {
    auto info = start_hosted_session(srv, prep, root, a.id, *spec, &g_stop, say_in_log);
    const bool heard =
        tell_starter(a.ready_fd, info ? json{{"ok", true}, {"session", *info}}
                                      : json{{"ok", false}, {"error", info.error().message}});
    if (!info) return exit_status_of_error(info.error());
    std::atomic<bool> gone{!heard};  // nobody heard it was ready: it ends at once
    srv.run(heard ? g_stop : gone);
  } else {
    auto fam_dir = claim_dir(session_layers_root(root), a.id);
    auto dir = claim_dir(sessions_root(root), a.id);
    if (!fam_dir || !dir) {
      const std::string why = !fam_dir ? fam_dir.error().message : dir.error().message;
      tell_starter(a.ready_fd, {{"ok", false}, {"error", why}});
      return exit_internal;
    }
    auto fam = std::make_shared<family>(fam_dir->dir, std::move(fam_dir->lock));
    first_session first{*spec, a.id, srv, fam, std::move(*dir), a.ready_fd};
    rc = serve_with_fixture(*spec, first);
  }
  if (auto rm = remove_tree(sessions_root(root) / a.id); !rm)
    fmt::print(stderr, "{}\n", rm.error().message);
  return rc;
}

// ---- evalbox session start ----

// Why a session's server did not start, and what `session start` exits with: 2 when the
// server refused (a fixture's setup failed, an image not found), 64 for a suite or candidate
// it found wrong, 70 when evalbox failed.
struct start_failure {
  std::string why;
  int status = exit_internal;
};

// Starts a server of its own for a session of `spec` under `root` (`evalbox session serve`,
// detached: its own process session, its log in the session's directory) and waits for its
// word: the session's session.json, or why not. EVALBOX_STATE_DIR must name `root` (the server
// takes it from the environment; set before any thread starts).
std::expected<json, start_failure> start_server(const fs::path& root, const session_spec& spec) {
  const std::string id = new_session_id();
  const fs::path dir = sessions_root(root) / id;
  if (auto m = make_dirs(dir, 0700); !m) return std::unexpected(start_failure{m.error().message});
  const fs::path log_path = dir / "server.log";
  unique_fd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  int p[2];
  if (!log || ::pipe2(p, O_CLOEXEC) != 0)
    return std::unexpected(start_failure{"cannot open the server's log or pipe"});
  unique_fd ready_r(p[0]), ready_w(p[1]);
  // Above the fds they become in the server, so that no dup2 of the spawn overwrites another.
  ready_w.reset(::fcntl(ready_w.get(), F_DUPFD_CLOEXEC, 10));
  log.reset(::fcntl(log.get(), F_DUPFD_CLOEXEC, 10));
  if (!ready_w || !log) return std::unexpected(start_failure{"cannot duplicate a descriptor"});
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  auto server_proc = sandbox::start_host_process(
      {self,
       {"session", "serve", "--id", id, "--spec", spec.to_json().dump(), "--ready-fd", "3"},
       {{ready_w.get(), 3}, {log.get(), 1}, {log.get(), 2}},
       true});
  if (!server_proc) return std::unexpected(start_failure{server_proc.error().message});
  ready_w.reset();
  int st = 0;
  (void)server_proc->reap(&st, nullptr);  // the server's first process forks and exits at once
  // The server's one line: ready, or why not. Preparing may take a while (an image pulled, a
  // fixture's setup): progress is in its log.
  std::string line;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(ready_r.get(), buf, sizeof buf)) > 0) line.append(buf, static_cast<size_t>(n));
  auto j = parse_json(line, "the server's answer");
  if (!j || !json_value_or(*j, "ok", false)) {
    std::string why = j ? json_value_or(*j, "error", std::string()) : "";
    if (why.empty()) {
      std::string text = read_file(log_path, 1 << 20).value_or("");
      while (!text.empty() && text.back() == '\n') text.pop_back();
      why = text.empty() ? "the session's server exited without saying why"
                         : text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
    }
    (void)remove_tree(dir);
    const int status =
        j ? json_value_or(*j, "status", int(exit_execution_failed)) : int(exit_execution_failed);
    return std::unexpected(
        start_failure{why, status == exit_usage ? exit_usage : int(exit_execution_failed)});
  }
  return json_member(*j, "session");
}

struct start_args {
  std::string fixture, suite, candidate;
  std::string image, workspace;
  std::string network = "none";
  std::string memory = "2GiB";
  std::string cpu;  // none: the TTL bounds it
  std::string disk = "1GiB";
  uint64_t pids = 512;
  bool no_landlock = false;
  std::string ttl = "1h";
  pid_t owner = 0;
  bool detach = false;
  bool json_out = false;
  std::string state_dir;
  std::string pull = "missing";
};

int start(const start_args& a) {
  if (a.detach && a.owner)
    return say_error("start", "--detach and --owner exclude each other", exit_usage);
  if (a.owner && ::kill(a.owner, 0) != 0 && errno == ESRCH)
    return say_error("start", fmt::format("--owner {}: no such process", a.owner), exit_usage);
  auto absolute = [](const std::string& p) { return p.empty() ? p : fs::absolute(p).string(); };
  json request{{"fixture", absolute(a.fixture)},
               {"suite", absolute(a.suite)},
               {"candidate", a.candidate},
               {"image", a.image},
               {"workspace", absolute(a.workspace)},
               {"ttl", a.ttl},
               {"network", a.network},
               {"memory", a.memory},
               {"disk", a.disk},
               {"pids", a.pids},
               {"landlock", !a.no_landlock},
               {"pull", a.pull}};
  if (!a.cpu.empty()) request["cpu"] = a.cpu;
  // The owner: --owner, else the terminal session of the caller (the login shell or the
  // service that started it); none with --detach.
  if (a.owner)
    request["owner"] = a.owner;
  else if (!a.detach)
    request["owner"] = ::getsid(0);
  auto spec = session_spec_of(request);
  if (!spec) return say_error("start", spec.error().message, exit_usage);
  const fs::path root = state_root_of(a.state_dir);
  ::setenv("EVALBOX_STATE_DIR", root.c_str(), 1);
  auto started = start_server(root, *spec);
  if (!started) return say_error("start", started.error().why, started.error().status);
  const json& info = *started;
  const std::string id = json_value_or(info, "id", std::string());
  if (a.json_out) {
    fmt::print("{}\n", info.dump());
  } else {
    fmt::print("{}\n", json_value_or(info, "id", id));
    fmt::print(stderr,
               "evalbox session: {} is ready (until {}); try `evalbox session exec {} -- ls`, "
               "and `evalbox session stop {}` when done\n",
               id, json_value_or(info, "expires", std::string()), id, id);
  }
  return exit_ok;
}

// ---- evalbox session exec ----

struct exec_args {
  std::string id;
  std::vector<std::string> command;
  std::string cwd;
  std::vector<std::string> env;
  std::string timeout;
  bool tty = false;
  bool stdin_pass = false;
  std::string state_dir;
};

std::atomic<bool> g_resized{false};
std::atomic<bool> g_cancel{false};
extern "C" void on_session_winch(int) { g_resized.store(true); }
extern "C" void on_exec_interrupt(int) {
  restore_terminal_now();
  g_cancel.store(true);
}

int exec(const exec_args& a) {
  json req{{"op", "exec"}, {"argv", a.command}};
  if (!a.cwd.empty()) req["cwd"] = a.cwd;
  json env = json::object();
  for (const auto& kv : a.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return say_error("exec", fmt::format("--env {}: expected NAME=VALUE", kv), exit_usage);
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!env.empty()) req["env"] = env;
  if (!a.timeout.empty()) {
    auto ms = parse_duration_ms(a.timeout);
    if (!ms || *ms == 0)
      return say_error("exec",
                       fmt::format("--timeout {}: expected a duration such as 30s", a.timeout),
                       exit_usage);
    req["timeout"] = static_cast<double>(*ms) / 1000.0;
  }
  const bool tty = a.tty && ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  std::optional<raw_terminal> raw;
  if (tty) {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
      req["rows"] = ws.ws_row;
      req["cols"] = ws.ws_col;
    }
    req["tty"] = true;
  }
  const bool pass_input = tty || a.stdin_pass;
  if (pass_input) req["stdin_open"] = true;
  auto c = open_session("exec", a.state_dir, a.id);
  if (!c) return c.error();
  if (tty) {
    auto r = raw_terminal::enter(STDIN_FILENO);
    if (r) raw.emplace(std::move(*r));
  }
  struct sigaction sa {};
  sa.sa_handler = on_session_winch;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGWINCH, &sa, nullptr);
  struct sigaction si {};
  si.sa_handler = on_exec_interrupt;
  sigemptyset(&si.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &si, nullptr);
  bool cancel_sent = false;
  auto reply = c->exec(
      req,
      [](std::string_view stream, std::string_view bytes) {
        FILE* f = stream == "stderr" ? stderr : stdout;
        std::fwrite(bytes.data(), 1, bytes.size(), f);
        std::fflush(f);
      },
      pass_input ? STDIN_FILENO : -1,
      [&] {
        if (g_resized.exchange(false)) {
          winsize ws{};
          if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
            c->send({{"op", "resize"}, {"rows", ws.ws_row}, {"cols", ws.ws_col}});
        }
        if (g_cancel.load() && !cancel_sent) {
          c->send({{"op", "cancel"}});
          cancel_sent = true;
        }
      });
  raw.reset();
  if (!reply) {
    const int code = reply.error().kind == "not_found" ? exit_not_found : exit_sandbox_error;
    return say_error("exec", reply.error().message, code);
  }
  if (json_value_or(*reply, "truncated", false))
    fmt::print(stderr,
               "evalbox session exec: output cut at the exec's limit; the command was killed\n");
  if (json_value_or(*reply, "timed_out", false)) {
    fmt::print(stderr, "evalbox session exec: killed: --timeout {} reached\n", a.timeout);
    return exit_timed_out;
  }
  if (json_value_or(*reply, "cancelled", false)) return exit_sigint;
  if (const json& code = json_member(*reply, "exit_code"); code.is_number_integer())
    return code.get<int>();
  if (const json& sig = json_member(*reply, "signal"); sig.is_number_integer())
    return 128 + sig.get<int>();
  return exit_sandbox_error;
}

// ---- the other commands: one request each ----

struct simple_args {
  std::string id;
  std::string path;
  std::string name;
  std::string mode = "0644";
  bool append = false, parents = false, json_out = false;
  std::string from, to;
  int count = 1;
  std::string state_dir;
  std::vector<std::string> ids;
};

// Sends `req` and prints the reply (`--json`: as it came, without id and ok), or the error.
int call_and_print(std::string_view cmd, const simple_args& a, json req,
                   const std::function<void(const json&)>& human) {
  auto c = open_session(cmd, a.state_dir, a.id);
  if (!c) return c.error();
  auto reply = c->call(std::move(req));
  if (!reply) return say_error(cmd, reply.error().message, exit_of(reply.error()));
  reply->erase("id");
  reply->erase("ok");
  if (a.json_out)
    fmt::print("{}\n", reply->dump());
  else
    human(*reply);
  return exit_ok;
}

int write(const simple_args& a) {
  std::string data;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(STDIN_FILENO, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
  uint32_t mode = 0;
  try {
    mode = static_cast<uint32_t>(std::stoul(a.mode, nullptr, 8));
  } catch (...) {
    return say_error("write",
                     fmt::format("--mode {}: expected octal permission bits such as 0644", a.mode),
                     exit_usage);
  }
  return call_and_print("write", a,
                        {{"op", "write_file"},
                         {"path", a.path},
                         {"data", base64_encode(data)},
                         {"mode", mode},
                         {"append", a.append},
                         {"parents", a.parents}},
                        [](const json&) {});
}

int read(const simple_args& a) {
  auto c = open_session("read", a.state_dir, a.id);
  if (!c) return c.error();
  auto reply = c->call({{"op", "read_file"}, {"path", a.path}});
  if (!reply) return say_error("read", reply.error().message, exit_of(reply.error()));
  auto bytes = base64_decode(json_value_or(*reply, "data", std::string()));
  if (!bytes) return say_error("read", "the session sent bytes that are not base64", exit_internal);
  std::fwrite(bytes->data(), 1, bytes->size(), stdout);
  return exit_ok;
}

int ls(const simple_args& a) {
  if (a.id.empty()) {
    // The sessions themselves.
    const auto all = list_sessions(state_root_of(a.state_dir));
    if (a.json_out) {
      json arr = json::array();
      for (const auto& s : all) {
        json j = s.info.is_object() ? s.info : json::object();
        j["id"] = s.id;
        j["running"] = s.live;
        arr.push_back(std::move(j));
      }
      fmt::print("{}\n", arr.dump());
      return exit_ok;
    }
    if (all.empty()) fmt::print(stderr, "no sessions (start one with `evalbox session start`)\n");
    for (const auto& s : all) {
      const json& src = json_member(s.info, "source");
      std::string from = json_value_or(src, "fixture", std::string());
      if (from.empty()) from = json_value_or(src, "image", std::string());
      if (from.empty()) from = json_value_or(src, "workspace", std::string());
      fmt::print(
          "{}  {:<8} until {}  {}{}\n", s.id, s.live ? "running" : "gone",
          json_value_or(s.info, "expires", std::string("?")), from,
          json_member(s.info, "parent").is_string()
              ? fmt::format("  (fork of {})", json_member(s.info, "parent").get<std::string>())
              : "");
    }
    return exit_ok;
  }
  return call_and_print(
      "ls", a, {{"op", "ls"}, {"path", a.path.empty() ? "." : a.path}}, [](const json& r) {
        for (const auto& e : json_member(r, "entries")) {
          const std::string type = json_value_or(e, "type", std::string());
          fmt::print("{}{:04o} {:>10}  {}{}\n",
                     type == "dir"       ? 'd'
                     : type == "symlink" ? 'l'
                                         : '-',
                     json_value_or(e, "mode", 0u), json_value_or(e, "size", uint64_t{0}),
                     json_value_or(e, "name", std::string()), type == "dir" ? "/" : "");
        }
      });
}

int stop(const simple_args& a) {
  int rc = exit_ok;
  for (const auto& id : a.ids) {
    auto c = open_session("stop", a.state_dir, id);
    if (!c) {
      rc = c.error();
      continue;
    }
    auto reply = c->call({{"op", "stop"}});
    if (!reply && reply.error().kind != "ended")
      rc = say_error("stop", reply.error().message, exit_of(reply.error()));
  }
  return rc;
}

// ---- evalbox session cp ----

struct cp_args {
  std::string from, to;
  std::string state_dir;
};

// "ID:PATH" (a session's path) or a local path: the id, and the path.
std::pair<std::string, std::string> cp_side(const std::string& arg) {
  const size_t colon = arg.find(':');
  if (colon == std::string::npos || colon == 0 || arg.find('/') < colon) return {"", arg};
  return {arg.substr(0, colon), arg.substr(colon + 1)};
}

int cp(const cp_args& a) {
  const auto [from_id, from_path] = cp_side(a.from);
  const auto [to_id, to_path] = cp_side(a.to);
  if (from_id.empty() == to_id.empty())
    return say_error("cp", "one side is ID:PATH (the session's) and the other a local path",
                     exit_usage);
  auto c = open_session("cp", a.state_dir, from_id.empty() ? to_id : from_id);
  if (!c) return c.error();
  copied done;
  auto s = from_id.empty() ? copy_into_session(*c, from_path, to_path, done)
                           : copy_out_of_session(*c, from_path, to_path, done);
  for (const auto& p : done.left_out)
    fmt::print(stderr, "evalbox session cp: {} left out (not a file or a directory)\n", p);
  if (!s) return say_error("cp", s.error().message, exit_status_of_error(s.error()));
  fmt::print(stderr, "evalbox session cp: {} file(s)\n", done.files);
  return exit_ok;
}

// ---- evalbox serve --socket PATH ----

// The sessions `evalbox serve` started in servers of their own (a fixture's), with their
// servers' pids.
class fixture_sessions {
 public:
  void add(const json& info) {
    std::lock_guard g(m_);
    ids_[json_value_or(info, "id", std::string())] = json_value_or(info, "server_pid", 0);
  }
  // The session.json of each that is still running (those gone are forgotten).
  std::vector<json> list(const fs::path& root) {
    std::vector<json> out;
    std::lock_guard g(m_);
    std::erase_if(ids_, [&](const auto& entry) {
      auto s = find_session(root, entry.first);
      if (!s || !s->live || s->id != entry.first) return true;
      out.push_back(s->info);
      return false;
    });
    return out;
  }
  // Asks its server to stop it; false for an id not started here.
  result<bool> stop(const fs::path& root, const std::string& id) {
    {
      std::lock_guard g(m_);
      if (!ids_.contains(id)) return false;
    }
    auto s = EB_TRY(find_session(root, id));
    auto c = EB_TRY(client::connect(s.dir / "socket"));
    if (auto r = c.call({{"op", "stop"}}); !r && r.error().kind != "ended")
      return make_error(error_kind_of(r.error().kind), "stop {}: {}", id, r.error().message);
    return true;
  }
  // At the server's end: every one still running stopped, and its server waited for (10 s at
  // most), so that nothing of them is left when `evalbox serve` exits.
  void stop_all(const fs::path& root) {
    std::map<std::string, pid_t> all;
    {
      std::lock_guard g(m_);
      all = ids_;
    }
    for (const auto& [id, pid] : all)
      if (auto r = stop(root, id); !r) fmt::print(stderr, "evalbox serve: {}\n", r.error().message);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (const auto& [id, pid] : all)
      while (pid > 0 && ::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

 private:
  std::mutex m_;
  std::map<std::string, pid_t> ids_;
};

struct serve_many_args {
  std::string socket;
  std::string state_dir;
  std::string ttl = "1h";
};

int serve_many(const serve_many_args& a) {
  auto ttl = parse_duration_ms(a.ttl);
  if (!ttl || *ttl == 0)
    return say_error("serve", fmt::format("--ttl {}: a duration such as 1h", a.ttl), exit_usage);
  const fs::path root = state_root_of(a.state_dir);
  ::setenv("EVALBOX_STATE_DIR", root.c_str(), 1);
  stop_on_signals();
  sandbox::preparer prep(sandbox::default_preparer_options());
  server_options so = server_options_for(prep, root);
  const std::string default_ttl = fmt::format("{}s", *ttl / 1000.0);
  // A fixture's session runs the fixture's setup through the runner: in a server of its own,
  // as `session start --fixture` does; this one lists and stops it.
  auto others = std::make_shared<fixture_sessions>();
  so.start = [&prep, root, default_ttl, others](server& srv, const json& r) -> result<json> {
    json request = r;
    if (!request.contains("ttl")) request["ttl"] = default_ttl;
    for (const char* path : {"fixture", "suite", "workspace"})
      if (const json& v = json_member(request, path);
          v.is_string() && !v.get<std::string>().empty())
        request[path] = fs::absolute(v.get<std::string>()).string();
    const auto spec = EB_TRY(session_spec_of(request));
    if (spec.fixture.empty())
      return start_hosted_session(srv, prep, root, new_session_id(), spec, &g_stop, say_in_log);
    auto info = start_server(root, spec);
    if (!info)
      return make_error(info.error().status == exit_internal ? error_kind::internal
                                                             : error_kind::invalid_argument,
                        "start: {}", info.error().why);
    others->add(*info);
    return std::move(*info);
  };
  so.list_others = [root, others] { return others->list(root); };
  so.stop_other = [root, others](const std::string& id) { return others->stop(root, id); };
  server srv(std::move(so));
  if (auto l = srv.listen(fs::absolute(a.socket)); !l)
    return say_error("serve", l.error().message, exit_usage);
  fmt::print(stderr, "evalbox serve: listening on {} (Ctrl-C stops every session)\n",
             fs::absolute(a.socket).string());
  srv.run(g_stop);
  others->stop_all(root);
  return exit_ok;
}

void add_state_dir(CLI::App* cmd, std::string& dir) {
  cmd->add_option("--state-dir", dir,
                  "where sessions live (default: EVALBOX_STATE_DIR or the standard location)");
}

}  // namespace

void register_serve(CLI::App& app, action& out) {
  auto a = std::make_shared<serve_many_args>();
  auto* sv = app.add_subcommand(
      "serve",
      "Host many sessions from one process: clients start them on --socket (evalbox.session.v1:\n"
      "ops start, ls, stop, ping) and drive each on its own socket (docs/sessions.md). A\n"
      "fixture's session (its setup run first) gets a server of its own, listed and stopped\n"
      "here. Runs until SIGINT or SIGTERM, which stop every session it started.\n"
      "\n"
      "Example:\n"
      "  evalbox serve --socket /run/evalbox.sock &\n"
      "  printf '{\"id\":1,\"op\":\"start\",\"workspace\":\"repo\"}\\n' | nc -U /run/evalbox.sock\n"
      "  printf '{\"id\":2,\"op\":\"start\",\"fixture\":\"fixtures/examples/off-by-one\"}\\n' \\\n"
      "    | nc -U /run/evalbox.sock");
  sv->add_option("--socket", a->socket, "where clients start sessions (made 0600)")->required();
  sv->add_option("--ttl", a->ttl, "a session's lifetime unless its start says 'ttl'")
      ->capture_default_str();
  add_state_dir(sv, a->state_dir);
  sv->callback([&out, a] { out = [a] { return serve_many(*a); }; });
}

void register_session(CLI::App& app, action& out) {
  auto* se = app.add_subcommand(
      "session",
      "Sandboxes that programs drive: start one, run commands in it, read and write its files,\n"
      "snapshot, fork and reset it (docs/sessions.md; clients/python for programs)");
  se->require_subcommand(1);

  auto sa = std::make_shared<start_args>();
  auto* st = se->add_subcommand(
      "start",
      "Start a session and print its id once it is ready (--json: the whole session).\n"
      "It runs until `evalbox session stop`, its --ttl, or its owner's exit.\n"
      "\n"
      "Examples:\n"
      "  id=$(evalbox session start --fixture fixtures/examples/off-by-one)\n"
      "  evalbox session start --image docker://python:3.13 --workspace repo/ --json\n"
      "  evalbox session start --workspace . --ttl 15m --detach");
  st->add_option("--fixture", sa->fixture,
                 "a fixture directory: its workspace and image, setup run first")
      ->check(CLI::ExistingDirectory);
  st->add_option("--suite", sa->suite,
                 "the suite whose defaults (and --candidate) the fixture takes")
      ->check(CLI::ExistingFile);
  st->add_option("--candidate", sa->candidate,
                 "a candidate of --suite whose managed home and credentials the session gets");
  st->add_option("--image", sa->image,
                 "an image as the root (docker://, oci:, oci-archive:, docker-archive:, rootfs:)");
  st->add_option("--workspace", sa->workspace,
                 "a host directory seen at /workspace (copy-on-write)")
      ->check(CLI::ExistingDirectory);
  st->add_option("--network", sa->network, "none, allow:HOST:PORT[,...] or unsafe-host")
      ->capture_default_str();
  st->add_option("--memory", sa->memory, "memory limit of the whole session")
      ->capture_default_str();
  st->add_option("--cpu", sa->cpu,
                 "CPU-time limit of the whole session (default: none; the TTL bounds it)");
  st->add_option("--disk", sa->disk, "disk quota of its writable trees")->capture_default_str();
  st->add_option("--pids", sa->pids, "process limit of the whole session")->capture_default_str();
  st->add_flag("--no-landlock", sa->no_landlock, "turn Landlock off (for programs that mount)");
  st->add_option("--ttl", sa->ttl, "how long the session may live")->capture_default_str();
  st->add_option(
      "--owner", sa->owner,
      "the session ends when this process exits (default: the caller's terminal session)");
  st->add_flag("--detach", sa->detach, "no owner: only --ttl or `session stop` end it");
  st->add_option("--pull", sa->pull, "registry images: missing, always or never")
      ->check(CLI::IsMember({"missing", "always", "never"}))
      ->capture_default_str();
  st->add_flag("--json", sa->json_out, "print the session as JSON (evalbox.session.v1)");
  add_state_dir(st, sa->state_dir);
  st->callback([&out, sa] { out = [sa] { return start(*sa); }; });

  auto va = std::make_shared<serve_args>();
  auto* sv = se->add_subcommand("serve", "the server of a session (started by `session start`)");
  sv->group("");
  sv->add_option("--id", va->id)->required();
  sv->add_option("--spec", va->spec)->required();
  sv->add_option("--ready-fd", va->ready_fd);
  sv->callback([&out, va] { out = [va] { return serve(*va); }; });

  auto ea = std::make_shared<exec_args>();
  auto* ex = se->add_subcommand(
      "exec",
      "Run a command in the session; its output is streamed, its exit status is evalbox's\n"
      "(128+N when killed by signal N, 124 past --timeout, 127 when the command is not in the\n"
      "session, 125 when the session failed).\n"
      "\n"
      "Examples:\n"
      "  evalbox session exec $id -- python3 -m pytest -q\n"
      "  evalbox session exec $id --cwd /workspace/src --env DEBUG=1 -- make\n"
      "  echo data | evalbox session exec $id --stdin -- wc -c\n"
      "  evalbox session exec $id --tty -- bash");
  ex->add_option("id", ea->id, "the session (an id or a unique prefix of one)")->required();
  ex->add_option("command", ea->command, "the command and its arguments (after --)")->required();
  ex->add_option("--cwd", ea->cwd, "working directory inside (default: the workspace)");
  // One value per --env: `--env A=1 -- cmd` must not take `cmd` as a second one.
  ex->add_option("--env", ea->env, "NAME=VALUE over the session's environment (repeatable)")
      ->allow_extra_args(false);
  ex->add_option("--timeout", ea->timeout, "kill the command (its process group) after this long");
  ex->add_flag("--stdin,-i", ea->stdin_pass, "pass this command's stdin to the command");
  ex->add_flag("--tty,-t", ea->tty, "a pseudo-terminal of the session's own (when stdin is one)");
  add_state_dir(ex, ea->state_dir);
  ex->callback([&out, ea] { out = [ea] { return exec(*ea); }; });

  auto wa = std::make_shared<simple_args>();
  auto* wr = se->add_subcommand("write", "Write stdin into a file of the session");
  wr->add_option("id", wa->id, "the session")->required();
  wr->add_option("path", wa->path, "the file inside (relative: to the workspace)")->required();
  wr->add_option("--mode", wa->mode, "a new file's permission bits (octal)")->capture_default_str();
  wr->add_flag("--append", wa->append, "append instead of replacing");
  wr->add_flag("--parents,-p", wa->parents, "make missing directories");
  add_state_dir(wr, wa->state_dir);
  wr->callback([&out, wa] { out = [wa] { return write(*wa); }; });

  auto ra = std::make_shared<simple_args>();
  auto* rd = se->add_subcommand("read", "Print a file of the session (binary-safe)");
  rd->add_option("id", ra->id, "the session")->required();
  rd->add_option("path", ra->path, "the file inside (relative: to the workspace)")->required();
  add_state_dir(rd, ra->state_dir);
  rd->callback([&out, ra] { out = [ra] { return read(*ra); }; });

  auto la = std::make_shared<simple_args>();
  auto* ls_cmd = se->add_subcommand("ls", "List sessions; with ID, a directory of that session");
  ls_cmd->add_option("id", la->id, "a session (none: every session)");
  ls_cmd->add_option("path", la->path, "a directory inside (default: the workspace)");
  ls_cmd->add_flag("--json", la->json_out, "as JSON");
  add_state_dir(ls_cmd, la->state_dir);
  ls_cmd->callback([&out, la] { out = [la] { return ls(*la); }; });

  auto na = std::make_shared<simple_args>();
  auto* sn = se->add_subcommand("snapshot", "Freeze the session's state under a name (O(changes))");
  sn->add_option("id", na->id, "the session")->required();
  sn->add_option("name", na->name, "the snapshot's name ([A-Za-z0-9._-]{1,64})")->required();
  sn->add_flag("--json", na->json_out, "as JSON");
  add_state_dir(sn, na->state_dir);
  sn->callback([&out, na] {
    out = [na] {
      return call_and_print(
          "snapshot", *na, {{"op", "snapshot"}, {"name", na->name}}, [](const json& r) {
            fmt::print("{} ({} files, {} bytes, {} ms)\n", json_value_or(r, "name", std::string()),
                       json_value_or(r, "files", uint64_t{0}),
                       json_value_or(r, "bytes", uint64_t{0}), json_value_or(r, "ms", uint64_t{0}));
          });
    };
  });

  auto fa = std::make_shared<simple_args>();
  auto* fk =
      se->add_subcommand("fork", "New sessions from a snapshot, each with its own writable layers");
  fk->add_option("id", fa->id, "the session")->required();
  fk->add_option("--from", fa->from, "the snapshot (default: one taken now)");
  fk->add_option("--count,-n", fa->count, "how many")->capture_default_str();
  fk->add_flag("--json", fa->json_out, "as JSON");
  add_state_dir(fk, fa->state_dir);
  fk->callback([&out, fa] {
    out = [fa] {
      json req{{"op", "fork"}, {"count", fa->count}};
      if (!fa->from.empty()) req["from"] = fa->from;
      return call_and_print("fork", *fa, std::move(req), [](const json& r) {
        for (const auto& s : json_member(r, "sessions"))
          fmt::print("{}\n", json_value_or(s, "id", std::string()));
      });
    };
  });

  auto rs = std::make_shared<simple_args>();
  auto* re =
      se->add_subcommand("reset", "Back to a snapshot (or the start): every process is killed");
  re->add_option("id", rs->id, "the session")->required();
  re->add_option("--to", rs->to, "the snapshot (default: where the session started)");
  re->add_flag("--json", rs->json_out, "as JSON");
  add_state_dir(re, rs->state_dir);
  re->callback([&out, rs] {
    out = [rs] {
      json req{{"op", "reset"}};
      if (!rs->to.empty()) req["to"] = rs->to;
      return call_and_print("reset", *rs, std::move(req), [](const json& r) {
        fmt::print(stderr, "reset in {} ms\n", json_value_or(r, "ms", uint64_t{0}));
      });
    };
  });

  auto ca = std::make_shared<cp_args>();
  auto* cpc = se->add_subcommand(
      "cp",
      "Copy files or directories into or out of a session (links and special files left out)\n"
      "\n"
      "Examples:\n"
      "  evalbox session cp src/ $id:/workspace/src\n"
      "  evalbox session cp $id:/workspace/out.txt ./out.txt");
  cpc->add_option("from", ca->from, "a local path, or ID:PATH")->required();
  cpc->add_option("to", ca->to, "a local path, or ID:PATH")->required();
  add_state_dir(cpc, ca->state_dir);
  cpc->callback([&out, ca] { out = [ca] { return cp(*ca); }; });

  auto ia = std::make_shared<simple_args>();
  auto* in = se->add_subcommand("info", "The session as JSON (evalbox.session.v1)");
  in->add_option("id", ia->id, "the session")->required();
  add_state_dir(in, ia->state_dir);
  in->callback([&out, ia] {
    out = [ia] {
      return call_and_print("info", *ia, {{"op", "info"}}, [](const json& r) {
        fmt::print("{}\n", pretty_json(json_member(r, "session")));
      });
    };
  });

  auto ga = std::make_shared<simple_args>();
  auto* gr =
      se->add_subcommand("grade", "Grade the session's current state with its fixture's checks");
  gr->add_option("id", ga->id, "the session")->required();
  gr->add_flag("--json", ga->json_out, "as JSON");
  add_state_dir(gr, ga->state_dir);
  gr->callback([&out, ga] {
    out = [ga] {
      return call_and_print("grade", *ga, {{"op", "grade"}},
                            [](const json& r) { fmt::print("{}\n", pretty_json(r)); });
    };
  });

  auto sp = std::make_shared<simple_args>();
  auto* so = se->add_subcommand("stop", "Stop sessions: every process killed, nothing left behind");
  so->add_option("ids", sp->ids, "the sessions")->required();
  add_state_dir(so, sp->state_dir);
  so->callback([&out, sp] { out = [sp] { return stop(*sp); }; });
}

}  // namespace evalbox::harness::cli
