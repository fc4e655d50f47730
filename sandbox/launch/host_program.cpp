// run_host_program with Boost.Process (see host_program.h).
#include "sandbox/launch/host_program.h"

#include <sys/wait.h>

#include <istream>

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
  host_program_result out;
  try {
    std::error_code ec;
    bp::ipstream pipe;
    const std::string cwd =
        program.cwd.empty() ? std::filesystem::current_path().string() : program.cwd.string();
    bp::child c(exe, bp::args(args), env, bp::start_dir(cwd),
                bp::std_in<bp::null, (bp::std_out & bp::std_err)> pipe, ec);
    if (ec) return make_error(error_kind::io, "start {}: {}", exe.string(), ec.message());
    char buf[8192];
    while (pipe.read(buf, sizeof buf) || pipe.gcount() > 0) {
      out.output.append(buf, static_cast<size_t>(pipe.gcount()));
      if (out.output.size() > 2 * program.max_output)
        out.output.erase(0, out.output.size() - program.max_output);
    }
    c.wait(ec);
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
