// The policy compiled at build time (gen_filter.cpp), and its installation. No libseccomp and
// no OpenSSL here: this is what the helper links.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <cerrno>
#include <iterator>

#include "sandbox/seccomp/seccomp.h"

namespace evalbox::sandbox::seccomp {
namespace {
#include "seccomp_filter.inc"
}  // namespace

const filter& builtin() {
  static const filter f{
      std::vector<sock_filter>(std::begin(filter_program), std::end(filter_program)),
      filter_digest};
  return f;
}

int install(const filter& f) noexcept {
  struct sock_fprog prog {};
  prog.len = static_cast<unsigned short>(f.program.size());
  prog.filter = const_cast<sock_filter*>(f.program.data());
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) return errno;
  return 0;
}

}  // namespace evalbox::sandbox::seccomp
