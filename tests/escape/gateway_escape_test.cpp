// Escape tests for the model gateway: a run's sandbox whose network allows only its gateway (as
// the runner makes it), a hostile program inside, an upstream and a second run's gateway on the
// host's loopback. The program reaches its own gateway with its own placeholder and nothing
// else: not the upstream around the gateway, not another run's gateway, not with another run's
// placeholder, not outside the upstream's path, and not once its gateway has stopped. The
// upstream counts what got through.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <tuple>
#include <vector>

#include "base/fs.h"
#include "harness/gateway/gateway.h"
#include "sandbox/http/server.h"
#include "sandbox/launch/launcher.h"
#include "tests/support/isolation.h"
#include "tests/support/prep_env.h"

namespace evalbox::sandbox {
namespace {

namespace fs = std::filesystem;
namespace gw = evalbox::harness::gateway;
using evalbox::testing::prep_env;
using namespace std::chrono_literals;

const fs::path tools_dir = fs::path(EVALBOX_BINARY_DIR) / "tests" / "escape";
const std::string hostile = "/evalbox/tools/evalbox-hostile";

class GatewayEscape : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& h = evalbox::testing::host();
    EVALBOX_REQUIRE_FEATURE(h.user_namespaces && h.mount_namespaces && h.pid_namespaces &&
                                h.net_namespaces && h.seccomp_filter,
                            "user, mount, pid, net namespaces and seccomp");
    EVALBOX_REQUIRE_FEATURE(!h.cgroup_v1_controllers.empty() || !h.cgroup_v2_controllers.empty(),
                            "a writable cgroup hierarchy (memory, pids)");
    upstream_ =
        http::server::start({}, [this](const http::incoming_request&, http::response_stream& out) {
          ++reached_;
          const std::string body = R"({"object":"response","usage":{"input_tokens":1}})";
          (void)out.begin(200, {{"Content-Type", "application/json"}}, body.size());
          (void)out.write(body);
          (void)out.end();
        }).value();
    mine_ = start_gateway();
    other_ = start_gateway();
    prep_.emplace(env_.options());
    auto req = env_.request("gateway-escape");
    req.network.mode = network_mode::allow;
    req.network.allow = {fmt::format("127.0.0.1:{}", mine_->port())};
    req.limits.wall_ms = 60000;
    req.limits.pids = 64;
    auto s = prep_->prepare(req);
    ASSERT_TRUE(s) << s.error().message;
    session_.emplace(std::move(*s));
  }
  void TearDown() override {
    if (session_) {
      EXPECT_TRUE(session_->close());
    }
    if (upstream_) upstream_->stop();
  }

  std::unique_ptr<gw::model_gateway> start_gateway() {
    gw::gateway_options o;
    o.upstream = fmt::format("http://127.0.0.1:{}/v1", upstream_->port());
    o.key = "sk-escape-test-real-key-0123456789";
    o.upstream_head_timeout = 5s;
    return gw::model_gateway::start(std::move(o)).value();
  }

  // The hostile program's answers to POSTs inside the sandbox, one line each, from one launch.
  std::string post(const std::vector<std::tuple<uint16_t, std::string, std::string>>& asks) {
    std::string script;
    for (const auto& [port, path, key] : asks)
      script += fmt::format("{} http 127.0.0.1 {} '{}' '{}'; ", hostile, port, path, key);
    launch_options o;
    o.label = "gateway-escape";
    o.argv = {"/bin/sh", "-c", script};
    o.extra_mounts.push_back({tools_dir, "/evalbox/tools", false, false});
    o.stdout_path = out_.path() / "stdout";
    auto r = launch_in(*session_, o);
    EXPECT_TRUE(r) << r.error().message;
    return read_file(out_.path() / "stdout").value_or("");
  }

  prep_env env_;
  temp_dir out_{"evalbox-gateway-escape"};
  std::unique_ptr<http::server> upstream_;
  std::atomic<int> reached_{0};
  std::unique_ptr<gw::model_gateway> mine_, other_;
  std::optional<preparer> prep_;
  std::optional<prepared_session> session_;
};

TEST_F(GatewayEscape, OnlyItsOwnGatewayWithItsOwnPlaceholderGetsThrough) {
  const std::string mine = mine_->placeholder();
  const std::string answers = post({
      {mine_->port(), "/v1/responses", mine},
      // Another run's placeholder, at this run's gateway: refused there.
      {mine_->port(), "/v1/responses", other_->placeholder()},
      // Outside the upstream's path, with dot segments raw and escaped.
      {mine_->port(), "/v1/../admin", mine},
      {mine_->port(), "/v1/%2e%2e/admin", mine},
      {mine_->port(), "/admin", mine},
      // Around the gateway: the upstream, and another run's gateway, are not reachable at all.
      {upstream_->port(), "/v1/responses", "sk-escape-test-real-key-0123456789"},
      {other_->port(), "/v1/responses", other_->placeholder()},
  });
  EXPECT_EQ(answers,
            "http 200\nhttp 401\nhttp 404\nhttp 404\nhttp 404\n"
            "refused connect: ECONNREFUSED\nrefused connect: ECONNREFUSED\n");
  EXPECT_EQ(reached_, 1);
  EXPECT_EQ(mine_->totals().refused, 4u);
  EXPECT_EQ(other_->totals().calls + other_->totals().refused, 0u);
}

TEST_F(GatewayEscape, ThePlaceholderIsWorthNothingOnceItsGatewayStopped) {
  const uint16_t port = mine_->port();
  const std::string placeholder = mine_->placeholder();
  (void)mine_->stop();
  const std::string answer = post({{port, "/v1/responses", placeholder}});
  EXPECT_TRUE(answer == "http none\n" || answer == "refused connect: ECONNREFUSED\n") << answer;
  EXPECT_EQ(reached_, 0);
}

}  // namespace
}  // namespace evalbox::sandbox
