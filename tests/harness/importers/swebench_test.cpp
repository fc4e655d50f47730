// `evalbox import swebench`: instances in both encodings of their test lists become fixtures
// that load; a bad instance is reported at its line and skipped; prompts of any text read back
// exactly; each repository gets SWE-bench's command and parser, and --images official its image
// and eval script.
#include "harness/importers/swebench.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>

#include "base/fs.h"
#include "base/json.h"
#include "harness/config/parse.h"
#include "harness/fixture/load.h"
#include "harness/importers/swebench_specs.h"

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
  EXPECT_EQ(f->checks[0].tests.command, "python3 -m pytest -rA -p no:cacheprovider test_calc.py");
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

// A test patch that adds a test file, a data file beside it and touches pyproject.toml, as many
// SWE-bench instances' do.
const std::string patch_with_data =
    "diff --git a/test_calc.py b/test_calc.py\nnew file mode 100644\n--- /dev/null\n"
    "+++ b/test_calc.py\n@@ -0,0 +1,2 @@\n+from calc import add\n+def test_add(): "
    "assert add(1, 2) == 3\n"
    "diff --git a/tests/data/cases.json b/tests/data/cases.json\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/tests/data/cases.json\n@@ -0,0 +1 @@\n+[1, 2, 3]\n"
    "diff --git a/pyproject.toml b/pyproject.toml\n--- a/pyproject.toml\n+++ b/pyproject.toml\n"
    "@@ -1 +1 @@\n-x = 1\n+x = 2\n";

TEST_F(SwebenchImport, DataFilesOfTheTestPatchAreNoTestFiles) {
  json i = instance("d-1");
  i["test_patch"] = patch_with_data;
  ASSERT_TRUE(write_file(root_ / "i.jsonl", i.dump() + "\n"));
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.repos_dir = root_ / "repos";
  auto r = import_swebench(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->errors.empty()) << join_messages(r->errors);
  std::vector<config_error> errors;
  auto f = load_fixture(root_ / "out" / "d-1", &errors);
  ASSERT_TRUE(f) << join_messages(errors);
  // pytest given cases.json or pyproject.toml says "found no collectors" and runs nothing.
  EXPECT_EQ(f->checks[0].tests.command, "python3 -m pytest -rA -p no:cacheprovider test_calc.py");
  // The patch itself is applied whole.
  EXPECT_EQ(read_file(root_ / "out" / "d-1" / "grader" / "test.patch").value_or(""),
            patch_with_data);
}

TEST(SwebenchTestDirectives, AsUpstreamMakesThemOfATestPatch) {
  const std::string patch =
      patch_with_data +
      "diff --git a/tests/img/baseline.png b/tests/img/baseline.png\nBinary files differ\n"
      "diff --git a/tests/old_test.py b/tests/new_test.py\nsimilarity index 100%\n"
      "rename from tests/old_test.py\nrename to tests/new_test.py\n"
      "diff --git a/tests/gone.py b/tests/gone.py\ndeleted file mode 100644\n"
      "--- a/tests/gone.py\n+++ /dev/null\n"
      "diff --git a/data/table.csv b/data/table.csv\n"
      "diff --git a/docs/notes.md b/docs/notes.md\n"
      "diff --git a/tests/it's here.py b/tests/it's here.py\n"
      "diff --git a/../up.py b/../up.py\n";
  EXPECT_EQ(swebench_test_directives(patch, false),
            (std::vector<std::string>{"test_calc.py", "tests/new_test.py", "tests/gone.py",
                                      "tests/it's here.py"}));
  EXPECT_EQ(swebench_test_directives("diff --git a/tests/auth_tests/test_validators.py "
                                     "b/tests/auth_tests/test_validators.py\n"
                                     "diff --git a/tests/auth_tests/common-passwords-custom.txt "
                                     "b/tests/auth_tests/common-passwords-custom.txt\n"
                                     "diff --git a/django/test/utils.py b/django/test/utils.py\n",
                                     true),
            (std::vector<std::string>{"auth_tests.test_validators", "django.test.utils"}));
}

TEST(SwebenchSpecs, EachRepositoryHasUpstreamsCommandAndParser) {
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"astropy/astropy", {"pytest -rA", "pytest-v2"}},
      {"django/django",
       {"./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", "django"}},
      {"matplotlib/matplotlib", {"pytest -rA", "matplotlib"}},
      {"mwaskom/seaborn", {"pytest --no-header -rA", "seaborn"}},
      {"pallets/flask", {"pytest -rA", "pytest"}},
      {"psf/requests", {"pytest -rA", "pytest-options"}},
      {"pydata/xarray", {"pytest -rA", "pytest"}},
      {"pylint-dev/pylint", {"pytest -rA", "pytest-options"}},
      {"pytest-dev/pytest", {"pytest -rA", "pytest"}},
      {"scikit-learn/scikit-learn", {"pytest -rA", "pytest-v2"}},
      {"sphinx-doc/sphinx", {"tox --current-env -epy39 -v --", "pytest-v2"}},
      {"sympy/sympy",
       {"PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
        "sympy"}},
  };
  for (const auto& [repo, cmd_format] : want) {
    auto spec = swebench_spec(repo, "4.0");
    ASSERT_TRUE(spec) << repo;
    EXPECT_EQ(spec->test_command, cmd_format.first) << repo;
    EXPECT_EQ(spec->log_format, cmd_format.second) << repo;
    EXPECT_EQ(spec->django_directives, repo == "django/django") << repo;
    EXPECT_TRUE(spec->setup.empty()) << repo;
  }
  EXPECT_FALSE(swebench_spec("acme/calc", "1.0"));
  EXPECT_FALSE(swebench_spec("Django/django", "3.0"));
  // Where upstream's command differs by version.
  EXPECT_EQ(swebench_spec("django/django", "1.9")->test_command,
            "./tests/runtests.py --verbosity 2");
  EXPECT_EQ(swebench_spec("astropy/astropy", "1.3")->test_command,
            "pytest -rA -vv -o console_output_style=classic --tb=no");
  EXPECT_EQ(swebench_spec("astropy/astropy", "4.3")->test_command, "pytest -rA");
  EXPECT_EQ(swebench_spec("django/django", "2.2")->setup.size(), 4u);
  EXPECT_EQ(swebench_spec("django/django", "3.0")->setup.front(),
            "sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen");
}

TEST(SwebenchOfficialImage, IsNamedAsUpstreamNamesIt) {
  EXPECT_EQ(swebench_official_image("django__django-11099", "docker://swebench/"),
            "docker://swebench/sweb.eval.x86_64.django_1776_django-11099:latest");
  EXPECT_EQ(swebench_official_image("Acme__Calc___2", "docker://mirror.local:5000/swebench/"),
            "docker://mirror.local:5000/swebench/sweb.eval.x86_64.acme_1776_calc_1776__2:latest");
}

TEST_F(SwebenchImport, OfficialImagesRunUpstreamsEvalScriptInTestbed) {
  json i = instance("django__django-11099");
  i["repo"] = "django/django";  // not under --repos: an official image needs no clone
  i["version"] = "3.0";
  i["test_patch"] =
      "diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py\n"
      "--- a/tests/auth_tests/test_validators.py\n+++ b/tests/auth_tests/test_validators.py\n"
      "@@ -1 +1 @@\n-a\n+b\n"
      "diff --git a/tests/auth_tests/common-passwords-custom.txt "
      "b/tests/auth_tests/common-passwords-custom.txt\n"
      "--- a/tests/auth_tests/common-passwords-custom.txt\n"
      "+++ b/tests/auth_tests/common-passwords-custom.txt\n@@ -1 +1 @@\n-a\n+b\n";
  i["FAIL_TO_PASS"] =
      json::array({"test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)"});
  json mirror = instance("sympy__sympy-20590");
  mirror["repo"] = "sympy/sympy";
  mirror["version"] = 1.7;  // a number, as some copies of the files have it
  mirror["test_patch"] =
      "diff --git a/sympy/core/tests/test_basic.py b/sympy/core/tests/test_basic.py\n"
      "--- a/sympy/core/tests/test_basic.py\n+++ b/sympy/core/tests/test_basic.py\n";
  ASSERT_TRUE(write_file(root_ / "i.jsonl", i.dump() + "\n" + mirror.dump() + "\n"));
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.repos_dir = root_ / "repos";
  o.official_images = true;
  auto r = import_swebench(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->errors.empty()) << join_messages(r->errors);
  const fs::path fx = root_ / "out" / "django__django-11099";
  const std::string yaml = read_file(fx / "fixture.yaml").value_or("");
  EXPECT_NE(yaml.find("environment:\n"
                      "  image: \"docker://swebench/sweb.eval.x86_64.django_1776_django-11099:"
                      "latest\"\n"
                      "  workdir: \"/testbed\"\n"),
            std::string::npos)
      << yaml;
  EXPECT_EQ(yaml.find("workspace:"), std::string::npos) << "the workspace is the image's /testbed";
  EXPECT_EQ(yaml.find("patch: grader/test.patch"), std::string::npos) << "eval.sh applies it";
  EXPECT_NE(yaml.find("      command: \"bash /grader/eval.sh\"\n"
                      "      report: {format: django}\n"),
            std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("- \"test_ascii_validator (auth_tests.test_validators."
                      "UsernameValidatorsTests)\""),
            std::string::npos)
      << yaml;
  EXPECT_TRUE(fs::exists(fx / "grader" / "test.patch"));
  EXPECT_EQ(fs::status(fx / "grader" / "eval.sh").permissions() & fs::perms::owner_exec,
            fs::perms::owner_exec);
  const std::string eval = read_file(fx / "grader" / "eval.sh").value_or("");
  const std::string want =
      "#!/bin/bash\n"
      "# SWE-bench's evaluation of django__django-11099 in its official image, written by\n"
      "# `evalbox import swebench --images official` after the eval script of SWE-bench's "
      "harness.\n"
      "set -uxo pipefail\n"
      "source /opt/miniconda3/bin/activate\n"
      "conda activate testbed\n"
      "cd /testbed\n"
      "sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen\n"
      "export LANG=en_US.UTF-8\n"
      "export LANGUAGE=en_US:en\n"
      "export LC_ALL=en_US.UTF-8\n"
      "git config --global --add safe.directory /testbed\n"
      "for f in tests/auth_tests/test_validators.py "
      "tests/auth_tests/common-passwords-custom.txt; do\n"
      "  git checkout " +
      commit_ +
      " -- \"$f\" 2>/dev/null || rm -f -- \"$f\"\n"
      "done\n"
      "git apply -v /grader/test.patch ||\n"
      "  patch --batch --fuzz=5 -p1 -i /grader/test.patch\n"
      ": '>>>>> Start Test Output'\n"
      "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 "
      "auth_tests.test_validators\n"
      ": '>>>>> End Test Output'\n";
  EXPECT_EQ(eval, want);
  // The script is bash that parses.
  EXPECT_EQ(std::system(("bash -n " + (fx / "grader" / "eval.sh").string()).c_str()), 0);
  const std::string sympy =
      read_file(root_ / "out" / "sympy__sympy-20590" / "grader" / "eval.sh").value_or("");
  EXPECT_NE(sympy.find("\nPYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C "
                       "--verbose sympy/core/tests/test_basic.py\n"),
            std::string::npos)
      << sympy;
  EXPECT_NE(read_file(root_ / "out" / "sympy__sympy-20590" / "fixture.yaml")
                .value_or("")
                .find("report: {format: sympy}"),
            std::string::npos);
}

TEST_F(SwebenchImport, TestCmdTakesDjangosTestModules) {
  json i = instance("django__django-2");
  i["repo"] = "django/django";
  i["test_patch"] =
      "diff --git a/tests/utils_tests/test_text.py b/tests/utils_tests/test_text.py\n"
      "diff --git a/tests/utils_tests/shout.json b/tests/utils_tests/shout.json\n";
  ASSERT_TRUE(write_file(root_ / "i.jsonl", i.dump() + "\n"));
  fs::create_directories(root_ / "repos" / "django");
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.repos_dir = root_ / "repos";
  o.test_command = "PYTHONPATH=. python3 tests/runtests.py {test_directives} # {test_files}";
  ASSERT_TRUE(import_swebench(o));
  EXPECT_NE(read_file(root_ / "out" / "django__django-2" / "fixture.yaml")
                .value_or("")
                .find("command: \"PYTHONPATH=. python3 tests/runtests.py utils_tests.test_text # "
                      "tests/utils_tests/test_text.py\"\n      report: {format: django}\n"),
            std::string::npos);
}

TEST_F(SwebenchImport, AMirrorPrefixReplacesDockerHub) {
  ASSERT_TRUE(write_file(root_ / "i.jsonl", instance("Acme__Calc-1").dump() + "\n"));
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.official_images = true;
  o.images_prefix = "docker://mirror.local:5000/swebench/";
  auto r = import_swebench(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->imported, (std::vector<std::string>{"acme__calc-1"}));
  const std::string yaml = read_file(root_ / "out" / "acme__calc-1" / "fixture.yaml").value_or("");
  EXPECT_NE(yaml.find("image: \"docker://mirror.local:5000/swebench/"
                      "sweb.eval.x86_64.acme_1776_calc-1:latest\""),
            std::string::npos)
      << yaml;
  // A repository SWE-bench's specs lack: the default command, pytest's report.
  const std::string eval =
      read_file(root_ / "out" / "acme__calc-1" / "grader" / "eval.sh").value_or("");
  EXPECT_NE(eval.find("\npython3 -m pytest -rA -p no:cacheprovider test_calc.py\n"),
            std::string::npos)
      << eval;
  EXPECT_EQ(yaml.find("report:"), std::string::npos) << yaml;
  // The fixture loads: a registry image whose /testbed is the workspace.
  std::vector<config_error> errors;
  auto f = load_fixture(root_ / "out" / "acme__calc-1", &errors);
  ASSERT_TRUE(f) << join_messages(errors);
  ASSERT_TRUE(f->environment);
  EXPECT_EQ(f->environment->image,
            "docker://mirror.local:5000/swebench/sweb.eval.x86_64.acme_1776_calc-1:latest");
  EXPECT_EQ(f->environment->workdir, "/testbed");
  EXPECT_TRUE(f->git_commit.empty());
  EXPECT_EQ(f->checks[0].tests.command, "bash /grader/eval.sh");
  EXPECT_TRUE(f->checks[0].tests.patch.empty());
}

TEST_F(SwebenchImport, EachRepositoryGetsItsCommandAndParserOnTheHostToo) {
  json i = instance("sympy__sympy-1");
  i["repo"] = "sympy/sympy";
  i["test_patch"] =
      "diff --git a/sympy/core/tests/test_basic.py b/sympy/core/tests/test_basic.py\n"
      "--- a/sympy/core/tests/test_basic.py\n+++ b/sympy/core/tests/test_basic.py\n";
  json q = instance("quoted-1");
  q["test_patch"] = "diff --git a/tests/it's.py b/tests/it's.py\n";
  ASSERT_TRUE(write_file(root_ / "i.jsonl", i.dump() + "\n" + q.dump() + "\n"));
  fs::create_directories(root_ / "repos" / "sympy" / "sympy");
  swebench_import_options o;
  o.input = root_ / "i.jsonl";
  o.out = root_ / "out";
  o.repos_dir = root_ / "repos";
  auto r = import_swebench(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->errors.empty()) << join_messages(r->errors);
  const std::string yaml =
      read_file(root_ / "out" / "sympy__sympy-1" / "fixture.yaml").value_or("");
  EXPECT_NE(yaml.find("      patch: grader/test.patch\n"
                      "      command: \"PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' "
                      "bin/test -C --verbose sympy/core/tests/test_basic.py\"\n"
                      "      report: {format: sympy}\n"),
            std::string::npos)
      << yaml;
  std::vector<config_error> errors;
  auto f = load_fixture(root_ / "out" / "quoted-1", &errors);
  ASSERT_TRUE(f) << join_messages(errors);
  EXPECT_EQ(f->checks[0].tests.command,
            "python3 -m pytest -rA -p no:cacheprovider 'tests/it'\\''s.py'");
  // --test-cmd wins over the repository's command.
  o.test_command = "make test ARGS={test_files}";
  ASSERT_TRUE(import_swebench(o));
  EXPECT_NE(read_file(root_ / "out" / "sympy__sympy-1" / "fixture.yaml")
                .value_or("")
                .find("command: \"make test ARGS=sympy/core/tests/test_basic.py\"\n"),
            std::string::npos);
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
