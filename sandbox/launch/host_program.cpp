// run_host_program with Boost.Process (see host_program.h).
#include "sandbox/launch/host_program.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <istream>
#include <memory>
#include <mutex>
#include <thread>

#include <boost/process.hpp>

namespace evalbox::sandbox {

namespace bp = boost::process;

result<host_program_result> run_host_program(const host_program& program) {
  if (program.argv.empty()) return make_error(error_kind::invalid_argument, "no program to run");
  bp::environment env;
  for (const auto& [k, v] : program.env) env[k] = v;
  // The program is found on its own PATH, not evalbox's.
  std::vector<boost::filesystem::path> dirs;
  if (auto it = program.env.find("PATH"); it != program.env.end()) {
    size_t start = 0;
    while (start <= it->second.size()) {
      size_t colon = it->second.find(':', start);
      if (colon == std::string::npos) colon = it->second.size();
      if (colon > start) dirs.emplace_back(it->second.substr(start, colon - start));
      start = colon + 1;
    }
  }
  auto exe =
      program.argv[0].find('/') != std::string::npos
          ? boost::filesystem::path(program.argv[0])
          : bp::search_path(program.argv[0], dirs.empty() ? ::boost::this_process::path() : dirs);
  if (exe.empty())
    return make_error(error_kind::not_found, "{} is not installed (not found on PATH)",
                      program.argv[0]);
  std::vector<std::string> args(program.argv.begin() + 1, program.argv.end());
  // The input in a memory file, read by the program as a regular file.
  std::unique_ptr<FILE, int (*)(FILE*)> input(nullptr, &std::fclose);
  if (program.input) {
    const int fd = memfd_create("evalbox-stdin", MFD_CLOEXEC);
    if (fd < 0) return make_error(error_kind::io, "memfd_create: {}", std::strerror(errno));
    input.reset(fdopen(fd, "w+"));
    if (!input) {
      ::close(fd);
      return make_error(error_kind::io, "fdopen: {}", std::strerror(errno));
    }
    if (std::fwrite(program.input->data(), 1, program.input->size(), input.get()) !=
            program.input->size() ||
        std::fflush(input.get()) != 0 || std::fseek(input.get(), 0, SEEK_SET) != 0)
      return make_error(error_kind::io, "write the input of {}: {}", exe.string(),
                        std::strerror(errno));
  }
  host_program_result out;
  try {
    std::error_code ec;
    // Close-on-exec in this process from the start (Boost.Process makes its pipes with pipe(2)):
    // a child that another thread starts meanwhile, such as a warm sandbox helper, must not
    // inherit the write end and keep this read from seeing end of file. The program's own
    // stdout is a dup2 of it, which clears the flag.
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return make_error(error_kind::io, "pipe2: {}", std::strerror(errno));
    bp::ipstream pipe(bp::pipe(fds[0], fds[1]));
    bp::group group;
    const std::string cwd =
        program.cwd.empty() ? std::filesystem::current_path().string() : program.cwd.string();
    // Boost.Process takes its redirections as types: one call per combination.
    auto start = [&](auto&&... redirections) {
      return bp::child(exe, bp::args(args), env, bp::start_dir(cwd), group, redirections..., ec);
    };
    bp::child c =
        input ? (program.stdout_only
                     ? start(bp::std_in<input.get(), bp::std_out> pipe, bp::std_err > bp::null)
                     : start(bp::std_in<input.get(), (bp::std_out & bp::std_err)> pipe))
              : (program.stdout_only
                     ? start(bp::std_in<bp::null, bp::std_out> pipe, bp::std_err > bp::null)
                     : start(bp::std_in<bp::null, (bp::std_out & bp::std_err)> pipe));
    if (ec) return make_error(error_kind::io, "start {}: {}", exe.string(), ec.message());
    // The timeout: a watcher kills the whole group, which also closes the pipe's far end.
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    std::thread watcher;
    if (program.timeout)
      watcher = std::thread([&] {
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, *program.timeout, [&] { return finished; })) {
          out.timed_out = true;
          std::error_code kill_ec;
          group.terminate(kill_ec);
        }
      });
    auto stop_watcher = [&] {
      if (!watcher.joinable()) return;
      {
        std::lock_guard lock(mu);
        finished = true;
      }
      cv.notify_all();
      watcher.join();
    };
    char buf[8192];
    try {
      while (pipe.read(buf, sizeof buf) || pipe.gcount() > 0) {
        out.output.append(buf, static_cast<size_t>(pipe.gcount()));
        if (out.output.size() > 2 * program.max_output)
          out.output.erase(0, out.output.size() - program.max_output);
      }
      c.wait(ec);
    } catch (...) {
      stop_watcher();
      throw;
    }
    stop_watcher();
    if (out.output.size() > program.max_output)
      out.output.erase(0, out.output.size() - program.max_output);
    const int native = c.native_exit_code();
    if (WIFSIGNALED(native)) {
      out.signal = WTERMSIG(native);
      out.exit_code = -1;
    } else {
      out.exit_code = c.exit_code();
    }
  } catch (const std::exception& e) {
    return make_error(error_kind::io, "run {}: {}", exe.string(), e.what());
  }
  return out;
}

}  // namespace evalbox::sandbox
