// Joining shard results directories (see merge.h for the theory of operation).
#include "harness/scale/merge.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <map>
#include <set>
#include <system_error>
#include <thread>

#include <fmt/ranges.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json_checks.h"
#include "base/json_get.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "harness/results/final_state.h"
#include "harness/results/results.h"

namespace evalbox::harness::scale {

namespace fs = std::filesystem;

namespace {

// Planned run ids are 16 hex digits; as a number they make a small key.
std::optional<uint64_t> id_number(std::string_view id) {
  if (id.size() != 16) return std::nullopt;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  uint64_t v = 0;
  std::from_chars(id.data(), id.data() + id.size(), v, 16);
  return v;
}

// 128 bits of SHA-256 over a record's line: the same line, the same digest.
struct content_digest {
  uint64_t hi = 0, lo = 0;
  bool operator==(const content_digest&) const = default;
};

// Of the line as written: evalbox writes records in canonical form, so the same record is the
// same bytes wherever it was copied (a line that differs only in form is compared by content
// before it is called a conflict: same_content).
content_digest digest_of(std::string_view line) {
  std::string hex = sha256_hex(line);
  content_digest d;
  std::from_chars(hex.data(), hex.data() + 16, d.hi, 16);
  std::from_chars(hex.data() + 16, hex.data() + 32, d.lo, 16);
  return d;
}

// The line at `where` of an open results.jsonl, into `line` (reused: a fresh buffer of a few
// kilobytes per record makes glibc consolidate its free lists every time). With `short_ok`,
// what there is up to the end of the file (`line` is then shorter).
status read_line_at(int fd, const fs::path& file, record_location where, std::string& line,
                    bool short_ok = false) {
  line.resize(static_cast<size_t>(where.size));
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::pread(fd, line.data() + done, line.size() - done,
                        static_cast<off_t>(where.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", file.string());
    if (n == 0) {
      if (short_ok) break;
      return make_error(error_kind::io, "{}: the record at byte {} changed while merging",
                        file.string(), where.offset);
    }
    done += static_cast<size_t>(n);
  }
  line.resize(done);
  return {};
}

// One directory records are taken from: a shard, or the output's earlier merge.
struct source {
  fs::path dir;
  plan_identity plan;
  std::vector<int> shards;  // the shards (K) whose runs it holds
  bool is_output = false;
};

// One run of the plan, compactly: its id, what names it in messages, the shard that runs it.
struct planned_run {
  uint64_t id = 0;
  uint32_t fixture = 0, candidate = 0;
  int32_t trial = 0, shard = 0;
};

// The record a run is taken from: its source, where its line lies, and the line's digest.
struct slot {
  static constexpr uint32_t none = UINT32_MAX;
  uint32_t source = none;
  record_location where;
  content_digest digest;
};
// merge.h states what the index costs per run.
static_assert(sizeof(planned_run) == 24 && sizeof(slot) == 40 &&
              sizeof(std::pair<uint32_t, slot>) == 48);

// Whether two lines that differ in bytes hold the same record (one was rewritten in another
// form, e.g. by hand or by another JSON tool): compared in canonical form.
result<bool> same_content(const source& a, const slot& x, const source& b, const slot& y) {
  auto line_of = [](const source& s, const slot& at) -> result<json> {
    const fs::path file = s.dir / "results.jsonl";
    unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return sys_error(errno, "open {}", file.string());
    std::string line;
    EB_TRY(read_line_at(fd.get(), file, at.where, line));
    return parse_json(line, file.string());
  };
  auto jx = EB_TRY(line_of(a, x));
  auto jy = EB_TRY(line_of(b, y));
  return canonical_json(jx) == canonical_json(jy);
}

// Whether the record at `at` of `s` comes from grading its run again (evalbox regrade): a
// newer grading of the same run, not another run.
result<bool> is_regrade(const source& s, const slot& at) {
  const fs::path file = s.dir / "results.jsonl";
  unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", file.string());
  std::string line;
  EB_TRY(read_line_at(fd.get(), file, at.where, line));
  auto j = EB_TRY(parse_json(line, file.string()));
  return json_member(j, "regraded").is_object();
}

// 1-based line of `file` on which byte `offset` lies (for messages only).
uint64_t line_at(const fs::path& file, uint64_t offset) {
  unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return 0;
  uint64_t line = 1, pos = 0;
  char buf[64 * 1024];
  while (pos < offset) {
    ssize_t n = ::read(fd.get(), buf, std::min<uint64_t>(sizeof buf, offset - pos));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line += static_cast<uint64_t>(std::count(buf, buf + n, '\n'));
    pos += static_cast<uint64_t>(n);
  }
  return line;
}

std::string run_name(const plan_identity& p, const planned_run& r) {
  return fmt::format("{}/{}#{} ({:016x})", p.fixtures[r.fixture].id, p.candidates[r.candidate].id,
                     r.trial, r.id);
}

// What differs between two plans, in words, for the refusal to merge them.
std::string plan_differences(const plan_identity& a, const plan_identity& b) {
  std::vector<std::string> out;
  if (a.suite != b.suite) out.push_back(fmt::format("suite '{}' vs '{}'", a.suite, b.suite));
  if (a.suite_digest != b.suite_digest)
    out.push_back(fmt::format("suite file digest {}… vs {}… (the suite file was changed)",
                              a.suite_digest.substr(0, 12), b.suite_digest.substr(0, 12)));
  auto compare = [&](const char* what, const auto& x, const auto& y) {
    std::map<std::string, std::string> mx, my;
    for (const auto& e : x) mx[e.id] = e.digest;
    for (const auto& e : y) my[e.id] = e.digest;
    for (const auto& [id, d] : mx) {
      auto it = my.find(id);
      if (it == my.end())
        out.push_back(fmt::format("{} '{}' only in the first", what, id));
      else if (it->second != d)
        out.push_back(fmt::format("{} '{}' differs (digest {}… vs {}…)", what, id, d.substr(0, 12),
                                  it->second.substr(0, 12)));
    }
    for (const auto& [id, d] : my)
      if (!mx.contains(id)) out.push_back(fmt::format("{} '{}' only in the second", what, id));
  };
  compare("fixture", a.fixtures, b.fixtures);
  compare("candidate", a.candidates, b.candidates);
  if (a.trials != b.trials) out.push_back(fmt::format("trials {} vs {}", a.trials, b.trials));
  if (a.filter != b.filter) out.push_back(fmt::format("filter '{}' vs '{}'", a.filter, b.filter));
  if (a.baseline != b.baseline)
    out.push_back(
        fmt::format("baseline '{}' vs '{}'", a.baseline.value_or(""), b.baseline.value_or("")));
  if (out.empty()) out.push_back("the order of fixtures or candidates");
  return fmt::format("{}", fmt::join(out, "; "));
}

bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return normalize(fs::absolute(a, ec)) == normalize(fs::absolute(b, ec));
}

result<source> open_shard(const fs::path& dir) {
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return sys_error(ec.value(), "shard {}", dir.string());
  if (!fs::exists(st))
    return make_error(error_kind::not_found, "shard {}: no such directory", dir.string());
  if (!fs::is_directory(st))
    return make_error(error_kind::invalid_argument, "shard {}: not a directory", dir.string());
  auto plan = read_plan(dir);
  if (!plan) {
    if (plan.error().kind == error_kind::not_found)
      return make_error(error_kind::invalid_argument,
                        "shard {}: no plan.json, so it is not a results directory of `evalbox "
                        "run` (or one written before plan.json existed: run the same `evalbox "
                        "run` into it again, which resumes and writes it)",
                        dir.string());
    return std::unexpected(
        std::move(plan).error().with_context(fmt::format("shard {}", dir.string())));
  }
  source s{dir, std::move(*plan), {}, false};
  s.shards = s.plan.merged.empty() ? std::vector<int>{s.plan.shard_index} : s.plan.merged;
  return s;
}

// The output's earlier merge, if any; refuses a directory that holds anything else.
result<std::optional<source>> open_output(const fs::path& dir) {
  std::error_code ec;
  auto st = fs::status(dir, ec);
  if (!fs::exists(st)) return std::optional<source>();
  if (!fs::is_directory(st))
    return make_error(error_kind::invalid_argument, "--into {}: not a directory", dir.string());
  auto plan = read_plan(dir);
  if (!plan) {
    if (plan.error().kind != error_kind::not_found)
      return std::unexpected(std::move(plan).error().with_context("--into"));
    if (fs::exists(dir / "results.jsonl", ec))
      return make_error(error_kind::invalid_argument,
                        "--into {}: holds a results.jsonl but no plan.json: not a directory "
                        "evalbox merge wrote; merge into another one",
                        dir.string());
    return std::optional<source>();
  }
  if (plan->merged.empty())
    return make_error(error_kind::invalid_argument,
                      "--into {}: holds the results of `evalbox run` (shard {}/{}), not a merge: "
                      "merge into another directory",
                      dir.string(), plan->shard_index, plan->shard_count);
  source s{dir, std::move(*plan), {}, true};
  s.shards = s.plan.merged;
  return std::optional<source>(std::move(s));
}

// A complete line ends results.jsonl: a merge killed mid-append left a torn one, which would
// swallow the next record appended after it.
status drop_torn_tail(int fd, const fs::path& file) {
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0) return sys_error(errno, "lseek {}", file.string());
  off_t keep = size;
  char buf[4096];
  while (keep > 0) {
    off_t from = std::max<off_t>(0, keep - static_cast<off_t>(sizeof buf));
    ssize_t n = ::pread(fd, buf, static_cast<size_t>(keep - from), from);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return sys_error(n < 0 ? errno : EIO, "read {}", file.string());
    const char* nl = static_cast<const char*>(::memrchr(buf, '\n', static_cast<size_t>(n)));
    if (nl) {
      keep = from + (nl - buf) + 1;
      break;
    }
    keep = from;
  }
  if (keep == size) return {};
  log::warn("{}: dropping a torn last line ({} bytes) left by an interrupted merge", file.string(),
            size - keep);
  if (::ftruncate(fd, keep) != 0) return sys_error(errno, "truncate {}", file.string());
  return {};
}

// Appends lines with few large writes; fsynced once at the end.
class appender {
 public:
  appender(unique_fd fd, fs::path file) : fd_(std::move(fd)), file_(std::move(file)) {}
  status add(std::string_view line) {
    buf_.append(line);
    buf_.push_back('\n');
    return buf_.size() >= (1u << 20) ? flush() : status{};
  }
  status finish() {
    EB_TRY(flush());
    if (::fdatasync(fd_.get()) != 0) return sys_error(errno, "fdatasync {}", file_.string());
    return {};
  }

 private:
  status flush() {
    size_t done = 0;
    while (done < buf_.size()) {
      ssize_t n = ::write(fd_.get(), buf_.data() + done, buf_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sys_error(errno, "append to {}", file_.string());
      done += static_cast<size_t>(n);
    }
    buf_.clear();
    return {};
  }
  unique_fd fd_;
  fs::path file_;
  std::string buf_;
};

// Copies the regular file `name` of directory `from` to `to_name` relative to `to` (mode kept).
status copy_at(int from, int to, const char* name, const char* to_name, mode_t mode,
               const fs::path& shown) {
  unique_fd in(::openat(from, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return sys_error(errno, "open {}", (shown / name).string());
  unique_fd outf(::openat(to, to_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777));
  if (!outf) return sys_error(errno, "create {}", to_name);
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", (shown / name).string());
    if (n == 0) return {};
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(outf.get(), buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return sys_error(errno, "write {}", name);
      done += w;
    }
  }
}

// The entries of directory `from` (whose descriptor it takes) into the empty directory `to`,
// recursively: regular files hard-linked (a recorded run's files are never written again: a
// rerun replaces its directory with new files), copied where a link cannot be made (EXDEV:
// another filesystem; EPERM: fs.protected_hardlinks and a file of another user; EMLINK);
// symlinks as symlinks, never followed; anything else (sockets, fifos, devices) is no result
// and is left out. Relative to directory descriptors, by the type readdir gives: a file costs
// one linkat, no stat and no path resolution — a merge brings hundreds of thousands.
status link_tree(unique_fd from_fd, int to, std::string_view to_prefix, const fs::path& shown,
                 bool copy, merge_report& out, int depth = 0) {
  if (depth > 64)
    return make_error(error_kind::invalid_argument, "{}: nested too deep", shown.string());
  const int from = from_fd.get();
  // Names in `to` under `to_prefix` (a run's directory just made in runs/, so that bringing a
  // run costs no open and close of it).
  std::string to_name;
  auto target_of = [&](const char* name) -> const char* {
    if (to_prefix.empty()) return name;
    to_name.assign(to_prefix).append("/").append(name);
    return to_name.c_str();
  };
  auto mode_of = [&](const char* name) -> result<mode_t> {
    struct stat st {};
    if (::fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_error(errno, "stat {}", (shown / name).string());
    return st.st_mode;
  };
  // The entries straight from getdents64 (readdir's stream would add an fstat, an fcntl and an
  // allocation to every run directory).
  alignas(dirent64) char buf[4096];
  for (;;) {
    const ssize_t got = ::getdents64(from, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return sys_error(errno, "read {}", shown.string());
    if (got == 0) return {};
    for (ssize_t at = 0; at < got;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf + at);
      at += e->d_reclen;
      const char* name = e->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) type = IFTODT(EB_TRY(mode_of(name)));  // filesystems without d_type
      if (type == DT_REG) {
        if (!copy) {
          if (::linkat(from, name, to, target_of(name), 0) == 0) {
            ++out.linked;
            continue;
          }
          if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != EACCES)
            return sys_error(errno, "link {}", (shown / name).string());
        }
        const mode_t mode = EB_TRY(mode_of(name));
        EB_TRY(copy_at(from, to, name, target_of(name), mode, shown));
        ++out.copied;
      } else if (type == DT_DIR) {
        const mode_t mode = EB_TRY(mode_of(name));
        if (::mkdirat(to, target_of(name), mode & 07777) != 0)
          return sys_error(errno, "mkdir {}", target_of(name));
        unique_fd sub_from(::openat(from, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        unique_fd sub_to(
            ::openat(to, target_of(name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub_from || !sub_to) return sys_error(errno, "open {}", (shown / name).string());
        EB_TRY(
            link_tree(std::move(sub_from), sub_to.get(), "", shown / name, copy, out, depth + 1));
      } else if (type == DT_LNK) {
        std::string target(PATH_MAX, '\0');
        ssize_t n = ::readlinkat(from, name, target.data(), target.size());
        if (n < 0) return sys_error(errno, "readlink {}", (shown / name).string());
        target.resize(static_cast<size_t>(n));
        if (::symlinkat(target.c_str(), to, target_of(name)) != 0)
          return sys_error(errno, "symlink {}", target_of(name));
      }
    }
  }
}

// The objects of a source's kept final states (harness/results/final_state.h) brought into
// the output's objects/, linked like run files (copied where a link cannot be made): they are
// named by their content, so one of that name already there is the same file and stays.
status bring_objects(const fs::path& from_root, const fs::path& to_root, bool copy,
                     merge_report& out) {
  const fs::path from = from_root / objects_dir / "sha256";
  const fs::path to = to_root / objects_dir / "sha256";
  unique_fd top(::open(from.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!top) return errno == ENOENT ? status{} : sys_error(errno, "open {}", from.string());
  auto dirs = EB_TRY(read_dir_at(top.get(), from));
  while (const dirent* d = ::readdir(dirs.get())) {
    const std::string prefix = d->d_name;
    if (prefix.size() != 2 || !is_sha256_hex(prefix + std::string(62, '0'))) continue;
    unique_fd sub(
        ::openat(top.get(), prefix.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) continue;
    EB_TRY(make_dirs(to / prefix));
    unique_fd dest(::open((to / prefix).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dest) return sys_error(errno, "open {}", (to / prefix).string());
    auto files = EB_TRY(read_dir_at(sub.get(), from / prefix));
    while (const dirent* f = ::readdir(files.get())) {
      const char* name = f->d_name;
      struct stat st {};
      if (!is_sha256_hex(prefix + name) ||
          ::fstatat(sub.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
          ::fstatat(dest.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        continue;
      if (!copy && ::linkat(sub.get(), name, dest.get(), name, 0) == 0) {
        ++out.linked;
        continue;
      }
      EB_TRY(copy_at(sub.get(), dest.get(), name, name, 0444, from / prefix));
      ++out.copied;
    }
  }
  return {};
}

// Run directories brought from one source's runs/ into the output's (see link_tree). A
// directory is complete before its record is appended; one a killed merge left without its
// record is replaced.
class run_dirs {
 public:
  static result<run_dirs> open(const fs::path& from, const fs::path& to, bool copy) {
    unique_fd to_fd(::open(to.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!to_fd) return sys_error(errno, "open {}", to.string());
    unique_fd from_fd(::open(from.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!from_fd && errno != ENOENT) return sys_error(errno, "open {}", from.string());
    return run_dirs(std::move(from_fd), std::move(to_fd), from, to, copy);
  }

  // False when the source has no directory for the run (its record is merged without one).
  result<bool> bring(const std::string& id, merge_report& out) {
    if (!from_) return false;
    unique_fd src(
        ::openat(from_.get(), id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!src) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return false;
      return sys_error(errno, "open {}", (from_path_ / id).string());
    }
    if (::mkdirat(to_.get(), id.c_str(), 0755) != 0) {
      if (errno != EEXIST) return sys_error(errno, "mkdir {}", (to_path_ / id).string());
      EB_TRY(remove_tree(to_path_ / id));
      if (::mkdirat(to_.get(), id.c_str(), 0755) != 0)
        return sys_error(errno, "mkdir {}", (to_path_ / id).string());
    }
    // Its files are linked as "<id>/<name>" relative to runs/ (held open, and locked by the
    // merge): no open of the directory just made.
    if (auto linked = link_tree(std::move(src), to_.get(), id, from_path_ / id, copy_, out);
        !linked)
      return std::unexpected(std::move(linked).error().with_context(
          fmt::format("bring {} into {}", (from_path_ / id).string(), (to_path_ / id).string())));
    return true;
  }

 private:
  run_dirs(unique_fd from, unique_fd to, fs::path from_path, fs::path to_path, bool copy)
      : from_(std::move(from)),
        to_(std::move(to)),
        from_path_(std::move(from_path)),
        to_path_(std::move(to_path)),
        copy_(copy) {}
  unique_fd from_, to_;
  fs::path from_path_, to_path_;
  bool copy_;
};

// Calls work(i) for every i < n, on as many threads as there are CPUs (this one included).
void for_each_in_parallel(size_t n, const std::function<void(size_t)>& work) {
  const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < n;) work(i);
  };
  std::vector<std::thread> others;
  for (size_t t = 1; t < threads; ++t) others.emplace_back(worker);
  worker();
  for (auto& t : others) t.join();
}

// The passes of merge_shards, in the order it runs them.

// Every input a results directory of one plan and one split, the output's earlier merge (if
// any) first, then the shards in the order given.
result<std::vector<source>> open_sources(const merge_options& options) {
  if (options.shards.empty())
    return make_error(error_kind::invalid_argument, "no shard directory given");
  for (const auto& dir : options.shards)
    if (same_dir(dir, options.into))
      return make_error(error_kind::invalid_argument,
                        "{} is both a shard and --into: merge into another directory",
                        dir.string());
  std::vector<source> sources;
  auto output = EB_TRY(open_output(options.into));
  if (output) sources.push_back(std::move(*output));
  for (const auto& dir : options.shards) sources.push_back(EB_TRY(open_shard(dir)));
  const source& first = sources.front();
  for (const auto& s : sources) {
    if (s.plan.matrix_digest() != first.plan.matrix_digest())
      return make_error(error_kind::invalid_argument,
                        "{} and {} are of different plans ({}): merge only the shards of one "
                        "suite, fixture set and candidate set",
                        first.dir.string(), s.dir.string(), plan_differences(first.plan, s.plan));
    if (s.plan.shard_count != first.plan.shard_count)
      return make_error(error_kind::invalid_argument,
                        "{} is a shard of {} but {} of {}: merge shards of one split (the same "
                        "N)",
                        first.dir.string(), first.plan.shard_count, s.dir.string(),
                        s.plan.shard_count);
  }
  return sources;
}

// The output's plan: the inputs' plan, as the merge of every shard they hold.
plan_identity merged_plan(const std::vector<source>& sources) {
  plan_identity plan = sources.front().plan;
  plan.shard_index = 0;
  std::set<int> merged;
  for (const auto& s : sources) merged.insert(s.shards.begin(), s.shards.end());
  plan.merged.assign(merged.begin(), merged.end());
  return plan;
}

// The plan's runs in plan order (a run's position names it in every later pass), and their
// positions by run id.
class plan_runs {
 public:
  explicit plan_runs(const plan_identity& plan) {
    const std::vector<matrix_run> matrix = matrix_runs(plan);
    runs_.reserve(matrix.size());
    for (const auto& r : matrix)
      runs_.push_back({*id_number(r.run_id), r.fixture, r.candidate, r.trial, r.shard});
    by_id_.resize(runs_.size());
    for (uint32_t i = 0; i < by_id_.size(); ++i) by_id_[i] = i;
    std::sort(by_id_.begin(), by_id_.end(),
              [&](uint32_t a, uint32_t b) { return runs_[a].id < runs_[b].id; });
  }

  [[nodiscard]] size_t size() const { return runs_.size(); }
  const planned_run& operator[](uint32_t pos) const { return runs_[pos]; }

  // The position of the run `run_id` names; nullopt when it is no run of the plan.
  [[nodiscard]] std::optional<uint32_t> position_of(std::string_view run_id) const {
    const std::optional<uint64_t> id = id_number(run_id);
    if (!id) return std::nullopt;
    auto it = std::lower_bound(by_id_.begin(), by_id_.end(), *id,
                               [&](uint32_t p, uint64_t v) { return runs_[p].id < v; });
    if (it == by_id_.end() || runs_[*it].id != *id) return std::nullopt;
    return *it;
  }

 private:
  std::vector<planned_run> runs_;  // plan order
  std::vector<uint32_t> by_id_;    // positions in runs_, by run id
};

// What one source holds of the plan: its records of planned runs in file order (a rerun's
// older records included), how many records were of no run of the plan, and how reading ended.
struct scanned {
  std::vector<std::pair<uint32_t, slot>> seen;
  uint64_t foreign = 0;
  status walked;
};

// Each source's results.jsonl, on as many threads as there are CPUs (the lexing is most of a
// merge's CPU time): per record of a planned run, only where its line lies and its digest.
std::vector<scanned> scan_sources(const std::vector<source>& sources, const plan_runs& plan) {
  std::vector<scanned> scans(sources.size());
  for_each_in_parallel(sources.size(), [&](size_t i) {
    const auto si = static_cast<uint32_t>(i);
    scanned& sc = scans[si];
    sc.walked = for_each_line(sources[si].dir / "results.jsonl",
                              [&](std::string_view line, record_location where) -> status {
                                const std::optional<std::string> run_id = record_run_id(line);
                                if (!run_id) return {};
                                const std::optional<uint32_t> pos = plan.position_of(*run_id);
                                if (!pos) {
                                  ++sc.foreign;
                                  return {};
                                }
                                sc.seen.emplace_back(*pos, slot{si, where, digest_of(line)});
                                return {};
                              });
  });
  return scans;
}

// The record each planned run is taken from (slot::none: no input records it), by position in
// the plan. Each source's newest record of a run stands for it; across sources, in their order,
// the same record again is a duplicate and a different one a conflict.
result<std::vector<slot>> choose_records(const std::vector<source>& sources,
                                         std::vector<scanned> scans, const plan_runs& plan,
                                         merge_report& out) {
  std::vector<slot> slots(plan.size());
  for (uint32_t si = 0; si < sources.size(); ++si) {
    const source& s = sources[si];
    if (!scans[si].walked)
      return std::unexpected(std::move(scans[si].walked)
                                 .error()
                                 .with_context(fmt::format(
                                     "{} {}", s.is_output ? "--into" : "shard", s.dir.string())));
    out.foreign += scans[si].foreign;
    std::vector<std::pair<uint32_t, slot>> seen = std::move(scans[si].seen);
    std::stable_sort(seen.begin(), seen.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < seen.size(); ++i) {
      if (i + 1 < seen.size() && seen[i + 1].first == seen[i].first) {
        ++out.superseded;  // a rerun's newer record of the same run follows in the file
        continue;
      }
      const auto& [pos, mine] = seen[i];
      slot& taken = slots[pos];
      if (taken.source == slot::none) {
        taken = mine;
        continue;
      }
      const source& a = sources[taken.source];
      if (taken.digest == mine.digest || EB_TRY(same_content(a, taken, s, mine))) {
        ++out.duplicates;
        continue;
      }
      // The same run graded again on one side (evalbox regrade): the output's regrade stays;
      // a shard's regrade of a run the output holds as first graded is brought (its line is
      // appended: the newest record of a run is the one reports take).
      if (a.is_output && !s.is_output) {
        const bool out_regraded = EB_TRY(is_regrade(a, taken));
        const bool shard_regraded = EB_TRY(is_regrade(s, mine));
        if (out_regraded && !shard_regraded) {
          ++out.duplicates;
          continue;
        }
        if (shard_regraded && !out_regraded) {
          taken = mine;
          continue;
        }
      }
      return make_error(
          error_kind::invalid_argument,
          "two different records of run {}: {}:{} and {}:{}; a run is recorded once, so one of "
          "them is from a rerun (--no-resume) or another attempt at the same shard: remove the "
          "line you do not want (and its runs/{:016x} directory), then merge again",
          run_name(out.plan, plan[pos]), (a.dir / "results.jsonl").string(),
          line_at(a.dir / "results.jsonl", taken.where.offset), (s.dir / "results.jsonl").string(),
          line_at(s.dir / "results.jsonl", mine.where.offset), plan[pos].id);
    }
  }
  return slots;
}

// The planned runs that no input records, by shard (out.gaps, out.missing, out.recorded).
void find_gaps(const std::vector<source>& sources, const plan_runs& plan,
               const std::vector<slot>& slots, merge_report& out) {
  std::map<int, shard_gap> gaps;
  for (uint32_t pos = 0; pos < plan.size(); ++pos) {
    const planned_run& r = plan[pos];
    shard_gap& g = gaps[r.shard];
    g.shard = r.shard;
    ++g.planned;
    if (slots[pos].source != slot::none) continue;
    if (g.missing++ < shard_gap::listed) g.first_missing.push_back(run_name(out.plan, r));
  }
  for (auto& [k, g] : gaps) {
    out.missing += g.missing;
    if (g.missing == 0) continue;
    for (const auto& s : sources)
      if (std::find(s.shards.begin(), s.shards.end(), k) != s.shards.end()) g.dirs.push_back(s.dir);
    out.gaps.push_back(std::move(g));
  }
  out.recorded = out.planned - out.missing;
}

// The lines of the runs a merge brings, one at a time, from their sources: they are asked for
// in the order of each source's file, so they are read a megabyte at a time, not a line at a
// time.
class line_reader {
 public:
  line_reader(const std::vector<source>& sources, const std::vector<slot>& slots)
      : sources_(sources), slots_(slots) {}
  status read(uint32_t pos, std::string& line) {
    const slot& from = slots_[pos];
    const fs::path file = sources_[from.source].dir / "results.jsonl";
    if (from.source != open_) {
      fd_ = unique_fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd_) return sys_error(errno, "open {}", file.string());
      open_ = from.source;
      buf_.clear();
      buf_at_ = 0;
    }
    const uint64_t at = from.where.offset, size = from.where.size;
    if (at < buf_at_ || at + size > buf_at_ + buf_.size()) {
      buf_at_ = at;
      EB_TRY(read_line_at(fd_.get(), file, {at, std::max<uint64_t>(size, 1u << 20)}, buf_,
                          /*short_ok=*/true));
      if (buf_.size() < size)
        return make_error(error_kind::io, "{}: the record at byte {} changed while merging",
                          file.string(), at);
    }
    line.assign(buf_, static_cast<size_t>(at - buf_at_), static_cast<size_t>(size));
    return {};
  }

 private:
  const std::vector<source>& sources_;
  const std::vector<slot>& slots_;
  unique_fd fd_;
  uint32_t open_ = slot::none;
  std::string buf_;
  uint64_t buf_at_ = 0;  // file offset of buf_[0]
};

// Pass 2, the output (merge.h): its own steps in order in write(). Two workers share what a
// class holds: a thread brings each run's directory and then appends its line, while the
// caller's indexes the same lines and renders the reports aside; each stops when the other
// fails.
class output_writer {
 public:
  output_writer(const merge_options& options, const std::vector<source>& sources,
                const plan_runs& plan, const std::vector<slot>& slots, merge_report& out)
      : into_(options.into),
        copy_(options.copy),
        sources_(sources),
        plan_(plan),
        slots_(slots),
        out_(out),
        target_(options.into),
        staging_(options.into / ".merge-reports") {}

  status write() {
    // Before anything is written: one merge at a time writes a directory.
    EB_TRY(lock_output());
    // A torn last line of a merge killed mid-append would swallow the next line appended.
    EB_TRY(open_results());
    // A first merge says which shards the directory is the merge of before it adds anything, so
    // that a merge killed midway is a directory evalbox merge finishes when run again.
    if (!sources_.front().is_output) EB_TRY(write_plan(into_, out_.plan));
    // Each source's runs in the order of its file: its lines are read forward, in large reads.
    order_ = runs_to_bring();
    // The reports' index starts with what the output holds; the lines appended join it as they
    // are read, lexed once more here rather than a third time from the merged file.
    EB_TRY(index_output());
    // Bringing the runs is the kernel's work and rendering the reports the CPU's: they overlap.
    stats::summary summary = EB_TRY(bring_and_report());
    out_.added = brought_.added;
    out_.linked = brought_.linked;
    out_.copied = brought_.copied;
    out_.without_dir = brought_.without_dir;
    // The reports change only once every record is in, so they always describe a whole file.
    EB_TRY(put_reports_in_place());
    // The entries made are durable before plan.json names every shard merged: a merge killed
    // before this point is finished by merging again.
    if (::fsync(lock_.get()) != 0) return sys_error(errno, "fsync {}", into_.string());
    EB_TRY(write_plan(into_, out_.plan));
    out_.written = true;
    out_.summary = std::move(summary);
    return {};
  }

 private:
  // The output's runs/ made, and the output locked against a second merge for as long as this
  // one writes (the lock goes with the descriptor).
  status lock_output() {
    EB_TRY(make_dirs(into_ / "runs"));
    lock_ = unique_fd(::open(into_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!lock_) return sys_error(errno, "open {}", into_.string());
    if (::flock(lock_.get(), LOCK_EX | LOCK_NB) != 0)
      return errno == EWOULDBLOCK
                 ? make_error(error_kind::busy, "{}: another evalbox merge is writing it",
                              into_.string())
                 : sys_error(errno, "flock {}", into_.string());
    return {};
  }

  // The output's results.jsonl open for appending, ending with a complete line; base_ is its
  // size, where the first line appended will lie.
  status open_results() {
    const fs::path file = target_.results_file();
    results_fd_ = unique_fd(::open(file.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
    if (!results_fd_) return sys_error(errno, "open {}", file.string());
    EB_TRY(drop_torn_tail(results_fd_.get(), file));
    const off_t end = ::lseek(results_fd_.get(), 0, SEEK_END);
    if (end < 0) return sys_error(errno, "lseek {}", file.string());
    base_ = static_cast<uint64_t>(end);
    return {};
  }

  // Whether the run at `pos` is brought by this merge: recorded by a shard, not already in the
  // output.
  [[nodiscard]] bool brought(uint32_t pos) const {
    const slot& s = slots_[pos];
    return s.source != slot::none && !sources_[s.source].is_output;
  }

  // The runs this merge brings, by source and by where their lines lie in it.
  [[nodiscard]] std::vector<uint32_t> runs_to_bring() const {
    std::vector<uint32_t> order;
    for (uint32_t pos = 0; pos < slots_.size(); ++pos)
      if (brought(pos)) order.push_back(pos);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return std::pair(slots_[a].source, slots_[a].where.offset) <
             std::pair(slots_[b].source, slots_[b].where.offset);
    });
    return order;
  }

  // The reports' index, of what the output already holds.
  status index_output() {
    index_.emplace(target_.results_file());
    if (base_ == 0) return {};
    auto add = [&](const json& record, record_location where) {
      return index_->add(record, where);
    };
    return target_.for_each_record(report_fields(), add);
  }

  // The two workers, run to their end; the summary the reports were rendered from. On failure,
  // the first cause: the writer's own, else the reports' (which stopped the writer).
  result<stats::summary> bring_and_report() {
    writer_ = std::thread([this] {
      appended_ = append_runs();
      if (!appended_) stop_ = true;
    });
    result<stats::summary> reported = render_reports();
    if (!reported) stop_ = true;
    if (writer_.joinable()) writer_.join();
    if (!appended_ || !reported) {
      (void)remove_tree(staging_);
      const bool writer_stopped = !appended_ && appended_.error().kind == error_kind::cancelled;
      if (!appended_ && !writer_stopped) return std::unexpected(std::move(appended_).error());
      if (!reported) return std::unexpected(std::move(reported).error().with_context("reports"));
      return std::unexpected(std::move(appended_).error());
    }
    return reported;
  }

  // The writer's thread: each run's directory brought (the kernel's share: a mkdir and a link
  // per file), then its line appended, so that a directory is complete before its record.
  status append_runs() {
    appender append(std::move(results_fd_), target_.results_file());
    line_reader lines(sources_, slots_);
    std::string line;
    std::optional<run_dirs> dirs;
    uint32_t open_source = slot::none;
    for (uint32_t pos : order_) {
      if (stop_.load(std::memory_order_relaxed))
        return make_error(error_kind::cancelled, "stopped: the reports failed");
      const slot& from = slots_[pos];
      if (from.source != open_source) {
        const source& s = sources_[from.source];
        dirs = EB_TRY(run_dirs::open(s.dir / "runs", into_ / "runs", copy_));
        open_source = from.source;
        // Before the first of its runs is recorded: a run's final state is whole once its
        // line is there.
        if (!s.is_output && objects_from_.insert(from.source).second)
          EB_TRY(bring_objects(s.dir, into_, copy_, brought_));
      }
      EB_TRY(lines.read(pos, line));
      if (!EB_TRY(dirs->bring(fmt::format("{:016x}", plan_[pos].id), brought_)))
        ++brought_.without_dir;
      ++brought_.added;
      EB_TRY(append.add(line));
    }
    return append.finish();
  }

  // This thread: the lines appended indexed at the places they will have in the output, then
  // every report rendered into the staging directory, reading the runs' files from the inputs
  // they are being brought from (the same files).
  result<stats::summary> render_reports() {
    line_reader lines(sources_, slots_);
    std::string line;
    uint64_t offset = base_;
    for (uint32_t pos : order_) {
      if (stop_.load(std::memory_order_relaxed)) return stats::summary{};  // the writer failed
      EB_TRY(lines.read(pos, line));
      EB_TRY(index_->add_line(line, {offset, line.size()}));
      offset += line.size() + 1;
    }
    auto runs = EB_TRY(std::move(*index_).finish());
    // Without the fields set aside, the renderers read the records back from results.jsonl:
    // only once it is complete.
    if (!runs.reads_aside()) writer_.join();
    auto s = EB_TRY(summarize_runs(runs, out_.plan.baseline));
    if (out_.missing > 0) s.missing = stats::missing_runs{out_.planned, out_.missing};
    (void)remove_tree(staging_);
    EB_TRY(make_dirs(staging_));
    html_options html;
    html.run_dir = [this](const std::string& id) { return run_dir_for_reports(id); };
    EB_TRY(write_reports(staging_, s, runs, out_.plan.suite, all_report_formats, html));
    return s;
  }

  // Where the reports read a run's files while the merge brings them: from its source.
  [[nodiscard]] fs::path run_dir_for_reports(const std::string& id) const {
    const std::optional<uint32_t> pos = plan_.position_of(id);
    if (pos && brought(*pos)) return sources_[slots_[*pos].source].dir / "runs" / id;
    return into_ / "runs" / id;
  }

  // Each report renamed over the output's: a reader sees the old report or the new, whole.
  status put_reports_in_place() {
    for (report_format f : all_report_formats) {
      const fs::path from = staging_ / report_file_name(f), to = into_ / report_file_name(f);
      if (::rename(from.c_str(), to.c_str()) != 0)
        return sys_error(errno, "rename {} -> {}", from.string(), to.string());
    }
    (void)::rmdir(staging_.c_str());
    return {};
  }

  const fs::path into_;
  const bool copy_;
  const std::vector<source>& sources_;
  const plan_runs& plan_;
  const std::vector<slot>& slots_;
  merge_report& out_;
  const results_dir target_;
  const fs::path staging_;  // the reports, rendered aside until every record is appended

  unique_fd lock_;                   // holds the output's flock
  unique_fd results_fd_;             // the output's results.jsonl; the writer's once it starts
  uint64_t base_ = 0;                // the output's results.jsonl before this merge appends
  std::vector<uint32_t> order_;      // runs_to_bring()
  std::set<uint32_t> objects_from_;  // sources whose final-state objects were brought
  std::optional<run_index::incremental> index_;
  // Shared by the two workers: the writer's thread, what it brought, how it ended, and the
  // flag either sets to stop the other.
  std::thread writer_;
  merge_report brought_;
  status appended_;
  std::atomic<bool> stop_{false};
};

}  // namespace

result<merge_report> merge_shards(const merge_options& options) {
  // Check the sources: every input is a results directory of one plan and one split, or the
  // merge is refused before a record is read.
  const std::vector<source> sources = EB_TRY(open_sources(options));
  merge_report out;
  out.plan = merged_plan(sources);
  // Index the plan: a record is placed by its run id, and each run costs a few bytes (merge.h).
  const plan_runs plan(out.plan);
  out.planned = plan.size();
  // Scan, then choose: every input read to its end before they are compared, so that a
  // conflict stops the merge before anything is written.
  const std::vector<slot> slots =
      EB_TRY(choose_records(sources, scan_sources(sources, plan), plan, out));
  // Find the gaps: without `partial`, runs missing stop the merge here, naming them.
  find_gaps(sources, plan, slots, out);
  if (out.missing > 0 && !options.partial) return out;
  // Write: runs brought and appended, reports put in place once every record is.
  output_writer writer(options, sources, plan, slots, out);
  EB_TRY(writer.write());
  return out;
}

}  // namespace evalbox::harness::scale
