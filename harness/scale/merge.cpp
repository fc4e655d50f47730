// Joining shard results directories (see merge.h for the theory of operation).
#include "harness/scale/merge.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <set>
#include <system_error>
#include <unordered_map>

#include <fmt/ranges.h>

#include "harness/results/results.h"
#include "sandbox/base/digest.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"
#include "sandbox/base/unique_fd.h"

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

// 128 bits of SHA-256 over a record's canonical form: equal content, equal digest.
struct content_digest {
  uint64_t hi = 0, lo = 0;
  bool operator==(const content_digest&) const = default;
};

content_digest digest_of(const json& record) {
  std::string hex = sha256_hex(canonical_json(record));
  content_digest d;
  std::from_chars(hex.data(), hex.data() + 16, d.hi, 16);
  std::from_chars(hex.data() + 16, hex.data() + 32, d.lo, 16);
  return d;
}

// One directory records are taken from: a shard, or the output's earlier merge.
struct source {
  fs::path dir;
  plan_identity plan;
  std::vector<int> shards;  // the shards (K) whose runs it holds
  bool is_output = false;
};

struct entry {
  uint32_t source = 0;
  record_location where;
  content_digest digest;
};

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

std::string run_name(const plan_identity& p, const matrix_run& r) {
  return fmt::format("{}/{}#{} ({})", p.fixtures[r.fixture].id, p.candidates[r.candidate].id,
                     r.trial, r.run_id);
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

// A run's directory, brought into the output: hard links where the filesystem allows (a
// recorded run's files are never written again: a rerun replaces its directory with new
// files), copies where it does not; symlinks as symlinks, never followed.
status bring_run_dir(const fs::path& from, const fs::path& to, merge_report& out) {
  std::error_code ec;
  fs::path tmp =
      to.parent_path() / fmt::format(".{}.merge-{}", to.filename().string(), random_suffix());
  auto fail = [&](std::string what) -> status {
    (void)remove_tree(tmp);
    return sys_error(ec.value(), "{} ({} -> {})", what, from.string(), to.string());
  };
  fs::create_directory(tmp, ec);
  if (ec) return fail("create directory");
  for (auto it = fs::recursive_directory_iterator(from, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path target = tmp / fs::relative(it->path(), from, ec);
    if (ec) break;
    auto st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_symlink(st)) {
      fs::copy_symlink(it->path(), target, ec);
    } else if (fs::is_directory(st)) {
      fs::create_directory(target, ec);
    } else if (fs::is_regular_file(st)) {
      fs::create_hard_link(it->path(), target, ec);
      if (!ec) {
        ++out.linked;
      } else {
        // EXDEV (another filesystem), EPERM (protected_hardlinks), EMLINK: copy instead.
        ec.clear();
        fs::copy_file(it->path(), target, ec);
        if (!ec) ++out.copied;
      }
    }  // sockets, fifos and devices are not results: left out
    if (ec) break;
  }
  if (ec) return fail("bring run directory");
  (void)remove_tree(to);  // a directory a killed merge brought without appending its record
  if (::rename(tmp.c_str(), to.c_str()) != 0) {
    ec.assign(errno, std::generic_category());
    return fail("rename");
  }
  return {};
}

}  // namespace

result<merge_report> merge_shards(const merge_options& options) {
  if (options.shards.empty())
    return make_error(error_kind::invalid_argument, "no shard directory given");
  // ---- inputs: every one a results directory of the same plan ----
  for (const auto& dir : options.shards)
    if (same_dir(dir, options.into))
      return make_error(error_kind::invalid_argument,
                        "{} is both a shard and --into: merge into another directory",
                        dir.string());
  std::vector<source> sources;
  auto output = EB_TRY(open_output(options.into));
  if (output) sources.push_back(std::move(*output));
  const bool had_output = !sources.empty();
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

  merge_report out;
  out.plan = first.plan;
  out.plan.shard_index = 0;
  std::set<int> merged;
  for (const auto& s : sources) merged.insert(s.shards.begin(), s.shards.end());
  out.plan.merged.assign(merged.begin(), merged.end());

  // ---- the plan's runs, by id ----
  const std::vector<matrix_run> matrix = matrix_runs(out.plan);
  std::vector<std::pair<uint64_t, uint32_t>> planned;  // id → index into `matrix`, sorted
  planned.reserve(matrix.size());
  for (size_t i = 0; i < matrix.size(); ++i)
    planned.emplace_back(*id_number(matrix[i].run_id), static_cast<uint32_t>(i));
  std::sort(planned.begin(), planned.end());
  auto planned_index = [&](uint64_t id) -> std::optional<uint32_t> {
    auto it = std::lower_bound(planned.begin(), planned.end(), std::make_pair(id, uint32_t{0}));
    if (it == planned.end() || it->first != id) return std::nullopt;
    return it->second;
  };
  out.planned = matrix.size();

  // ---- pass 1: index every source; one record per run id across them ----
  std::unordered_map<uint64_t, entry> recorded;
  recorded.reserve(matrix.size());
  for (uint32_t si = 0; si < sources.size(); ++si) {
    const source& s = sources[si];
    std::unordered_map<uint64_t, entry> newest;  // this source's newest record of each run
    results_dir dir(s.dir);
    auto walked = dir.for_each_record([&](const json& record, record_location where) -> status {
      auto rid = record.find("run_id");
      std::optional<uint64_t> id;
      if (rid != record.end() && rid->is_string())
        id = id_number(rid->get_ref<const std::string&>());
      if (!id || !planned_index(*id)) {
        ++out.foreign;
        return {};
      }
      auto [it, inserted] = newest.try_emplace(*id, entry{si, where, digest_of(record)});
      if (!inserted) {
        ++out.superseded;
        it->second = entry{si, where, digest_of(record)};
      }
      return {};
    });
    if (!walked)
      return std::unexpected(std::move(walked).error().with_context(
          fmt::format("{} {}", s.is_output ? "--into" : "shard", s.dir.string())));
    for (const auto& [id, e] : newest) {
      auto [it, inserted] = recorded.try_emplace(id, e);
      if (inserted) continue;
      if (it->second.digest == e.digest) {
        ++out.duplicates;
        continue;
      }
      const source& a = sources[it->second.source];
      const matrix_run& r = matrix[*planned_index(id)];
      return make_error(
          error_kind::invalid_argument,
          "two different records of run {}: {}:{} and {}:{}; a run is recorded once, so one of "
          "them is from a rerun (--no-resume) or another attempt at the same shard: remove the "
          "line you do not want (and its runs/{} directory), then merge again",
          run_name(out.plan, r), (a.dir / "results.jsonl").string(),
          line_at(a.dir / "results.jsonl", it->second.where.offset),
          (s.dir / "results.jsonl").string(), line_at(s.dir / "results.jsonl", e.where.offset),
          r.run_id);
    }
  }

  // ---- what is missing, by shard ----
  std::map<int, shard_gap> gaps;
  for (const auto& r : matrix) {
    shard_gap& g = gaps[r.shard];
    g.shard = r.shard;
    ++g.planned;
    if (!recorded.contains(*id_number(r.run_id))) g.missing.push_back(run_name(out.plan, r));
  }
  for (auto& [k, g] : gaps) {
    out.missing += g.missing.size();
    if (g.missing.empty()) continue;
    for (const auto& s : sources)
      if (std::find(s.shards.begin(), s.shards.end(), k) != s.shards.end()) g.dirs.push_back(s.dir);
    out.gaps.push_back(std::move(g));
  }
  out.recorded = out.planned - out.missing;
  if (out.missing > 0 && !options.partial) return out;

  // ---- pass 2: write ----
  const fs::path into = options.into;
  EB_TRY(make_dirs(into / "runs"));
  unique_fd lock(::open(into.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!lock) return sys_error(errno, "open {}", into.string());
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK
               ? make_error(error_kind::busy, "{}: another evalbox merge is writing it",
                            into.string())
               : sys_error(errno, "flock {}", into.string());
  results_dir target(into);
  unique_fd results_fd(
      ::open(target.results_file().c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!results_fd) return sys_error(errno, "open {}", target.results_file().string());
  EB_TRY(drop_torn_tail(results_fd.get(), target.results_file()));
  appender append(std::move(results_fd), target.results_file());
  for (uint32_t si = had_output ? 1 : 0; si < sources.size(); ++si) {
    const source& s = sources[si];
    auto walked = results_dir(s.dir).for_each_record(
        [&](const json& record, record_location where) -> status {
          auto rid = record.find("run_id");
          if (rid == record.end() || !rid->is_string()) return {};
          const std::string& run_id = rid->get_ref<const std::string&>();
          auto id = id_number(run_id);
          if (!id) return {};
          auto it = recorded.find(*id);
          if (it == recorded.end() || it->second.source != si ||
              it->second.where.offset != where.offset)
            return {};  // superseded, foreign, or recorded by an earlier source
          std::error_code ec;
          const fs::path from = s.dir / "runs" / run_id;
          if (fs::is_directory(fs::symlink_status(from, ec)))
            EB_TRY(bring_run_dir(from, target.run_dir(run_id), out));
          else
            ++out.without_dir;
          ++out.added;
          return append.add(canonical_json(record));
        });
    if (!walked)
      return std::unexpected(
          std::move(walked).error().with_context(fmt::format("merge {}", s.dir.string())));
  }
  EB_TRY(append.finish());
  EB_TRY(write_plan(into, out.plan));
  out.written = true;

  // ---- reports, from the merged results.jsonl alone ----
  auto index = EB_TRY(run_index::of_results(target));
  auto s = EB_TRY(summarize_runs(index, out.plan.baseline));
  if (out.missing > 0) s.missing = stats::missing_runs{out.planned, out.missing};
  EB_TRY_CTX(write_reports(into, s, index, out.plan.suite), "reports");
  out.summary = std::move(s);
  return out;
}

}  // namespace evalbox::harness::scale
