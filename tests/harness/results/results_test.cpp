// results.jsonl is scanned one line at a time (an empty file, a torn last line, lines that are
// not JSON, a line longer than many reads, CRLF), and read one record at a time: which lines
// count as records (a torn last line, blank lines and other schemas do not), the location each
// record is reported with, and reading a record back by that location.
#include "harness/results/results.h"
#include "base/json.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/fs.h"
#include "base/json_checks.h"

namespace evalbox::harness {
namespace {

json run(const std::string& id, std::string detail = "") {
  return {{"schema", "evalbox.run.v1"},
          {"run_id", id},
          {"grading", {{"checks", {{{"id", "c"}, {"detail", std::move(detail)}}}}}}};
}

std::string line(const json& j) { return canonical_json(j) + "\n"; }

// As the runner records a run: its directory first, then run.json and the line.
status record(const results_dir& dir, const json& r) {
  EB_TRY(make_dirs(dir.run_dir(r["run_id"])));
  return dir.record(r);
}

struct visited {
  std::vector<std::string> ids;
  std::vector<record_location> where;
};

visited walk(const results_dir& dir) {
  visited v;
  auto s = dir.for_each_record([&](const json& r, record_location where) -> status {
    v.ids.push_back(r.value("run_id", ""));
    v.where.push_back(where);
    return {};
  });
  EXPECT_TRUE(s) << s.error().message;
  return v;
}

// A line nested too deep to copy (found by fuzzing: a stack overflow in every report) is not a
// record; the records around it still are.
TEST(ResultsRecords, SkipsALineNestedTooDeep) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path());
  std::string deep = R"({"schema":"evalbox.run.v1","run_id":"deep","x":)" +
                     std::string(100000, '[') + std::string(100000, ']') + "}\n";
  ASSERT_TRUE(write_file(dir.results_file(), line(run("a")) + deep + line(run("b"))));
  EXPECT_EQ(walk(dir).ids, (std::vector<std::string>{"a", "b"}));
}

TEST(ResultsRecords, SkipsBlankForeignAndTornLines) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path());
  std::string text = line(run("a")) + "\n" + "not json\n" +
                     line({{"schema", "evalbox.run.v2"}, {"run_id", "x"}}) + "[1, 2]\n" +
                     line({{"schema", 7}, {"run_id", "y"}}) + line(run("b"));
  text += line(run("torn")).substr(0, 20);  // a crash mid-append
  ASSERT_TRUE(write_file(dir.results_file(), text));
  EXPECT_EQ(walk(dir).ids, (std::vector<std::string>{"a", "b"}));
  auto all = dir.read_records();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1]["run_id"], "b");
  auto ids = dir.recorded_ids();
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::set<std::string>{"a", "b"}));
}

TEST(ResultsRecords, AMissingFileHasNoRecords) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path() / "nothing-here");
  EXPECT_TRUE(walk(dir).ids.empty());
  auto all = dir.read_records();
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
}

TEST(ResultsRecords, LocationsReadTheSameRecordBack) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path());
  ASSERT_TRUE(dir.create());
  // Records longer than the reader's 64 KiB chunks, and lines that straddle chunk boundaries.
  std::vector<json> written;
  for (int i = 0; i < 40; ++i) {
    written.push_back(
        run(fmt::format("run-{:02}", i),
            std::string(i % 7 == 3 ? 150000 : 3000 + i, static_cast<char>('a' + i % 26))));
    ASSERT_TRUE(record(dir, written.back()));
  }
  visited v = walk(dir);
  ASSERT_EQ(v.ids.size(), written.size());
  auto reader = record_reader::open(dir.results_file());
  ASSERT_TRUE(reader) << reader.error().message;
  // Backwards, as a report that sorts runs would.
  for (size_t i = written.size(); i-- > 0;) {
    EXPECT_EQ(v.ids[i], written[i]["run_id"]);
    EXPECT_EQ(v.where[i].size + 1, line(written[i]).size());
    auto back = reader->read(v.where[i]);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, written[i]);
  }
  // Appending more does not move the records already located.
  ASSERT_TRUE(record(dir, run("later")));
  auto again = reader->read(v.where[5]);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, written[5]);
}

TEST(ResultsRecords, ALocationThatHoldsNoRecordIsAnError) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path());
  ASSERT_TRUE(write_file(dir.results_file(), line(run("a")) + "not json\n"));
  auto reader = record_reader::open(dir.results_file());
  ASSERT_TRUE(reader);
  uint64_t second = line(run("a")).size();
  EXPECT_FALSE(reader->read({second, 8}));         // garbage
  EXPECT_FALSE(reader->read({second + 100, 10}));  // past the end
  EXPECT_TRUE(reader->read({0, second - 1}));
}

TEST(ResultsRecords, AFailedVisitStopsTheWalk) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path());
  ASSERT_TRUE(write_file(dir.results_file(), line(run("a")) + line(run("b")) + line(run("c"))));
  int seen = 0;
  auto s = dir.for_each_record([&](const json&, record_location) -> status {
    if (++seen == 2) return make_error(error_kind::io, "stop here");
    return {};
  });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "stop here");
  EXPECT_EQ(seen, 2);
}

// ---- the scanner under every reader: each complete line, and where it lies ----

struct scanned_lines {
  std::vector<std::string> lines;
  std::vector<record_location> where;
};

scanned_lines scan(const std::filesystem::path& file) {
  scanned_lines got;
  auto s = for_each_line(file, [&](std::string_view l, record_location where) -> status {
    got.lines.emplace_back(l);
    got.where.push_back(where);
    return {};
  });
  EXPECT_TRUE(s) << s.error().message;
  return got;
}

// Each location names its line's bytes in the file, its newline excluded.
void expect_locations_hold_the_lines(const std::string& text, const scanned_lines& got) {
  ASSERT_EQ(got.lines.size(), got.where.size());
  for (size_t i = 0; i < got.lines.size(); ++i) {
    EXPECT_EQ(text.substr(got.where[i].offset, got.where[i].size), got.lines[i]) << i;
    EXPECT_EQ(text[got.where[i].offset + got.where[i].size], '\n') << i;
  }
}

TEST(ResultsLines, AnEmptyOrMissingFileHasNoLines) {
  evalbox::temp_dir tmp;
  ASSERT_TRUE(write_file(tmp.path() / "empty.jsonl", ""));
  EXPECT_TRUE(scan(tmp.path() / "empty.jsonl").lines.empty());
  EXPECT_TRUE(scan(tmp.path() / "missing.jsonl").lines.empty());
  EXPECT_TRUE(results_dir(tmp.path()).for_each_record([](const json&, record_location) {
    ADD_FAILURE() << "no record in an empty file";
    return status{};
  }));
}

// A line is handed over whatever it holds: which lines are records is for the parsers to say.
TEST(ResultsLines, BlankAndNonJsonLinesAreLinesToo) {
  evalbox::temp_dir tmp;
  const auto file = tmp.path() / "results.jsonl";
  const std::string text = line(run("a")) + "\n" + "not json\n" + "{\"schema\":\n" + line(run("b"));
  ASSERT_TRUE(write_file(file, text));
  scanned_lines got = scan(file);
  EXPECT_EQ(got.lines, (std::vector<std::string>{canonical_json(run("a")), "", "not json",
                                                 "{\"schema\":", canonical_json(run("b"))}));
  expect_locations_hold_the_lines(text, got);
}

// A crash mid-append leaves a last line without its newline: it is no line, however long, and
// a file that holds nothing else has none.
TEST(ResultsLines, ATornLastLineIsNotHandedOver) {
  evalbox::temp_dir tmp;
  const auto file = tmp.path() / "results.jsonl";
  ASSERT_TRUE(write_file(file, line(run("torn")).substr(0, 20)));
  EXPECT_TRUE(scan(file).lines.empty());
  const std::string torn = line(run("long", std::string(300000, 'x')));
  const std::string text = line(run("a")) + torn.substr(0, torn.size() - 1);
  ASSERT_TRUE(write_file(file, text));
  scanned_lines got = scan(file);
  EXPECT_EQ(got.lines, (std::vector<std::string>{canonical_json(run("a"))}));
  // The same line once its newline is written: whole.
  ASSERT_TRUE(write_file(file, text + "\n"));
  got = scan(file);
  ASSERT_EQ(got.lines.size(), 2u);
  EXPECT_EQ(got.lines[1], canonical_json(run("long", std::string(300000, 'x'))));
  expect_locations_hold_the_lines(text + "\n", got);
}

// There is no cap on a line's length: a line longer than many reads is handed over whole, and
// the lines after it are where they are.
TEST(ResultsLines, ALineLongerThanManyReadsIsHandedOverWhole) {
  evalbox::temp_dir tmp;
  const auto file = tmp.path() / "results.jsonl";
  const std::string long_line(3u << 20, 'y');
  const std::string text = "short\n" + long_line + "\n\nafter\n";
  ASSERT_TRUE(write_file(file, text));
  scanned_lines got = scan(file);
  ASSERT_EQ(got.lines.size(), 4u);
  EXPECT_EQ(got.lines[1].size(), long_line.size());
  EXPECT_EQ(got.lines[1], long_line);
  EXPECT_EQ(got.lines[3], "after");
  expect_locations_hold_the_lines(text, got);
}

// A line ended by CRLF (a file that went through a Windows editor) keeps its '\r', which JSON
// takes as whitespace: the record is read, and read back, as with LF alone.
TEST(ResultsLines, ACrlfLineKeepsItsCarriageReturnAndIsStillARecord) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path());
  const std::string crlf = canonical_json(run("a")) + "\r\n";
  const std::string text = crlf + line(run("b")) + "not json\r\n";
  ASSERT_TRUE(write_file(dir.results_file(), text));
  scanned_lines got = scan(dir.results_file());
  ASSERT_EQ(got.lines.size(), 3u);
  EXPECT_EQ(got.lines[0], canonical_json(run("a")) + "\r");
  expect_locations_hold_the_lines(text, got);
  visited v = walk(dir);
  EXPECT_EQ(v.ids, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(v.where.size(), 2u);
  EXPECT_EQ(v.where[0].size, crlf.size() - 1);
  auto reader = record_reader::open(dir.results_file());
  ASSERT_TRUE(reader);
  auto back = reader->read(v.where[0]);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, run("a"));
  EXPECT_EQ(record_run_id(got.lines[0]), "a");
  EXPECT_EQ(record_run_id(got.lines[2]), std::nullopt);
}

TEST(ResultsLines, AFailedVisitStopsTheScan) {
  evalbox::temp_dir tmp;
  const auto file = tmp.path() / "results.jsonl";
  ASSERT_TRUE(write_file(file, "a\nb\nc\n"));
  int seen = 0;
  auto s = for_each_line(file, [&](std::string_view, record_location) -> status {
    if (++seen == 2) return make_error(error_kind::io, "stop here");
    return {};
  });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "stop here");
  EXPECT_EQ(seen, 2);
}

TEST(ResultsLines, AnUnreadableFileIsAnError) {
  evalbox::temp_dir tmp;
  ASSERT_TRUE(make_dirs(tmp.path() / "results.jsonl"));  // a directory: open works, read fails
  auto s = for_each_line(tmp.path() / "results.jsonl",
                         [](std::string_view, record_location) { return status{}; });
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("results.jsonl"), std::string::npos) << s.error().message;
}

// ---- a record's run id, read without building the record ----

// record_run_id counts a line as a record exactly when parse_record does.
TEST(RecordRunId, IsARecordExactlyWhenParseRecordSaysSo) {
  auto nested = [](size_t depth) {
    return R"({"schema":"evalbox.run.v1","run_id":"n","x":)" + std::string(depth - 1, '[') +
           std::string(depth - 1, ']') + "}";
  };
  for (std::string text :
       {std::string(R"({"schema":"other.v1","run_id":"x"})"), std::string(R"({"run_id":"x"})"),
        std::string(R"([{"schema":"evalbox.run.v1"}])"), std::string("\"evalbox.run.v1\""),
        std::string(R"({"schema":"evalbox.run.v1","run_id":"x")"),           // torn
        std::string("{\"schema\":\"evalbox.run.v1\",\"run_id\":\"\xff\"}"),  // not UTF-8
        std::string(R"({"schema":"evalbox.run.v1"} trailing)"), std::string(), std::string(" "),
        std::string("not json"), std::string(R"({"schema":"evalbox.run.v1","schema":1})"),
        std::string(R"({"schema":1,"schema":"evalbox.run.v1","run_id":"y"})"),
        canonical_json(run("a")), nested(max_json_depth), nested(max_json_depth + 1)}) {
    EXPECT_EQ(record_run_id(text).has_value(), !parse_record(text).is_null()) << text;
  }
}

TEST(RecordRunId, IsTheLastTopLevelRunIdAndEmptyWhenNotAString) {
  EXPECT_EQ(record_run_id(canonical_json(run("a"))), "a");
  EXPECT_EQ(record_run_id(R"({"schema":"evalbox.run.v1","x":{"run_id":"inner"},"run_id":"b"})"),
            "b");
  EXPECT_EQ(record_run_id(R"({"schema":"evalbox.run.v1","run_id":"a","run_id":"b"})"), "b");
  EXPECT_EQ(record_run_id(R"({"schema":"evalbox.run.v1","run_id":"a","run_id":7})"), "");
  EXPECT_EQ(record_run_id(R"({"schema":"evalbox.run.v1"})"), "");
}

// ---- records parsed with only some of their fields ----

json parsed(std::string_view text, const record_fields& keep) { return parse_record(text, &keep); }

TEST(RecordFields, KeepsTheNamedFieldsAndDropsTheRest) {
  record_fields keep{"run_id", "grading.score", "grading.checks[].id"};
  json r = {{"schema", "evalbox.run.v1"},
            {"run_id", "r1"},
            {"agent", {{"mechanisms", {{"seccomp", true}}}}},
            {"grading",
             {{"score", 0.5},
              {"status", "completed"},
              {"checks", {{{"id", "a"}, {"detail", "x"}}, {{"id", "b"}, {"passed", true}}}}}}};
  json got = parsed(canonical_json(r), keep);
  // "schema" is always checked, not kept unless named.
  EXPECT_EQ(got, json({{"run_id", "r1"},
                       {"grading", {{"score", 0.5}, {"checks", {{{"id", "a"}}, {{"id", "b"}}}}}}}));
  // Without fields: the whole record.
  EXPECT_EQ(parse_record(canonical_json(r)), r);
}

// A hostile record's shapes: whatever a reader's type tests see on the whole record, they see
// on the kept fields.
TEST(RecordFields, UnexpectedShapesKeepTheirType) {
  record_fields keep{"execution.error", "grading.checks[].id", "usage.cost_usd"};
  json got = parsed(R"({"schema":"evalbox.run.v1","execution":{"error":{"deep":[1,2,{"x":1}]}},)"
                    R"("grading":{"checks":[1,"two",null,[3],{"id":4,"other":5}]},"usage":[1,2]})",
                    keep);
  EXPECT_TRUE(got["execution"]["error"].is_object());  // a leaf that is an object: empty
  EXPECT_TRUE(got["execution"]["error"].empty());
  EXPECT_EQ(got["grading"]["checks"], json::parse(R"([1,"two",null,[],{"id":4}])"));
  EXPECT_TRUE(got["usage"].is_array());  // an array where an object was expected: empty
  EXPECT_TRUE(got["usage"].empty());
  // A scalar where an object was expected is kept as it is.
  json scalar = parsed(R"({"schema":"evalbox.run.v1","execution":"boom","grading":7})", keep);
  EXPECT_EQ(scalar["execution"], "boom");
  EXPECT_EQ(scalar["grading"], 7);
}

TEST(RecordFields, ARepeatedKeyKeepsTheLastValueAsAFullParseDoes) {
  record_fields keep{"verdict", "grading.checks[].id"};
  std::string text =
      R"({"schema":"evalbox.run.v1","verdict":"failed","grading":{"checks":[{"id":"a"}]},)"
      R"("verdict":"passed","grading":{"checks":"none"}})";
  json full = parse_record(text);
  json got = parsed(text, keep);
  EXPECT_EQ(got["verdict"], full["verdict"]);
  EXPECT_EQ(got["grading"]["checks"], full["grading"]["checks"]);
  EXPECT_EQ(got["verdict"], "passed");
  // The schema too: the last one counts.
  EXPECT_TRUE(parsed(R"({"schema":"evalbox.run.v1","schema":"other.v9"})", keep).is_null());
  EXPECT_TRUE(parsed(R"({"schema":"other.v9","schema":"evalbox.run.v1"})", keep).is_object());
  EXPECT_TRUE(parsed(R"({"schema":"evalbox.run.v1","schema":1})", keep).is_null());
}

TEST(RecordFields, RefusesWhatAFullParseRefuses) {
  record_fields keep{"run_id"};
  for (std::string text :
       {std::string(R"({"schema":"other.v1","run_id":"x"})"), std::string(R"({"run_id":"x"})"),
        std::string(R"([{"schema":"evalbox.run.v1"}])"), std::string("\"evalbox.run.v1\""),
        std::string(R"({"schema":"evalbox.run.v1","run_id":"x")"),           // torn
        std::string("{\"schema\":\"evalbox.run.v1\",\"run_id\":\"\xff\"}"),  // not UTF-8
        std::string(R"({"schema":"evalbox.run.v1"} trailing)"), std::string()}) {
    EXPECT_TRUE(parse_record(text).is_null()) << text;
    EXPECT_TRUE(parsed(text, keep).is_null()) << text;
  }
  // Nesting: as deep as a full parse takes, and no deeper (in a dropped field too).
  auto nested = [](size_t depth) {
    return R"({"schema":"evalbox.run.v1","x":)" + std::string(depth - 1, '[') +
           std::string(depth - 1, ']') + "}";
  };
  EXPECT_TRUE(parsed(nested(max_json_depth), keep).is_object());
  EXPECT_FALSE(parse_record(nested(max_json_depth)).is_null());
  EXPECT_TRUE(parsed(nested(max_json_depth + 1), keep).is_null());
  EXPECT_TRUE(parse_record(nested(max_json_depth + 1)).is_null());
}

TEST(RecordFields, TheWalkAndTheReaderParseOnlyTheNamedFields) {
  evalbox::temp_dir tmp;
  results_dir dir(tmp.path());
  ASSERT_TRUE(dir.create());
  ASSERT_TRUE(record(dir, run("a", "first")));
  ASSERT_TRUE(record(dir, run("b", "second")));
  record_fields keep{"run_id"};
  std::vector<record_location> where;
  auto s = dir.for_each_record(keep, [&](const json& r, record_location at) -> status {
    EXPECT_EQ(r.size(), 1u);
    EXPECT_FALSE(r.contains("grading"));
    where.push_back(at);
    return {};
  });
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(where.size(), 2u);
  auto reader = record_reader::open(dir.results_file());
  ASSERT_TRUE(reader);
  auto back = reader->read(where[1], &keep);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, json({{"run_id", "b"}}));
}

// The spill keeps pieces of any size (empty ones, and ones larger than its write buffer) and
// gives each back by the location add() returned, in any order and from several threads at
// once; a location past what was written is an error, not a short piece.
TEST(RecordSpill, PiecesReadBackByTheirLocationFromAnyThread) {
  auto spill = record_spill::create();
  ASSERT_TRUE(spill) << spill.error().message;
  std::vector<std::string> pieces;
  std::vector<record_location> where;
  for (size_t i = 0; i < 300; ++i) {
    std::string p(i % 7 == 0 ? 0 : (i * 977) % 5000, static_cast<char>('a' + i % 26));
    if (i == 150) p.assign(200u << 10, '\0');  // past the 64 KiB buffer, NUL bytes included
    auto at = spill->add(p);
    ASSERT_TRUE(at) << at.error().message;
    EXPECT_EQ(at->size, p.size());
    pieces.push_back(std::move(p));
    where.push_back(*at);
  }
  auto reader = std::move(*spill).finish();
  ASSERT_TRUE(reader) << reader.error().message;
  auto check = [&](size_t from, size_t step, int& wrong) {
    std::string out;
    for (size_t k = 0; k < pieces.size(); ++k) {
      const size_t i = (from + k * step) % pieces.size();
      if (!reader->read(where[i], out) || out != pieces[i]) ++wrong;
    }
  };
  int wrong_a = 0, wrong_b = 0;
  std::thread other([&] { check(7, 13, wrong_b); });
  check(0, 1, wrong_a);
  other.join();
  EXPECT_EQ(wrong_a, 0);
  EXPECT_EQ(wrong_b, 0);
  const record_location end = where.back();
  std::string out;
  auto past = reader->read({end.offset + end.size + 1, 10}, out);
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().message.find("are gone"), std::string::npos) << past.error().message;
}

// Installs a seccomp filter on this (child) process; false if the kernel refuses it.
template <size_t N>
bool install_filter(sock_filter (&code)[N]) {
  sock_fprog prog{static_cast<unsigned short>(N), code};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Records run `id` in a child whose seccomp filter fails every call of system call `nr` with
// EIO (a failing disk); the child's exit code: 0 when record() refused with EIO, naming the run.
int record_while_failing(const results_dir& dir, const std::string& id, long nr) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EIO),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    if (!install_filter(code)) ::_exit(10);
    if (!make_dirs(dir.run_dir(id)) ||
        !write_file_replace(dir.run_dir(id) / transcript_file_name, "{}\n"))
      ::_exit(12);
    auto s = dir.record(run(id));
    if (s) ::_exit(13);
    if (s.error().sys_errno != EIO || s.error().message.find(id) == std::string::npos) ::_exit(14);
    ::_exit(0);
  }
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

// A run's line in results.jsonl is its commit: when its files cannot be made durable, the run
// is not recorded, and results.jsonl keeps only what it had. fdatasync failing fails every
// sync; fsync failing fails only the run directory's, which comes before the line.
TEST(ResultsRecords, ARunWhoseFilesCannotBeMadeDurableIsNotRecorded) {
  temp_dir tmp("evalbox-results");
  results_dir dir(tmp.path());
  ASSERT_TRUE(record(dir, run("first")));
  EXPECT_EQ(record_while_failing(dir, "second", __NR_fdatasync), 0);
  EXPECT_EQ(record_while_failing(dir, "third", __NR_fsync), 0);
  EXPECT_EQ(walk(dir).ids, std::vector<std::string>{"first"});
  // Where the disk works, the same run is recorded, with its run.json.
  ASSERT_TRUE(record(dir, run("second")));
  EXPECT_EQ(walk(dir).ids, (std::vector<std::string>{"first", "second"}));
  EXPECT_TRUE(std::filesystem::exists(dir.run_dir("second") / "run.json"));
}

// Where the temporary directory's file system has no O_TMPFILE, the spill is a named file
// removed as soon as it is open: it works the same and leaves nothing behind. Run in a child
// whose seccomp filter answers every openat asking for O_TMPFILE with EOPNOTSUPP.
TEST(RecordSpill, WithoutOTmpfileANamedFileIsUsedAndRemovedAtOnce) {
  temp_dir tmp("evalbox-spill");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("TMPDIR", tmp.path().c_str(), 1);
    constexpr unsigned tmpfile_bit = O_TMPFILE & ~O_DIRECTORY;
    sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),  // flags, low half
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, tmpfile_bit, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EOPNOTSUPP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    if (!install_filter(code)) ::_exit(10);
    // The filter holds: O_TMPFILE is refused here.
    if (::open(tmp.path().c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) >= 0 ||
        errno != EOPNOTSUPP)
      ::_exit(11);
    auto spill = record_spill::create();
    if (!spill) ::_exit(12);
    std::vector<std::string> pieces = {"first", std::string(100u << 10, 'x'), "", "last"};
    std::vector<record_location> where;
    for (const auto& p : pieces) {
      auto at = spill->add(p);
      if (!at) ::_exit(13);
      where.push_back(*at);
    }
    // Nothing is left in the temporary directory, even while the spill is open.
    if (std::filesystem::directory_iterator(tmp.path()) != std::filesystem::directory_iterator())
      ::_exit(14);
    auto reader = std::move(*spill).finish();
    if (!reader) ::_exit(15);
    std::string out;
    for (size_t i = pieces.size(); i-- > 0;)
      if (!reader->read(where[i], out) || out != pieces[i]) ::_exit(16);
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st)) << "the child died of signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), 0)
      << "10 seccomp refused, 11 O_TMPFILE still allowed, 12 create, "
         "13 add, 14 a file left behind, 15 finish, 16 a piece read back wrong";
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

}  // namespace
}  // namespace evalbox::harness
