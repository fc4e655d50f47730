// `evalbox import swebench`: instances in both encodings of their test lists become fixtures
// that load; a bad instance is reported at its line and skipped; prompts of any text read back
// exactly.
#include "harness/importers/swebench.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "base/fs.h"
#include "base/json.h"
#include "harness/config/parse.h"
#include "harness/fixture/load.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

std::string sh(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class SwebenchImport : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("evalbox-import-" + random_suffix());
    fs::create_directories(root_ / "repos" / "acme" / "calc");
    const fs::path repo = root_ / "repos" / "acme" / "calc";
    ASSERT_EQ(std::system(("git init -q " + repo.string()).c_str()), 0);
    ASSERT_TRUE(write_file(repo / "calc.py", "def add(a, b):\n    return a - b\n"));
    const std::string g = "git -C " + repo.string() + " -c user.name=t -c user.email=t@localhost ";
    ASSERT_EQ(std::system((g + "add -A && " + g + "commit -qm base").c_str()), 0);
    commit_ = sh(g + "rev-parse HEAD");
    ::setenv("EVALBOX_STATE_DIR", (root_ / "state").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("EVALBOX_STATE_DIR");
    fs::remove_all(root_);
  }

  json instance(const std::string& id) {
    return {{"instance_id", id},
            {"repo", "acme/calc"},
            {"base_commit", commit_},
            {"problem_statement", "add() subtracts.\n\nMake it add.\n"},
            {"test_patch",
             "diff --git a/test_calc.py b/test_calc.py\nnew file mode 100644\n--- /dev/null\n"
             "+++ b/test_calc.py\n@@ -0,0 +1,2 @@\n+from calc import add\n+def test_add(): "
             "assert add(1, 2) == 3\n"},
            {"patch",
             "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    "
             "return a - b\n+    return a + b\n"},
            {"FAIL_TO_PASS", json::array({"test_calc.py::test_add"}).dump()},  // encoded
            {"PASS_TO_PASS", json::array()}};                                  // a real list
  }

  fs::path root_;
  std::string commit_;
};

TEST_F(SwebenchImport, WritesFixturesThatLoadAndASuite) {
  std::string jsonl = instance("acme__calc-1").dump() + "\n";
  json second = instance("Acme__Calc-2");
  second["FAIL_TO_PASS"] = json::array({"test_calc.py::test_add"});
  jsonl += second.dump() + "\n";
  ASSERT_TRUE(write_file(root_ / "instances.jsonl", jsonl));
  swebench_import_options o;
  o.input = root_ / "instances.jsonl";
  o.out = root_ / "out";
  o.repos_dir = root_ / "repos";
  auto r = import_swebench(o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->errors.empty()) << join_messages(r->errors);
  EXPECT_EQ(r->imported, (std::vector<std::string>{"acme__calc-1", "acme__calc-2"}));
  const fs::path fx = root_ / "out" / "acme__calc-1";
  EXPECT_TRUE(fs::exists(fx / "grader" / "test.patch"));
  EXPECT_TRUE(fs::exists(fx / "solution" / "gold.patch"));
  EXPECT_TRUE(fs::exists(fx / "solution" / "solve.sh"));
  std::vector<config_error> errors;
  auto f = load_fixture(fx, &errors);
  ASSERT_TRUE(f) << join_messages(errors);
  EXPECT_EQ(f->prompt, "add() subtracts.\n\nMake it add.\n");
  EXPECT_EQ(f->git_commit, commit_);
  ASSERT_EQ(f->checks.size(), 1u);
  EXPECT_EQ(f->checks[0].kind, check_kind::tests);
  EXPECT_EQ(f->checks[0].tests.patch, "test.patch");
  EXPECT_EQ(f->checks[0].tests.command, "python3 -m pytest -rA -p no:cacheprovider 'test_calc.py'");
  EXPECT_EQ(f->checks[0].tests.fail_to_pass, (std::vector<std::string>{"test_calc.py::test_add"}));
  EXPECT_TRUE(f->has_solution);
  auto suite = load_suite(r->suite, std::vector<std::string>{"oracle", "noop"}, &errors);
  ASSERT_TRUE(suite) << join_messages(errors);
  EXPECT_EQ(suite->fixtures.size(), 2u);
  EXPECT_EQ(suite->name, "out");
}

TEST_F(SwebenchImport, ABadInstanceIsReportedAtItsLineAndSkipped) {
  json no_commit = instance("b-1");
  no_commit["base_commit"] = "main";
  json no_tests = instance("b-2");
  no_tests["FAIL_TO_PASS"] = "[not json";
  std::string jsonl =
      instance("good-1").dump() + "\n\n" + no_commit.dump() + "\n{oops\n" + no_tests.dump() + "\n";
  ASSERT_TRUE(write_file(root_ / "i.jsonl", jsonl));
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.repos_dir = root_ / "repos";
  auto r = import_swebench(o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->imported, (std::vector<std::string>{"good-1"}));
  ASSERT_EQ(r->errors.size(), 3u);
  EXPECT_EQ(r->errors[0].where.line, 4) << "the unparsable line comes first: read before";
  EXPECT_EQ(r->errors[1].where.line, 3);
  EXPECT_NE(r->errors[1].message().find("instance b-1: base_commit 'main' is not a commit id"),
            std::string::npos)
      << r->errors[1].message();
  EXPECT_EQ(r->errors[2].where.line, 5);
  EXPECT_NE(r->errors[2].message().find("FAIL_TO_PASS"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_ / "out" / "b-1"));
}

TEST_F(SwebenchImport, AMissingLocalRepositorySaysWhereItLooked) {
  json other = instance("x-1");
  other["repo"] = "acme/other";
  ASSERT_TRUE(write_file(root_ / "i.jsonl", other.dump() + "\n"));
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.repos_dir = root_ / "repos";
  auto r = import_swebench(o);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_NE(r->errors[0].message().find("no repository for acme/other"), std::string::npos);
}

TEST_F(SwebenchImport, TheUrlTemplateNamesTheRepository) {
  ASSERT_TRUE(write_file(root_ / "i.jsonl", instance("u-1").dump() + "\n"));
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.repo_url = "https://git.example/{owner}/{name}.git";
  auto r = import_swebench(o);
  ASSERT_TRUE(r);
  auto yaml = read_file(root_ / "out" / "u-1" / "fixture.yaml").value_or("");
  EXPECT_NE(yaml.find("git: \"https://git.example/acme/calc.git\""), std::string::npos) << yaml;
}

TEST(YamlScalar, AnyTextReadsBackExactly) {
  for (std::string text :
       {"plain", "", "  leading spaces\nand more", "trailing newlines\n\n\n", "no newline\nend",
        "windows\r\nlines", "tab\there\nx", "quote \" and \\ backslash: {x: [y]} # not a comment",
        "- looks like a list\n- item", "emoji 😀 and ümlauts\n", "\x01 control", "line\n  \n",
        "|2 indicator\n", "\n\nstarts blank\n", "\xc2\x85 next line"}) {
    std::string y = "schema: evalbox.fixture.v1\nid: x\nprompt: " + yaml_scalar(text, 0) +
                    "\nchecks:\n  - {id: t, shell: 'true'}\n";
    std::vector<config_error> errors;
    auto spec = parse_fixture_yaml(y, "f.yaml", errors);
    if (text.empty()) continue;  // an empty prompt is refused by the format, rightly
    ASSERT_TRUE(errors.empty()) << join_messages(errors) << "\n" << y;
    EXPECT_EQ(spec.prompt, text) << y;
  }
}

}  // namespace
}  // namespace evalbox::harness
