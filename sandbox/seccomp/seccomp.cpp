// The seccomp deny-list and its compilation with libseccomp into a BPF program held in memory.
#include "sandbox/seccomp/seccomp.h"

#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <memory>

#include "base/digest.h"
#include "base/unique_fd.h"

namespace evalbox::sandbox::seccomp {

const std::vector<denied_call>& denied_calls() {
  // ptrace and process_vm_* stay allowed: only the run's own processes are visible in its pid
  // namespace, and debuggers and test runners inside need them.
  static const std::vector<denied_call> calls = {
      {"kexec_load", "replaces the running kernel"},
      {"kexec_file_load", "replaces the running kernel"},
      {"init_module", "loads code into the kernel"},
      {"finit_module", "loads code into the kernel"},
      {"delete_module", "unloads kernel code the host relies on"},
      {"reboot", "reboots or halts the machine (or the pid namespace: pid 1 is evalbox's)"},
      {"swapon", "changes the host's swap devices"},
      {"swapoff", "changes the host's swap devices"},
      {"keyctl", "kernel keyrings are not namespaced: another user's keys, attack surface"},
      {"add_key", "kernel keyrings are not namespaced"},
      {"request_key", "kernel keyrings are not namespaced; can upcall into the host"},
      {"perf_event_open", "observes other processes and the kernel; large attack surface"},
      {"bpf", "kernel programs and maps; large attack surface"},
      {"userfaultfd", "stalls kernel page faults at will: a classic exploit primitive"},
      {"open_by_handle_at", "opens files by handle, bypassing the mount tree (shocker escape)"},
      {"name_to_handle_at", "produces handles for open_by_handle_at; leaks host inode ids"},
      {"acct", "host-wide process accounting"},
      {"settimeofday", "the clock is host-wide"},
      {"clock_settime", "the clock is host-wide"},
      {"clock_adjtime", "the clock is host-wide"},
      {"adjtimex", "the clock is host-wide"},
      {"lookup_dcookie", "kernel profiling interface"},
      {"quotactl", "host filesystem quotas"},
      {"quotactl_fd", "host filesystem quotas"},
      {"syslog", "the kernel log may hold host addresses and secrets"},
      {"iopl", "raw I/O port access"},
      {"ioperm", "raw I/O port access"},
      {"vhangup", "hangs up the terminal, which may be the host user's"},
      {"nfsservctl", "kernel NFS server control"},
      {"uselib", "obsolete loader interface, only attack surface"},
      {"ustat", "obsolete; leaks host filesystem information"},
      {"sysfs", "obsolete; lists host filesystems"},
      {"_sysctl", "obsolete sysctl interface"},
      {"fanotify_init", "watches whole filesystems, including beyond the run's tree"},
      // Programs that try io_uring (libuv, tokio) fall back to ordinary calls on EPERM.
      {"io_uring_setup", "large attack surface; its operations bypass this filter's view"},
      {"io_uring_enter", "large attack surface; its operations bypass this filter's view"},
      {"io_uring_register", "large attack surface; its operations bypass this filter's view"},
  };
  return calls;
}

const std::vector<denied_personality>& denied_personality_flags() {
  // Each weakens memory protection for the program's next exec.
  static const std::vector<denied_personality> flags = {
      {"READ_IMPLIES_EXEC", READ_IMPLIES_EXEC,
       "makes all readable memory executable: no W^X for an exploit to defeat"},
      {"MMAP_PAGE_ZERO", MMAP_PAGE_ZERO,
       "maps page 0, turning kernel and program null dereferences into exploits"},
      {"ADDR_COMPAT_LAYOUT", ADDR_COMPAT_LAYOUT,
       "the legacy bottom-up mmap layout, with less address randomization"},
  };
  return flags;
}

namespace {
struct ctx_deleter {
  void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};
}  // namespace

result<filter> compile() {
  std::unique_ptr<void, ctx_deleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return make_error(error_kind::internal, "seccomp_init failed");
  // Other architectures' system call tables (i386, x32) would let a program reach the
  // denied calls under other numbers: such calls kill the process (libseccomp's default).
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const auto& d : denied_calls()) {
    int nr = seccomp_syscall_resolve_name(d.name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (int rc = seccomp_rule_add(ctx.get(), eperm, nr, 0); rc < 0) {
      return sys_error(-rc, "seccomp_rule_add({})", d.name);
    }
  }
  // personality: flags that weaken memory protections for the next exec.
  for (const auto& p : denied_personality_flags()) {
    int rc = seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(personality), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, p.flag, p.flag));
    if (rc < 0) return sys_error(-rc, "seccomp_rule_add(personality)");
  }
  // ioctl TIOCSTI/TIOCLINUX: push characters into a terminal's input; with the host user's
  // terminal passed through (sandbox shell) that is command injection into the host shell.
  for (unsigned long req :
       {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
    int rc = seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, req));
    if (rc < 0) return sys_error(-rc, "seccomp_rule_add(ioctl)");
  }
  // Export to memory (libseccomp 2.5 exports to an fd only).
  unique_fd mem(::memfd_create("evalbox-seccomp", MFD_CLOEXEC));
  if (!mem) return sys_error(errno, "memfd_create");
  if (int rc = seccomp_export_bpf(ctx.get(), mem.get()); rc < 0) {
    return sys_error(-rc, "seccomp_export_bpf");
  }
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % sizeof(sock_filter) != 0) {
    return make_error(error_kind::internal, "seccomp: exported BPF has size {}", size);
  }
  filter f;
  f.program.resize(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), f.program.data(), static_cast<size_t>(size), 0) != size) {
    return sys_error(errno, "read exported BPF");
  }
  f.digest = sha256_hex(
      std::string_view(reinterpret_cast<const char*>(f.program.data()), static_cast<size_t>(size)));
  return f;
}

}  // namespace evalbox::sandbox::seccomp
