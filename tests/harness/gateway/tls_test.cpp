// The gateway's upstream over TLS, as a real model API is reached: verified against the CA in
// gateway.ca_files (a TLS server the test runs, with certificates it makes), the real key sent
// inside the tunnel; an upstream whose certificate does not verify gets nothing, and the client
// an answer in its API's shape instead of a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "base/fs.h"
#include "base/json.h"
#include "harness/gateway/gateway.h"
#include "sandbox/http/client.h"
#include "tests/sandbox/http/loopback.h"

namespace evalbox::harness::gateway {
namespace {

namespace http = sandbox::http;
using namespace evalbox::testing;

const std::string real_key = "sk-real-key-sent-only-inside-tls-0123456789";

class GatewayTls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto error = make_test_certificates(dir_.path());
    ASSERT_FALSE(error) << "making certificates with openssl: " << *error;
  }
  std::unique_ptr<model_gateway> start(const tls_server& s, bool trust) {
    gateway_options o;
    o.upstream = fmt::format("https://localhost:{}/v1", s.port());
    if (trust) o.ca_files = {(dir_.path() / "ca.pem").string()};
    o.key = real_key;
    o.upstream_head_timeout = 10s;
    return model_gateway::start(std::move(o)).value();
  }
  static http::reply post(const model_gateway& g) {
    http::request r;
    r.method = "POST";
    r.to = http::parse_url(fmt::format("{}/responses", g.base_url())).value();
    r.headers = {{"Authorization", "Bearer " + g.placeholder()}};
    r.body = R"({"model":"m","input":"hi"})";
    http::options o;
    o.head_timeout = 15s;
    return http::fetch_all(r, o, 1u << 20).value();
  }

  temp_dir dir_{"evalbox-gateway-tls"};
};

TEST_F(GatewayTls, TheUpstreamIsVerifiedWithTheCaFilesAndGetsTheKeyInsideTls) {
  tls_server s(dir_.path() / "leaf.pem", dir_.path() / "leaf.key", dir_.path() / "requests");
  auto g = start(s, true);
  auto r = post(*g);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  const auto reqs = s.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].rfind("POST /v1/responses HTTP/1.1\r\n", 0), 0u) << reqs[0];
  EXPECT_TRUE(contains(reqs[0], "\r\nAuthorization: Bearer " + real_key + "\r\n")) << reqs[0];
  EXPECT_FALSE(contains(reqs[0], g->placeholder())) << reqs[0];
  EXPECT_EQ(g->totals().failed, 0u);
}

TEST_F(GatewayTls, AnUpstreamThatDoesNotVerifyGetsNothing) {
  for (const bool trust : {false, true}) {
    // Untrusted: the host's store does not know the test CA. Trusted CA, wrong name: `other`
    // is other.test's certificate, asked for as localhost.
    tls_server s(dir_.path() / (trust ? "other.pem" : "leaf.pem"),
                 dir_.path() / (trust ? "other.key" : "leaf.key"), dir_.path() / "refused");
    auto g = start(s, trust);
    auto r = post(*g);
    EXPECT_EQ(r.status, 502) << r.body;
    const json body = json::parse(r.body);
    EXPECT_EQ(body["error"]["code"], "upstream_unreachable") << r.body;
    EXPECT_TRUE(contains(body["error"]["message"].get<std::string>(), "TLS")) << r.body;
    EXPECT_FALSE(contains(r.body, real_key));
    EXPECT_TRUE(s.requests().empty());
    EXPECT_EQ(g->totals().failed, 1u);
  }
}

}  // namespace
}  // namespace evalbox::harness::gateway
