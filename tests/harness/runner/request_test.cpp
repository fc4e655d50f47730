// The phase "request" without a sandbox: what a run's session request hides from the agent
// (grader files always, the fixture's solution unless the plan runs it), in which order
// environments override each other, and the limits, network and bundles it asks for.
#include "harness/runner/request.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

class SessionRequest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_.dir = dir_.path() / "fx";
    fixture_.id = "fx";
    fixture_.digest = "fd";
    fixture_.has_grader = true;
    fixture_.has_solution = true;
    fixture_.has_workspace = true;
    fixture_.limits.wall_ms = 60'000;
    candidate_.id = "c";
    candidate_.adapter = "command";
    plan_.argv = {"/bin/agent", "go"};
    plan_.home.adapter = "command";
  }
  result<sandbox::session_request> request(const sandbox::image_summary* image = nullptr) {
    return make_session_request({fixture_,
                                 candidate_,
                                 plan_,
                                 suite_limits_,
                                 "run-0-00000001",
                                 {"/host/home", "/results"},
                                 "bd",
                                 image});
  }
  // An image as the store would describe it.
  static sandbox::image_summary python_image() {
    sandbox::image_summary i;
    i.reference = "oci:/images/py313:latest";
    i.id = "sha256:" + std::string(64, 'c');
    i.manifest_digest = "sha256:" + std::string(64, 'd');
    i.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1", "HOME=/root", "LANG=C"};
    i.working_dir = "/srv/app";
    return i;
  }
  static bool has(const std::vector<fs::path>& roots, const fs::path& p) {
    return std::find(roots.begin(), roots.end(), p) != roots.end();
  }
  temp_dir dir_;
  fixture_spec fixture_;
  candidate_spec candidate_;
  agent_plan plan_;
  limits_spec suite_limits_;
};

TEST_F(SessionRequest, HidesTheGraderAndTheSolutionFromAnAgent) {
  auto req = request();
  ASSERT_TRUE(req) << req.error().message;
  EXPECT_TRUE(has(req->protected_roots, "/host/home"));
  EXPECT_TRUE(has(req->protected_roots, "/results"));
  EXPECT_TRUE(has(req->protected_roots, fixture_.dir / "grader"));
  EXPECT_TRUE(has(req->protected_roots, fixture_.dir / "solution"));
}

TEST_F(SessionRequest, APlanThatRunsTheSolutionSeesItButNeverTheGrader) {
  plan_.runs_fixture_solution = true;
  auto req = request();
  ASSERT_TRUE(req) << req.error().message;
  EXPECT_FALSE(has(req->protected_roots, fixture_.dir / "solution"));
  EXPECT_TRUE(has(req->protected_roots, fixture_.dir / "grader"));
}

TEST_F(SessionRequest, AFixtureWithoutGraderOrSolutionProtectsOnlyTheGivenRoots) {
  fixture_.has_grader = fixture_.has_solution = false;
  auto req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->protected_roots, (std::vector<fs::path>{"/host/home", "/results"}));
}

TEST_F(SessionRequest, TheCandidatesEnvironmentOverridesThePlansWhichOverridesTheBase) {
  plan_.env = {{"PATH", "/plan/bin"}, {"A", "plan"}, {"B", "plan"}};
  candidate_.env = {{"B", "candidate"}};
  auto req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->env.at("PATH"), "/plan/bin");
  EXPECT_EQ(req->env.at("A"), "plan");
  EXPECT_EQ(req->env.at("B"), "candidate");
  EXPECT_EQ(req->env.at("HOME"), "/home/agent");  // from the base environment
}

TEST_F(SessionRequest, HomeFilesAreReadIntoTheHome) {
  ASSERT_TRUE(write_file(dir_.path() / "x.toml", "x = 1\n"));
  candidate_.home_files[".config/x.toml"] = dir_.path() / "x.toml";
  auto req = request();
  ASSERT_TRUE(req);
  ASSERT_EQ(req->home.files.size(), 1u);
  EXPECT_EQ(req->home.files[0].path, ".config/x.toml");
  EXPECT_EQ(req->home.files[0].content, "x = 1\n");
  candidate_.home_files[".config/y.toml"] = dir_.path() / "missing.toml";
  auto missing = request();
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("missing.toml"), std::string::npos);
}

TEST_F(SessionRequest, LimitsNetworkAndBundlesComeFromFixtureCandidateAndSuite) {
  suite_limits_.wall_ms = 5'000;
  suite_limits_.memory_bytes = 1 << 20;
  fixture_.has_bin = true;
  fixture_.network.mode = network_spec::mode_kind::allow;
  fixture_.network.allow = {"api.example.com:443"};
  auto before = std::chrono::system_clock::now();
  auto req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->run_id, "run-0-00000001");
  EXPECT_EQ(req->limits.wall_ms, 60'000u);        // the fixture's own wins
  EXPECT_EQ(req->limits.memory_bytes, 1u << 20);  // the suite's default
  EXPECT_EQ(req->network.mode, sandbox::network_mode::allow);
  EXPECT_EQ(req->network.allow, std::vector<std::string>{"api.example.com:443"});
  ASSERT_EQ(req->bundles.size(), 1u);
  EXPECT_EQ(req->bundles[0].target, "/evalbox/bin");
  EXPECT_EQ(req->bundles[0].sha256, "bd");
  EXPECT_GE(req->authorized_until,
            before + std::chrono::hours(1) + std::chrono::milliseconds(4 * 60'000));
  EXPECT_EQ(req->workspace.source, fixture_.dir / "workspace");
  EXPECT_EQ(req->workspace.digest, "fd");
  // A candidate's own network wins over the fixture's.
  candidate_.network = network_spec{};
  req = request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->network.mode, sandbox::network_mode::none);
}

}  // namespace
}  // namespace evalbox::harness

namespace evalbox::harness {
namespace {

// With an image: the request names it, the image's Env joins the base environment (its PATH
// after the fixture's bin/, HOME staying the managed home), and the plan and candidate still
// override it.
TEST_F(SessionRequest, AnImagesEnvironmentSitsBetweenTheBaseAndThePlan) {
  const auto image = python_image();
  fixture_.environment = environment_spec{};
  plan_.env = {{"LANG", "plan"}};
  auto req = request(&image);
  ASSERT_TRUE(req) << req.error().message;
  ASSERT_TRUE(req->image);
  EXPECT_EQ(req->image->id, image.id);
  EXPECT_EQ(req->image->manifest_digest, image.manifest_digest);
  EXPECT_EQ(req->env.at("PATH"), "/evalbox/bin:/usr/local/bin:/usr/bin:/bin");
  EXPECT_EQ(req->env.at("PYTHONUNBUFFERED"), "1");
  EXPECT_EQ(req->env.at("HOME"), "/home/agent");
  EXPECT_EQ(req->env.at("LANG"), "plan");
  // The fixture has workspace/: it is /workspace, whatever the image's WorkingDir.
  EXPECT_EQ(req->workspace.source, fixture_.dir / "workspace");
  EXPECT_EQ(req->workspace.target, "/workspace");
}

// Without workspace/, the workspace is a directory of the image: the fixture's workdir, else
// the image's WorkingDir, else an empty /workspace.
TEST_F(SessionRequest, WithoutWorkspaceTheWorkdirOfTheFixtureThenTheImageIsTheWorkspace) {
  auto image = python_image();
  fixture_.has_workspace = false;
  fixture_.environment = environment_spec{};
  fixture_.environment->workdir = "/app";
  auto req = request(&image);
  ASSERT_TRUE(req) << req.error().message;
  EXPECT_TRUE(req->workspace.source.empty());
  EXPECT_EQ(req->workspace.image_dir, "/app");
  EXPECT_EQ(req->workspace.target, "/app");

  fixture_.environment->workdir.reset();
  EXPECT_EQ(request(&image)->workspace.target, "/srv/app");
  image.working_dir = "/";
  EXPECT_EQ(request(&image)->workspace.target, "/workspace");
  image.working_dir.clear();
  EXPECT_EQ(request(&image)->workspace.image_dir, "/workspace");
}

sandbox::image_summary exec_image() {
  sandbox::image_summary i;
  i.reference = "oci:/images/py313:latest";
  i.id = "sha256:" + std::string(64, 'c');
  i.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1", "HOME=/root", "LANG=C"};
  i.working_dir = "/srv/app";
  return i;
}

// `evalbox sandbox exec`: the same reading of an image as a run's, but no /evalbox/bin and no
// fixture; the caller's terminal variables pass through.
TEST(ExecRequest, TakesTheImagesEnvironmentAndWorkingDirectory) {
  auto image = exec_image();
  exec_request_inputs in;
  in.session_id = "sandbox-1";
  in.argv = {"/bin/sh", "-c", "true"};
  in.image = &image;
  in.passed_env = {{"TERM", "xterm"}, {"LANG", "en_US.UTF-8"}};
  in.limits.memory_bytes = 1u << 30;
  in.landlock = false;
  auto r = make_exec_request(in);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->env.at("PATH"), "/usr/local/bin:/usr/bin:/bin") << "no /evalbox/bin here";
  EXPECT_EQ(r->env.at("HOME"), "/home/agent") << "the image's HOME never wins";
  EXPECT_EQ(r->env.at("PYTHONUNBUFFERED"), "1");
  EXPECT_EQ(r->env.at("LANG"), "en_US.UTF-8") << "the caller's over the image's";
  EXPECT_EQ(r->env.at("TERM"), "xterm");
  EXPECT_EQ(r->workspace.target, "/srv/app");
  EXPECT_EQ(r->workspace.image_dir, "/srv/app");
  EXPECT_TRUE(r->workspace.source.empty());
  ASSERT_TRUE(r->image);
  EXPECT_EQ(r->image->id, image.id);
  EXPECT_EQ(r->limits.memory_bytes, 1u << 30);
  EXPECT_FALSE(r->landlock);
  EXPECT_EQ(r->home.adapter, "sandbox");
}

TEST(ExecRequest, AHostDirectoryIsTheWorkspaceWhateverTheImageSays) {
  auto image = exec_image();
  exec_request_inputs in;
  in.argv = {"/bin/true"};
  in.workspace = "/srv/repo/./src/..";
  in.image = &image;
  auto r = make_exec_request(in);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->workspace.source, "/srv/repo/");
  EXPECT_TRUE(r->workspace.image_dir.empty());
}

TEST(ExecRequest, AnImageWithoutAUsableWorkingDirectoryWorksInWorkspace) {
  for (const char* wd : {"", "/", "relative/dir"}) {
    auto image = exec_image();
    image.working_dir = wd;
    exec_request_inputs in;
    in.argv = {"/bin/true"};
    in.image = &image;
    auto r = make_exec_request(in);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->workspace.target, "/workspace") << "WorkingDir '" << wd << "'";
  }
}

TEST(ExecRequest, RefusesNoCommandAndNothingToRunIn) {
  exec_request_inputs in;
  in.workspace = "/srv/repo";
  EXPECT_EQ(make_exec_request(in).error().kind, error_kind::invalid_argument);
  in.argv = {"/bin/true"};
  in.workspace.clear();
  EXPECT_EQ(make_exec_request(in).error().message, "neither a workspace nor an image");
}

}  // namespace
}  // namespace evalbox::harness
