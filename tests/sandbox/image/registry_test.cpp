// The registry client's pure parts: WWW-Authenticate challenges, registries.conf, and the
// credential lookup over auth files and credential helpers. No network: what a registry says
// and what a user's files hold, and that a secret never reaches an error message.
#include "sandbox/image/registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/base64.h"
#include "base/fs.h"
#include "sandbox/http/client.h"

namespace evalbox::sandbox::image {
namespace {

namespace fs = std::filesystem;

// ---- parse_challenge ----

TEST(ParseChallenge, BearerWithQuotedValues) {
  auto c = parse_challenge(
      R"(Bearer realm="https://auth.example.io/token",service="registry.example.io",)"
      R"(scope="repository:org/app:pull")");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->scheme, "bearer");
  EXPECT_EQ(c->params.size(), 3u);
  EXPECT_EQ(c->params.at("realm"), "https://auth.example.io/token");
  EXPECT_EQ(c->params.at("service"), "registry.example.io");
  EXPECT_EQ(c->params.at("scope"), "repository:org/app:pull");
}

TEST(ParseChallenge, UnquotedValuesAndSpaceAroundSeparators) {
  auto c = parse_challenge("  Bearer  realm = https://auth.example.io/token ,\tservice=svc");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->scheme, "bearer");
  EXPECT_EQ(c->params.at("realm"), "https://auth.example.io/token");
  EXPECT_EQ(c->params.at("service"), "svc");
}

TEST(ParseChallenge, EscapesInQuotedValuesAreUndone) {
  auto c = parse_challenge(
      R"(Bearer realm="https://a/t",error="invalid_token",error_description="say \"no\" \\ now")");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->params.at("error"), "invalid_token");
  EXPECT_EQ(c->params.at("error_description"), R"(say "no" \ now)");
  // A comma inside quotes is part of the value, not a separator.
  auto comma = parse_challenge(R"(Bearer realm="https://a/t",scope="repository:a:pull,push")");
  ASSERT_TRUE(comma) << comma.error().message;
  EXPECT_EQ(comma->params.at("scope"), "repository:a:pull,push");
}

TEST(ParseChallenge, BasicNeedsNoRealm) {
  auto c = parse_challenge(R"(Basic realm="Registry Realm")");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->scheme, "basic");
  EXPECT_EQ(c->params.at("realm"), "Registry Realm");
  auto bare = parse_challenge("Basic");
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_EQ(bare->scheme, "basic");
  EXPECT_TRUE(bare->params.empty());
}

TEST(ParseChallenge, SchemeAndParameterNamesAreLowercasedValuesAreNot) {
  auto c = parse_challenge(R"(BEARER Realm="https://A.example/Token",SERVICE=Svc)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->scheme, "bearer");
  EXPECT_EQ(c->params.at("realm"), "https://A.example/Token");
  EXPECT_EQ(c->params.at("service"), "Svc");
}

TEST(ParseChallenge, MalformedHeadersAreRefusedWithTheReason) {
  struct {
    std::string header, why;
  } cases[] = {
      {"", "no scheme"},
      {"   ", "no scheme"},
      {R"(="x")", "no scheme"},
      {R"(Bearer1 realm="x")", "no scheme"},
      {"Bearer realm", "without '='"},
      {R"(Bearer realm="x",service)", "without '='"},
      {R"(Bearer ="x")", "without '='"},
      {"Bearer realm=", "an empty value"},
      {R"(Bearer realm="https://a/t,service=svc)", "unclosed quote"},
      {R"(Bearer realm="x\)", "unclosed quote"},
      {R"(Bearer service="svc",scope="repository:a:pull")", "without realm"},
      {"Bearer", "without realm"},
      {R"(Bearer realm="x";service="y")", "not separated by ','"},
      {R"(Bearer realm="x" service="y")", "not separated by ','"},
      {R"(Bearer realm="x",,service="y")", "without '='"},
      {"Bearer realm=<x>", "an empty value"},
      {R"(Basic realm="r" junk)", "not separated by ','"},
      {R"(Bearer realm="x",service=")" + std::string(10 * 1024, 'v') + "\"", "over 4096 bytes"},
      {"Bearer realm=" + std::string(10 * 1024, 'v'), "over 4096 bytes"},
  };
  for (const auto& c : cases) {
    auto r = parse_challenge(c.header);
    ASSERT_FALSE(r) << c.header.substr(0, 80) << " was accepted";
    EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
    EXPECT_NE(r.error().message.find("malformed WWW-Authenticate"), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find(c.why), std::string::npos)
        << c.header.substr(0, 80) << ": " << r.error().message;
    EXPECT_LT(r.error().message.size(), 200u) << "the header is not echoed whole";
  }
}

// ---- apply_registries_conf ----

constexpr std::string_view conf = R"(
unqualified-search-registries = ["registry.fedoraproject.org", "docker.io"]

[aliases]
"py" = "docker.io/library/python"
"tools/jq" = "quay.io/team/jq"

[[registry]]
location = "insecure.example:5000"
insecure = true

[[registry]]
prefix = "docker.io"
location = "docker.io"

[[registry.mirror]]
location = "mirror.example.com/dockerhub"

[[registry.mirror]]
location = "plain-mirror.example:8080"
insecure = true

[[registry]]
location = "secure.example"
insecure = false
)";

TEST(RegistriesConf, AliasesInsecureAndMirrors) {
  registry_settings s;
  ASSERT_TRUE(apply_registries_conf(conf, "/etc/containers/registries.conf", s));
  EXPECT_EQ(s.aliases, (std::vector<std::pair<std::string, std::string>>{
                           {"py", "docker.io/library/python"}, {"tools/jq", "quay.io/team/jq"}}));
  EXPECT_EQ(s.insecure,
            (std::vector<std::string>{"insecure.example:5000", "plain-mirror.example:8080"}));
  ASSERT_EQ(s.mirrors.size(), 1u);
  EXPECT_EQ(s.mirrors.at("docker.io"), (std::vector<std::string>{"mirror.example.com/dockerhub",
                                                                 "plain-mirror.example:8080"}));
}

TEST(RegistriesConf, TheUsersFileAddsToTheSystems) {
  registry_settings s;
  ASSERT_TRUE(apply_registries_conf(conf, "system", s));
  ASSERT_TRUE(apply_registries_conf(
      "unqualified-search-registries = [\"ghcr.io\"]\n[aliases]\nbox = \"docker.io/library/"
      "busybox\"\n",
      "user", s));
  ASSERT_EQ(s.aliases.size(), 3u);
  EXPECT_EQ(s.aliases.back(),
            (std::pair<std::string, std::string>{"box", "docker.io/library/busybox"}));
  EXPECT_EQ(s.mirrors.at("docker.io").size(), 2u);
}

TEST(RegistriesConf, ABlockedRegistryIsKeptWithTheFileThatBlockedIt) {
  registry_settings s;
  ASSERT_TRUE(apply_registries_conf(
      "[[registry]]\nlocation = \"docker.io\"\nblocked = true\n[[registry]]\nlocation = "
      "\"quay.io/org\"\nblocked = true\n[[registry]]\nlocation = \"ghcr.io\"\nblocked = false\n",
      "/etc/containers/registries.conf", s));
  EXPECT_EQ(s.blocked, (std::vector<std::pair<std::string, std::string>>{
                           {"docker.io", "/etc/containers/registries.conf"},
                           {"quay.io/org", "/etc/containers/registries.conf"}}));
}

TEST(RegistriesConf, AnEmptyFileChangesNothing) {
  registry_settings s;
  s.aliases = {{"py", "docker.io/library/python"}};
  ASSERT_TRUE(apply_registries_conf("# nothing here\n", "empty.conf", s));
  EXPECT_EQ(s.aliases.size(), 1u);
  EXPECT_TRUE(s.mirrors.empty());
  EXPECT_TRUE(s.insecure.empty());
}

TEST(RegistriesConf, ASyntaxErrorNamesTheFileAndLine) {
  registry_settings s;
  auto st =
      apply_registries_conf("[aliases]\n\"py\" = \"docker.io/library/python\"\nthis is not toml\n",
                            "/home/u/.config/containers/registries.conf", s);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().kind, error_kind::invalid_argument);
  EXPECT_EQ(st.error().message.rfind("/home/u/.config/containers/registries.conf:3: ", 0), 0u)
      << st.error().message;
  auto unclosed =
      apply_registries_conf("unqualified-search-registries = [\"a\"\n\n[x]\n", "r.conf", s);
  ASSERT_FALSE(unclosed);
  EXPECT_EQ(unclosed.error().message.rfind("r.conf:", 0), 0u) << unclosed.error().message;
}

// ---- find_credential ----

constexpr std::string_view secret_a = "s3cret-from-file-a";
constexpr std::string_view secret_b = "s3cret-from-file-b";

// The username found, or why there is none (for the assertions' messages).
std::string user_of(const result<std::optional<credential>>& c) {
  if (!c) return "error: " + c.error().message;
  return *c ? (*c)->username : "none";
}

std::string auth(std::string_view user, std::string_view secret) {
  return base64_encode(std::string(user) + ":" + std::string(secret));
}

class FindCredential : public ::testing::Test {
 protected:
  fs::path file(const std::string& name, const std::string& text) {
    fs::path p = tmp_.path() / name;
    EXPECT_TRUE(write_file(p, text, 0600));
    return p;
  }
  // The settings with these files, a missing one first (skipped).
  registry_settings with(std::vector<fs::path> files) {
    registry_settings s;
    s.auth_files.push_back(tmp_.path() / "does-not-exist.json");
    for (auto& f : files) s.auth_files.push_back(std::move(f));
    s.credential_helper = [this](const std::string& helper,
                                 const std::string& server) -> result<std::string> {
      asked_.emplace_back(helper, server);
      if (helper == "empty") return make_error(error_kind::not_found, "credentials not found");
      if (helper == "broken") return make_error(error_kind::io, "exit status 1");
      if (helper == "prose") return std::string("Username: h\nSecret: helper-secret-prose\n");
      if (helper == "token")
        return std::string(R"({"ServerURL":")") + server +
               R"(","Username":"<token>","Secret":"helper-identity-token"})";
      return std::string(R"({"ServerURL":")") + server +
             R"(","Username":"helper-user","Secret":"helper-secret"})";
    };
    return s;
  }

  base::temp_dir tmp_{"registry-test"};
  std::vector<std::pair<std::string, std::string>> asked_;
};

TEST_F(FindCredential, ByHostFromTheFirstFileThatHasOne) {
  auto a = file("a.json", R"({"auths":{"registry.example:5000":{"auth":")" +
                              auth("alice", secret_a) + R"("}}})");
  auto b =
      file("b.json", R"({"auths":{"registry.example:5000":{"auth":")" + auth("bob", secret_b) +
                         R"("},"other.example":{"auth":")" + auth("carol", secret_b) + R"("}}})");
  auto s = with({a, b});
  auto c = find_credential(s, "registry.example:5000", "team/app");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(*c);
  EXPECT_EQ((*c)->username, "alice");
  EXPECT_EQ((*c)->secret, secret_a);
  EXPECT_EQ((*c)->from, a.string());
  auto other = find_credential(s, "other.example", "x");
  ASSERT_TRUE(other && *other) << user_of(other);
  EXPECT_EQ((*other)->username, "carol");
  EXPECT_EQ((*other)->from, b.string());
  auto none = find_credential(s, "unknown.example", "x");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(*none);
  // A key written as a URL names the same host.
  auto url = file("url.json", R"({"auths":{"https://registry.example:5000/":{"auth":")" +
                                  auth("dave", secret_a) + R"("}}})");
  auto byurl = find_credential(with({url}), "registry.example:5000", "team/app");
  EXPECT_EQ(user_of(byurl), "dave");
}

TEST_F(FindCredential, TheMostSpecificNamespaceFirst) {
  auto f = file("ns.json", R"({"auths":{)"
                           R"("registry.example":{"auth":")" +
                               auth("host", "p-host") +
                               R"("},)"
                               R"("registry.example/team":{"auth":")" +
                               auth("team", "p-team") +
                               R"("},)"
                               R"("registry.example/team/app":{"auth":")" +
                               auth("app", "p-app") + R"("}}})");
  auto s = with({f});
  EXPECT_EQ(user_of(find_credential(s, "registry.example", "team/app")), "app");
  EXPECT_EQ(user_of(find_credential(s, "registry.example", "team/app/sub")), "app");
  EXPECT_EQ(user_of(find_credential(s, "registry.example", "team/other")), "team");
  EXPECT_EQ(user_of(find_credential(s, "registry.example", "elsewhere/x")), "host");
  // "team" is a namespace, not a prefix of "teamwork".
  EXPECT_EQ(user_of(find_credential(s, "registry.example", "teamwork/x")), "host");
}

TEST_F(FindCredential, DockerHubUnderEachOfItsKeys) {
  for (std::string key : {"docker.io", "index.docker.io", "registry-1.docker.io",
                          "https://index.docker.io/v1/", "https://index.docker.io/v1"}) {
    auto f = file("hub.json", R"({"auths":{")" + key + R"(":{"auth":")" +
                                  auth("hubuser", secret_a) + R"("}}})");
    auto c = find_credential(with({f}), "docker.io", "library/python");
    ASSERT_TRUE(c) << key << ": " << c.error().message;
    ASSERT_TRUE(*c) << key;
    EXPECT_EQ((*c)->username, "hubuser") << key;
    EXPECT_EQ((*c)->secret, secret_a) << key;
    // Those keys are Docker Hub's only.
    auto elsewhere = find_credential(with({f}), "ghcr.io", "library/python");
    ASSERT_TRUE(elsewhere);
    EXPECT_FALSE(*elsewhere) << key;
  }
}

TEST_F(FindCredential, UsernameAndPasswordFormAndIdentityToken) {
  auto f = file("up.json", R"({"auths":{)"
                           R"("r.example":{"username":"bob","password":"pw-of-bob"},)"
                           R"("t.example":{"identitytoken":"refresh-token-t"}}})");
  auto s = with({f});
  auto c = find_credential(s, "r.example", "x/y");
  ASSERT_TRUE(c && *c) << user_of(c);
  EXPECT_EQ((*c)->username, "bob");
  EXPECT_EQ((*c)->secret, "pw-of-bob");
  auto t = find_credential(s, "t.example", "x");
  ASSERT_TRUE(t && *t) << user_of(t);
  EXPECT_EQ((*t)->identity, "refresh-token-t");
  EXPECT_TRUE((*t)->secret.empty());
}

// base64 pads user:password of 3n+1 and 3n+2 bytes with "==" and "=": each length decodes.
TEST_F(FindCredential, AuthValuesOfEveryLengthDecode) {
  for (std::string password : {"p", "pw", "pw3", "pw-4", "pw-05", "pw-006"}) {
    const std::string value = auth("u", password);
    auto f = file("len.json", R"({"auths":{"r.example":{"auth":")" + value + R"("}}})");
    auto c = find_credential(with({f}), "r.example", "x");
    ASSERT_TRUE(c && *c) << value << ": " << user_of(c);
    EXPECT_EQ((*c)->username, "u") << value;
    EXPECT_EQ((*c)->secret, password) << value;
  }
}

TEST_F(FindCredential, ABadAuthValueIsAnErrorThatDoesNotRepeatIt) {
  const std::string not_base64 = "!!" + std::string(secret_a) + "!!";
  const std::string no_colon = base64_encode(secret_b);
  // Padding inside the value, not at its end.
  std::string pad_inside = base64_encode(std::string(secret_a) + "x");
  pad_inside.insert(4, "====");
  for (const std::string& value : {not_base64, no_colon, pad_inside}) {
    auto f = file("bad.json", R"({"auths":{"r.example":{"auth":")" + value + R"("}}})");
    auto c = find_credential(with({f}), "r.example", "x");
    ASSERT_FALSE(c) << value;
    EXPECT_EQ(c.error().kind, error_kind::invalid_argument);
    EXPECT_NE(c.error().message.find(f.string()), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("base64"), std::string::npos) << c.error().message;
    EXPECT_EQ(c.error().message.find(value), std::string::npos) << c.error().message;
    EXPECT_EQ(c.error().message.find(secret_a), std::string::npos) << c.error().message;
    EXPECT_EQ(c.error().message.find(secret_b), std::string::npos) << c.error().message;
  }
}

TEST_F(FindCredential, AFileThatIsNotJsonIsNamed) {
  auto f = file("garbage.json", std::string("{\"auths\": ") + std::string(secret_a));
  auto c = find_credential(with({f}), "r.example", "x");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(f.string()), std::string::npos) << c.error().message;
  EXPECT_EQ(c.error().message.find(secret_a), std::string::npos) << c.error().message;
}

TEST_F(FindCredential, CredHelpersAskTheHelperForThatHost) {
  auto f = file("helpers.json", R"({"credHelpers":{"r.example":"fake","t.example":"token"},)"
                                R"("auths":{"r.example":{"auth":")" +
                                    auth("from-auths", secret_a) + R"("}}})");
  auto s = with({f});
  auto c = find_credential(s, "r.example", "team/app");
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(*c);
  // The helper outranks the file's own auths, as in docker.
  EXPECT_EQ((*c)->username, "helper-user");
  EXPECT_EQ((*c)->secret, "helper-secret");
  EXPECT_EQ((*c)->from, "docker-credential-fake");
  EXPECT_EQ(asked_, (std::vector<std::pair<std::string, std::string>>{{"fake", "r.example"}}));
  // "<token>" is how a helper hands over an identity token.
  auto t = find_credential(s, "t.example", "x");
  ASSERT_TRUE(t && *t) << user_of(t);
  EXPECT_EQ((*t)->identity, "helper-identity-token");
  EXPECT_TRUE((*t)->username.empty());
  EXPECT_TRUE((*t)->secret.empty());
}

TEST_F(FindCredential, CredsStoreIsAskedWhenNothingElseAnswers) {
  auto f = file("store.json", R"({"credsStore":"desktop","auths":{"r.example":{"auth":")" +
                                  auth("from-auths", secret_a) + R"("}}})");
  auto s = with({f});
  auto hub = find_credential(s, "docker.io", "library/python");
  ASSERT_TRUE(hub && *hub) << user_of(hub);
  EXPECT_EQ((*hub)->from, "docker-credential-desktop");
  auto other = find_credential(s, "q.example", "x");
  ASSERT_TRUE(other && *other) << user_of(other);
  // The file's auths come before its store.
  auto listed = find_credential(s, "r.example", "x");
  ASSERT_TRUE(listed && *listed) << user_of(listed);
  EXPECT_EQ((*listed)->username, "from-auths");
  // Docker Hub is asked for by the URL docker login stored it under.
  EXPECT_EQ(asked_, (std::vector<std::pair<std::string, std::string>>{
                        {"desktop", "https://index.docker.io/v1/"}, {"desktop", "q.example"}}));
}

TEST_F(FindCredential, AHelperWithoutTheCredentialPassesToTheNextFile) {
  auto first = file("first.json", R"({"credHelpers":{"r.example":"empty"}})");
  auto second = file("second.json",
                     R"({"auths":{"r.example":{"auth":")" + auth("second", secret_b) + R"("}}})");
  auto c = find_credential(with({first, second}), "r.example", "x");
  ASSERT_TRUE(c && *c) << user_of(c);
  EXPECT_EQ((*c)->username, "second");
  EXPECT_EQ((*c)->from, second.string());
}

TEST_F(FindCredential, HelperFailuresNameTheHelperNotTheSecret) {
  auto broken = file("broken.json", R"({"credHelpers":{"r.example":"broken"}})");
  auto c = find_credential(with({broken}), "r.example", "x");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("docker-credential-broken"), std::string::npos)
      << c.error().message;
  EXPECT_NE(c.error().message.find(broken.string()), std::string::npos) << c.error().message;

  auto prose = file("prose.json", R"({"credHelpers":{"r.example":"prose"}})");
  auto p = find_credential(with({prose}), "r.example", "x");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("docker-credential-prose"), std::string::npos);
  EXPECT_EQ(p.error().message.find("helper-secret-prose"), std::string::npos) << p.error().message;

  // Without a way to run helpers the file's choice is reported, not ignored.
  auto s = with({file("h.json", R"({"credHelpers":{"r.example":"fake"}})")});
  s.credential_helper = nullptr;
  auto u = find_credential(s, "r.example", "x");
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().kind, error_kind::unsupported);
  EXPECT_NE(u.error().message.find("docker-credential-fake"), std::string::npos);
}

TEST_F(FindCredential, NoFilesNoCredential) {
  registry_settings s;
  s.auth_files = {tmp_.path() / "a.json", tmp_.path() / "b.json"};
  auto c = find_credential(s, "r.example", "x");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(*c);
}

}  // namespace
}  // namespace evalbox::sandbox::image
