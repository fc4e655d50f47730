// Each check kind against real trees, the verdict, and grading that cannot be tricked into
// reading outside the workspace.
#include "harness/grading/grading.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "sandbox/base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

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

check_spec tcheck(transcript_check::predicate_kind p, std::string pattern, uint64_t max = 0) {
  check_spec c;
  c.id = "t";
  c.kind = check_kind::transcript;
  c.transcript.predicate = p;
  c.transcript.pattern = std::move(pattern);
  c.transcript.max_steps = max;
  return c;
}

using tp = transcript_check::predicate_kind;

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

}  // namespace
}  // namespace evalbox::harness
