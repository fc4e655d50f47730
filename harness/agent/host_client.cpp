// A host client in an image's root (see host_client.h).
#include "harness/agent/host_client.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "base/fs.h"
#include "base/unique_fd.h"
#include "sandbox/spec/request.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::harness {
inline namespace agent {

namespace fs = std::filesystem;

namespace {

result<std::string> read_at(int fd, uint64_t offset, size_t n, const fs::path& shown) {
  std::string buf(n, '\0');
  ssize_t got = ::pread(fd, buf.data(), n, static_cast<off_t>(offset));
  if (got < 0) return sys_error(errno, "read {}", shown.string());
  buf.resize(static_cast<size_t>(got));
  return buf;
}

}  // namespace

result<executable_kind> inspect_executable(const fs::path& file) {
  unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", file.string());
  char buf[512] = {};
  const ssize_t got = ::pread(fd.get(), buf, sizeof buf, 0);
  if (got < 0) return sys_error(errno, "read {}", file.string());
  const std::string head(buf, static_cast<size_t>(got));
  executable_kind k;
  if (head.size() >= 2 && head[0] == '#' && head[1] == '!') {
    std::string line = head.substr(
        2, head.find('\n') == std::string::npos ? std::string::npos : head.find('\n') - 2);
    auto word = [&](size_t& at) {
      while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
      size_t start = at;
      while (at < line.size() && line[at] != ' ' && line[at] != '\t') ++at;
      return line.substr(start, at - start);
    };
    size_t at = 0;
    k.what = executable_kind::type::script;
    k.interpreter = word(at);
    k.argument = word(at);
    return k;
  }
  if (head.size() < sizeof(Elf64_Ehdr) || std::memcmp(head.data(), ELFMAG, SELFMAG) != 0 ||
      static_cast<unsigned char>(head[EI_CLASS]) != ELFCLASS64)
    return k;  // unknown: the kernel will say what it thinks of it
  Elf64_Ehdr eh;
  std::memcpy(&eh, head.data(), sizeof eh);
  k.what = executable_kind::type::static_elf;
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256) return k;
  const std::string ph =
      EB_TRY(read_at(fd.get(), eh.e_phoff, size_t{eh.e_phnum} * sizeof(Elf64_Phdr), file));
  for (size_t i = 0; i + sizeof(Elf64_Phdr) <= ph.size(); i += sizeof(Elf64_Phdr)) {
    Elf64_Phdr p;
    std::memcpy(&p, ph.data() + i, sizeof p);
    if (p.p_type != PT_INTERP || p.p_filesz == 0 || p.p_filesz > 4096) continue;
    std::string interp = EB_TRY(read_at(fd.get(), p.p_offset, p.p_filesz, file));
    interp.resize(std::strlen(interp.c_str()));
    k.what = executable_kind::type::dynamic_elf;
    k.interpreter = interp;
  }
  return k;
}

namespace {

// Whether the image has one of the programs the client needs, on its PATH or where clients
// usually look (/bin, /usr/bin, /usr/local/bin).
status check_needs(const agent_plan& plan, const image_view& image) {
  if (plan.needs_any_of.empty()) return {};
  std::vector<std::string> dirs = image.path_dirs;
  for (const char* d : {"/bin", "/usr/bin", "/usr/local/bin"}) dirs.emplace_back(d);
  for (const auto& name : plan.needs_any_of)
    for (const auto& dir : dirs)
      if (!dir.empty() && dir.front() == '/' && EB_TRY(image.has_file(fs::path(dir) / name)))
        return {};
  std::string names;
  for (const auto& n : plan.needs_any_of) names += (names.empty() ? "" : " or ") + n;
  return make_error(error_kind::invalid_argument,
                    "{}, and the image {} has no {} (on its PATH or in /bin, /usr/bin, "
                    "/usr/local/bin): use an image that has one",
                    plan.needs_why, image.reference, names);
}

}  // namespace

status adapt_to_image(agent_plan& plan, const image_view& image) {
  if (plan.argv.empty()) return {};
  EB_TRY(check_needs(plan, image));
  const fs::path program = plan.argv.front();
  if (!program.is_absolute() || sandbox::below_system_path(normalize(program))) return {};
  const auto kind = EB_TRY(inspect_executable(program));
  using type = executable_kind::type;
  switch (kind.what) {
    case type::static_elf:
    case type::unknown:
      return {};
    case type::dynamic_elf: {
      // An image with the loader the client names (a glibc image) runs it with its own loader
      // and libraries, like any of its programs: the client then sees itself as
      // /proc/self/exe and may re-run itself (Claude Code does, for its grep).
      if (EB_TRY(image.has_file(kind.interpreter))) return {};
      // Else the host's loader and the directory it lives in (where the host keeps libc and
      // the rest): the client finds every library it was built against, whatever the image
      // has. --argv0 keeps argv[0] what the client expects; /proc/self/exe is the loader.
      std::error_code ec;
      const fs::path loader = fs::canonical(kind.interpreter, ec);
      if (ec)
        return make_error(error_kind::invalid_argument,
                          "{} needs the loader {}, which this host does not have", program.string(),
                          kind.interpreter);
      // The client itself stays mounted at its own path: it is no longer argv[0], whose
      // directory the sandbox binds by itself.
      plan.readonly_paths.push_back(normalize(program).parent_path());
      if (fs::path real = fs::canonical(program, ec); !ec)
        plan.readonly_paths.push_back(real.parent_path());
      plan.host_binds.push_back({loader, fs::path(host_loader_target), false, true});
      plan.host_binds.push_back(
          {loader.parent_path(), fs::path(host_libraries_target), false, false});
      std::vector<std::string> argv = {std::string(host_loader_target),
                                       "--library-path",
                                       std::string(host_libraries_target),
                                       "--argv0",
                                       plan.argv.front(),
                                       plan.argv.front()};
      argv.insert(argv.end(), plan.argv.begin() + 1, plan.argv.end());
      plan.argv = std::move(argv);
      return {};
    }
    case type::script: {
      const bool via_env = fs::path(kind.interpreter).filename() == "env" &&
                           !kind.argument.empty() && kind.argument.front() != '-';
      if (via_env) {
        for (const auto& dir : image.path_dirs)
          if (!dir.empty() && EB_TRY(image.has_file(fs::path(dir) / kind.argument))) return {};
        std::string dirs;
        for (const auto& d : image.path_dirs) dirs += (dirs.empty() ? "" : ":") + d;
        return make_error(error_kind::invalid_argument,
                          "{} is a {} script (#!{} {}), and the image {} has no {} on its PATH "
                          "({}): use an image that has it, or a client that runs by itself",
                          program.string(), kind.argument, kind.interpreter, kind.argument,
                          image.reference, kind.argument, dirs.empty() ? "unset" : dirs);
      }
      if (EB_TRY(image.has_file(kind.interpreter))) return {};
      return make_error(error_kind::invalid_argument,
                        "{} is a script for {}, which the image {} does not have: use an image "
                        "that has it, or a client that runs by itself",
                        program.string(), kind.interpreter, image.reference);
    }
  }
  return {};
}

}  // namespace agent
}  // namespace evalbox::harness
