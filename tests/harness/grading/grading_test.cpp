// Each check kind against real trees, the verdict, grading that cannot be tricked into reading
// outside the workspace, hostile inputs (adversarial regex input, files past the read caps) and
// a check that cannot be evaluated.
#include "harness/grading/grading.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>

#include "base/fs.h"
#include "base/json.h"
#include "base/unique_fd.h"
#include "harness/transcripts/read_limits.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

// A pattern as the fixture loader makes it (compiled once).
pattern compiled(const std::string& source) {
  auto p = pattern::compile(source);
  EXPECT_TRUE(p) << source;
  return p ? std::move(*p) : pattern();
}

class Grading : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(make_dirs(before() / "tests"));
    ASSERT_TRUE(make_dirs(after() / "tests"));
    put(before(), "tests/test_a.py", "assert True\n");
    put(after(), "tests/test_a.py", "assert True\n");
    put(before(), "code.py", "x = 1\n");
    put(after(), "code.py", "x = 2\n");
    put(after(), "out.txt", "42\n");
    put(after(), "config.json", R"({"server": {"port": 8080}, "flags": [1, 2]})");
  }
  fs::path before() const { return dir_.path() / "before"; }
  fs::path after() const { return dir_.path() / "after"; }
  static void put(const fs::path& root, const std::string& rel, const std::string& text) {
    ASSERT_TRUE(make_dirs((root / rel).parent_path()));
    ASSERT_TRUE(write_file(root / rel, text));
  }
  static check_spec file(std::string path, file_check::predicate_kind p, std::string text = "") {
    check_spec c;
    c.id = "f";
    c.kind = check_kind::file;
    c.file.path = std::move(path);
    c.file.predicate = p;
    if (p == file_check::predicate_kind::matches)
      c.file.regex = compiled(text);
    else
      c.file.text = std::move(text);
    return c;
  }
  static check_spec git(std::vector<std::string> paths, git_check::state_kind s) {
    check_spec c;
    c.id = "g";
    c.kind = check_kind::git;
    c.git.paths = std::move(paths);
    c.git.state = s;
    return c;
  }
  temp_dir dir_;
};

using fp = file_check::predicate_kind;
using gs = git_check::state_kind;

TEST_F(Grading, FileExistsAndAbsent) {
  EXPECT_TRUE(evaluate_file_check(file("out.txt", fp::exists), after()).passed);
  EXPECT_FALSE(evaluate_file_check(file("nope.txt", fp::exists), after()).passed);
  EXPECT_TRUE(evaluate_file_check(file("nope.txt", fp::absent), after()).passed);
  EXPECT_FALSE(evaluate_file_check(file("out.txt", fp::absent), after()).passed);
}

TEST_F(Grading, FileEqualsContainsMatches) {
  EXPECT_TRUE(evaluate_file_check(file("out.txt", fp::equals, "42\n"), after()).passed);
  auto r = evaluate_file_check(file("out.txt", fp::equals, "43\n"), after());
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.detail.find("42"), std::string::npos) << "the detail shows what was found";
  EXPECT_TRUE(evaluate_file_check(file("out.txt", fp::contains, "4"), after()).passed);
  EXPECT_TRUE(evaluate_file_check(file("out.txt", fp::matches, "^[0-9]+\\s*$"), after()).passed);
  EXPECT_FALSE(evaluate_file_check(file("out.txt", fp::matches, "^x"), after()).passed);
}

TEST_F(Grading, FileJsonPointer) {
  auto c = file("config.json", fp::json);
  c.file.pointer = "/server/port";
  c.file.expected = 8080;
  EXPECT_TRUE(evaluate_file_check(c, after()).passed);
  c.file.expected = "8080";
  EXPECT_FALSE(evaluate_file_check(c, after()).passed) << "types matter: 8080 is not \"8080\"";
  c.file.pointer = "/missing";
  EXPECT_FALSE(evaluate_file_check(c, after()).passed);
}

// The agent writes the file: one nested too deep to dump crashed grading (stack overflow).
TEST_F(Grading, FileJsonNestedTooDeepFailsTheCheck) {
  put(after(), "deep.json", std::string(100000, '[') + std::string(100000, ']'));
  auto c = file("deep.json", fp::json);
  c.file.pointer = "/0";
  c.file.expected = 1;
  auto r = evaluate_file_check(c, after());
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.detail.find("nested deeper than"), std::string::npos) << r.detail;
}

TEST_F(Grading, ASymlinkOutOfTheWorkspaceIsNotFollowedOnTheHost) {
  temp_dir outside;
  ASSERT_TRUE(write_file(outside.path() / "secret", "host secret\n"));
  ASSERT_EQ(::symlink((outside.path() / "secret").c_str(), (after() / "leak.txt").c_str()), 0);
  auto r = evaluate_file_check(file("leak.txt", fp::contains, "host secret"), after());
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(::symlink("../../../../../../../etc/hostname", (after() / "up.txt").c_str()), 0);
  EXPECT_FALSE(evaluate_file_check(file("up.txt", fp::exists), after()).passed)
      << "'..' stops at the workspace root";
}

TEST_F(Grading, ASymlinkInsideTheWorkspaceIsFollowed) {
  ASSERT_EQ(::symlink("out.txt", (after() / "alias.txt").c_str()), 0);
  EXPECT_TRUE(evaluate_file_check(file("alias.txt", fp::equals, "42\n"), after()).passed);
}

check_spec tcheck(transcript_check::predicate_kind p, std::string pattern, uint64_t max = 0);
using tp = transcript_check::predicate_kind;

// A sparse file of `size` bytes: the caps are tested without writing 64 MiB.
void sparse(const fs::path& path, off_t size) {
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::ftruncate(fd.get(), size), 0);
}

TEST_F(Grading, AnchorsMatchAtLineBoundariesAsInGrep) {
  put(after(), "hello.txt", "hello, world\n");
  EXPECT_TRUE(
      evaluate_file_check(file("hello.txt", fp::matches, "^hello, world$"), after()).passed);
  put(after(), "log.txt", "start\nhello, world\nend\n");
  EXPECT_TRUE(evaluate_file_check(file("log.txt", fp::matches, "^hello, world$"), after()).passed);
  EXPECT_FALSE(evaluate_file_check(file("log.txt", fp::matches, "\\Ahello"), after()).passed);
}

// The input that crashed `evalbox run` with std::regex (a recursion per character), for every
// kind of check whose pattern meets agent-written text. Multi-megabyte; well under a second.
TEST_F(Grading, AdversarialInputForEveryRegexCheckKindFinishesWithTheRightAnswer) {
  std::string abab;
  for (size_t i = 0; i < (2u << 20); ++i) abab += (i % 2) ? 'b' : 'a';
  put(after(), "big.txt", abab + "c");
  EXPECT_TRUE(evaluate_file_check(file("big.txt", fp::matches, "(a|b)*c"), after()).passed);
  auto miss = evaluate_file_check(file("big.txt", fp::matches, "(a|b)*d"), after());
  EXPECT_FALSE(miss.passed);
  EXPECT_EQ(miss.detail, "big.txt does not match /(a|b)*d/");

  transcript t;
  step s;
  tool_call c;
  c.id = "c1";
  c.tool = "shell";
  c.command = abab + "c";
  s.tool_calls.push_back(c);
  t.steps.push_back(s);
  t.final_message = abab + "c";
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::command_matches, "(a|b)*c"), t).passed);
  EXPECT_FALSE(evaluate_transcript_check(tcheck(tp::command_matches, "(a|b)*d"), t).passed);
  EXPECT_FALSE(evaluate_transcript_check(tcheck(tp::forbid_command, "(a|b)*c$"), t).passed);
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::forbid_command, "(a|b)*d"), t).passed);
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::final_message_matches, "^(a|b)*c$"), t).passed);
  EXPECT_FALSE(evaluate_transcript_check(tcheck(tp::final_message_matches, "(x+x+)+y"), t).passed);
}

TEST_F(Grading, AFileLargerThanTheReadCapFailsTheCheckSayingSo) {
  sparse(after() / "huge.bin", static_cast<off_t>(max_checked_file_bytes) + 1);
  for (auto p : {fp::matches, fp::contains, fp::equals, fp::json}) {
    auto r = evaluate_file_check(file("huge.bin", p, "x"), after());
    EXPECT_FALSE(r.passed);
    EXPECT_TRUE(r.error.empty()) << "a failed check, not a grader error";
    EXPECT_EQ(r.detail, fmt::format("huge.bin is {} bytes, larger than 64MiB: evalbox reads at "
                                    "most that of a file for a check",
                                    max_checked_file_bytes + 1));
  }
  EXPECT_TRUE(evaluate_file_check(file("huge.bin", fp::exists), after()).passed)
      << "existence needs no read";
  sparse(after() / "at-cap.bin", static_cast<off_t>(max_checked_file_bytes));
  EXPECT_TRUE(evaluate_file_check(file("at-cap.bin", fp::matches, "\\A\\x00"), after()).passed)
      << "a file of exactly the cap is read";
}

TEST_F(Grading, GitTellsFilesOfDifferentSizesApartWithoutReadingThem) {
  const auto big = static_cast<off_t>(max_checked_file_bytes) + 1;
  sparse(before() / "data.bin", big);
  sparse(after() / "data.bin", big + 1);
  EXPECT_TRUE(evaluate_git_check(git({"data.bin"}, gs::changed), before(), after()).passed);
  sparse(after() / "data.bin", big);
  auto r = evaluate_git_check(git({"data.bin"}, gs::unchanged), before(), after());
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.detail, fmt::format("data.bin is {} bytes, larger than 64MiB: evalbox compares at "
                                  "most that of a file for a check",
                                  big));
}

TEST_F(Grading, GitRefusesMoreFilesThanItsCapUnderOnePath) {
  ASSERT_TRUE(make_dirs(after() / "many"));
  unique_fd dir(::open((after() / "many").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir);
  for (size_t i = 0; i <= max_git_check_files; ++i) {
    unique_fd f(
        ::openat(dir.get(), std::to_string(i).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(f) << i;
  }
  auto r = evaluate_git_check(git({"many"}, gs::unchanged), before(), after());
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.detail,
            "many holds more than 100000 entries: evalbox compares at most 100000 files under "
            "one path of a git check");
}

// File names are bytes: a name that is not UTF-8 is listed, compared and named in the detail
// (run.json writes it with U+FFFD where JSON needs text).
TEST_F(Grading, GitSeesFilesWhoseNamesAreNotUtf8) {
  put(before(), "tests/bad-\xff-name.txt", "one\n");
  put(after(), "tests/bad-\xff-name.txt", "one\n");
  EXPECT_TRUE(evaluate_git_check(git({"tests"}, gs::unchanged), before(), after()).passed);
  put(after(), "tests/bad-\xff-name.txt", "two\n");
  auto r = evaluate_git_check(git({"tests"}, gs::unchanged), before(), after());
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.detail, "changed: tests/bad-\xff-name.txt");
  grading_result g;
  g.checks.push_back(r);
  EXPECT_EQ(pretty_json(g.to_json(1.0)["checks"][0]["detail"]),
            "\"changed: tests/bad-\xef\xbf\xbd-name.txt\"\n");
}

TEST_F(Grading, GitUnchangedAndChanged) {
  EXPECT_TRUE(evaluate_git_check(git({"tests"}, gs::unchanged), before(), after()).passed);
  EXPECT_TRUE(evaluate_git_check(git({"code.py"}, gs::changed), before(), after()).passed);
  auto r = evaluate_git_check(git({"code.py"}, gs::unchanged), before(), after());
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.detail.find("code.py"), std::string::npos);
}

TEST_F(Grading, GitSeesAddedDeletedAndModeChanges) {
  put(after(), "tests/test_new.py", "new\n");
  EXPECT_FALSE(evaluate_git_check(git({"tests"}, gs::unchanged), before(), after()).passed);
  ASSERT_EQ(::unlink((after() / "tests/test_new.py").c_str()), 0);
  ASSERT_EQ(::unlink((after() / "tests/test_a.py").c_str()), 0);
  EXPECT_FALSE(evaluate_git_check(git({"tests"}, gs::unchanged), before(), after()).passed);
  put(after(), "tests/test_a.py", "assert True\n");
  ASSERT_EQ(::chmod((after() / "tests/test_a.py").c_str(), 0755), 0);
  EXPECT_FALSE(evaluate_git_check(git({"tests"}, gs::unchanged), before(), after()).passed);
}

TEST_F(Grading, GitIgnoresWhatTheWorkspaceGitignoreIgnores) {
  put(before(), ".gitignore", "__pycache__/\n*.log\n");
  put(after(), ".gitignore", "__pycache__/\n*.log\n");
  put(after(), "tests/__pycache__/test_a.cpython-311.pyc", "bytecode");
  put(after(), "tests/run.log", "log");
  EXPECT_TRUE(evaluate_git_check(git({"tests"}, gs::unchanged), before(), after()).passed);
  put(after(), "tests/test_b.py", "real change\n");
  EXPECT_FALSE(evaluate_git_check(git({"tests"}, gs::unchanged), before(), after()).passed);
}

transcript sample_transcript() {
  transcript t;
  step s;
  tool_call c;
  c.id = "c1";
  c.tool = "shell";
  c.command = "python3 -m pytest -q";
  s.tool_calls.push_back(c);
  s.message = "All tests pass now.";
  t.steps.push_back(s);
  t.final_message = "All tests pass now.";
  return t;
}

check_spec tcheck(transcript_check::predicate_kind p, std::string pattern, uint64_t max) {
  check_spec c;
  c.id = "t";
  c.kind = check_kind::transcript;
  c.transcript.predicate = p;
  if (p == transcript_check::predicate_kind::tool_used)
    c.transcript.tool = std::move(pattern);
  else if (p != transcript_check::predicate_kind::max_steps)
    c.transcript.regex = compiled(pattern);
  c.transcript.max_steps = max;
  return c;
}

TEST(TranscriptChecks, EachPredicate) {
  auto t = sample_transcript();
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::command_matches, "pytest"), t).passed);
  EXPECT_FALSE(evaluate_transcript_check(tcheck(tp::command_matches, "make"), t).passed);
  EXPECT_FALSE(evaluate_transcript_check(tcheck(tp::forbid_command, "pytest"), t).passed);
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::forbid_command, "rm -rf"), t).passed);
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::final_message_matches, "pass"), t).passed);
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::tool_used, "shell"), t).passed);
  EXPECT_FALSE(evaluate_transcript_check(tcheck(tp::tool_used, "web_search"), t).passed);
  EXPECT_TRUE(evaluate_transcript_check(tcheck(tp::max_steps, "", 1), t).passed);
  EXPECT_FALSE(evaluate_transcript_check(tcheck(tp::max_steps, "", 0), t).passed);
}

TEST_F(Grading, VerdictIsTheWeightedShareAgainstTheThreshold) {
  fixture_spec f;
  f.id = "fx";
  auto a = file("out.txt", fp::exists);
  a.id = "a";
  a.weight = 3;
  auto b = file("nope.txt", fp::exists);
  b.id = "b";
  f.checks = {a, b};
  f.threshold = 0.75;
  transcript t;
  auto g = grade({f, t, before(), after(), nullptr});
  EXPECT_TRUE(g.ok);
  EXPECT_DOUBLE_EQ(g.score, 0.75);
  EXPECT_TRUE(g.passed);
  f.threshold = 1.0;
  EXPECT_FALSE(grade({f, t, before(), after(), nullptr}).passed);
}

TEST_F(Grading, AShellCheckThatCannotRunIsAGraderErrorNotAFailure) {
  fixture_spec f;
  check_spec c;
  c.id = "hidden-tests";
  c.kind = check_kind::shell;
  c.shell = "python3 /grader/test.py";
  f.checks = {c};
  transcript t;
  auto broken = [](const check_spec&) -> result<shell_check_outcome> {
    return make_error(error_kind::io, "sandbox could not start");
  };
  auto g = grade({f, t, before(), after(), broken});
  EXPECT_FALSE(g.ok);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.to_json(1.0)["status"], "error");
  auto failing = [](const check_spec&) -> result<shell_check_outcome> {
    return shell_check_outcome{true, 1, "exited", "AssertionError"};
  };
  auto g2 = grade({f, t, before(), after(), failing});
  EXPECT_TRUE(g2.ok);
  EXPECT_FALSE(g2.passed);
  EXPECT_NE(g2.checks[0].detail.find("AssertionError"), std::string::npos);
}

// A check whose evaluation throws (grading_inputs::fault, the test hook) is this run's grader
// error with the check named; every other check is still evaluated.
TEST_F(Grading, ACheckThatThrowsIsAGraderErrorAndTheOthersAreStillEvaluated) {
  fixture_spec f;
  auto a = file("out.txt", fp::exists);
  a.id = "a";
  auto b = file("out.txt", fp::exists);
  b.id = "b";
  auto c = file("nope.txt", fp::exists);
  c.id = "c";
  f.checks = {a, b, c};
  transcript t;
  grading_inputs in{f, t, before(), after(), nullptr};
  in.fault = "check-throw:b";
  auto g = grade(in);
  EXPECT_FALSE(g.ok);
  EXPECT_FALSE(g.passed);
  EXPECT_EQ(g.error,
            "check b: could not be evaluated: fault injected by EVALBOX_FAULT=check-throw:b");
  ASSERT_EQ(g.checks.size(), 3u);
  EXPECT_TRUE(g.checks[0].passed);
  EXPECT_FALSE(g.checks[1].passed);
  EXPECT_EQ(g.checks[1].detail, g.checks[1].error);
  EXPECT_FALSE(g.checks[2].passed);
  EXPECT_TRUE(g.checks[2].error.empty());
  EXPECT_EQ(g.to_json(1.0)["status"], "error");
  EXPECT_TRUE(grade({f, t, before(), after(), nullptr}).ok) << "the hook names one check only";
}

// Grading reads no environment: the hook comes only through its inputs (the binary reads
// EVALBOX_FAULT once, at the edge, into runner_options::grading_fault).
TEST_F(Grading, TheFaultHookComesOnlyFromTheInputs) {
  fixture_spec f;
  auto a = file("out.txt", fp::exists);
  a.id = "a";
  f.checks = {a};
  transcript t;
  grading_inputs in{f, t, before(), after(), nullptr};
  ::setenv("EVALBOX_FAULT", "check-throw:a", 1);
  auto with_env_only = grade(in);
  ::unsetenv("EVALBOX_FAULT");
  EXPECT_TRUE(with_env_only.ok) << with_env_only.error;
  in.fault = "check-throw:a";
  auto with_input = grade(in);
  EXPECT_FALSE(with_input.ok);
  EXPECT_EQ(with_input.error,
            "check a: could not be evaluated: fault injected by EVALBOX_FAULT=check-throw:a");
}

TEST_F(Grading, APatternNeverCompiledIsAGraderErrorNotAFailedCheck) {
  fixture_spec f;
  check_spec c = file("out.txt", fp::matches, "4");
  c.file.regex = pattern();
  f.checks = {c};
  transcript t;
  auto g = grade({f, t, before(), after(), nullptr});
  EXPECT_FALSE(g.ok);
  EXPECT_NE(g.error.find("was not compiled"), std::string::npos) << g.error;
}

}  // namespace
}  // namespace evalbox::harness
