// Single configuration values: ids, environment names, host:port entries (with what is wrong
// with them), `~` expansion and the "did you mean" suggestion.
#include "harness/config/validate.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace evalbox::harness {
namespace {

TEST(validate, ids) {
  EXPECT_TRUE(is_valid_id("off-by-one.v2_x"));
  EXPECT_FALSE(is_valid_id("Off"));
  EXPECT_TRUE(is_valid_id("Off", /*allow_upper=*/true));
  EXPECT_FALSE(is_valid_id("-x"));
  EXPECT_FALSE(is_valid_id(".x"));
  EXPECT_FALSE(is_valid_id(""));
  EXPECT_FALSE(is_valid_id("a b"));
  EXPECT_FALSE(is_valid_id("a/b"));
  EXPECT_TRUE(is_valid_id(std::string(128, 'a')));
  EXPECT_FALSE(is_valid_id(std::string(129, 'a')));
}

TEST(validate, environment_names) {
  EXPECT_TRUE(is_env_name("OPENAI_API_KEY"));
  EXPECT_TRUE(is_env_name("_x1"));
  EXPECT_FALSE(is_env_name("1BAD"));
  EXPECT_FALSE(is_env_name(""));
  EXPECT_FALSE(is_env_name("A-B"));
  EXPECT_FALSE(is_env_name("A=B"));
  EXPECT_FALSE(is_env_name("\xC3\x89T\xC3\x89"));
}

TEST(validate, host_port_entries_say_what_is_wrong) {
  for (const char* ok : {"api.openai.com:443", "*.example.com:1", "127.0.0.1:65535", "[::1]:80"})
    EXPECT_EQ(host_port_problem(ok), "") << ok;
  EXPECT_EQ(host_port_problem("host-without-port"), "is not host:port");
  EXPECT_EQ(host_port_problem(":443"), "is not host:port");
  EXPECT_EQ(host_port_problem("h:0"), "has port '0', not a number in 1..65535");
  EXPECT_EQ(host_port_problem("h:65536"), "has port '65536', not a number in 1..65535");
  EXPECT_EQ(host_port_problem("h:4x"), "has port '4x', not a number in 1..65535");
  EXPECT_EQ(host_port_problem("[::1:80"), "has an unterminated [IPv6] host");
  EXPECT_EQ(host_port_problem("a b:80"),
            "has host 'a b' with a character other than letters, digits, '.', '-'");
  EXPECT_EQ(host_port_problem(".x:80"), "has an invalid host '.x'");
  EXPECT_EQ(host_port_problem("*.:80"), "has an invalid host '*.'");
}

TEST(validate, tilde_is_home_only_at_the_start) {
  const char* old = std::getenv("HOME");
  std::string saved = old ? old : "";
  ::setenv("HOME", "/h", 1);
  EXPECT_EQ(expand_home("~"), "/h");
  EXPECT_EQ(expand_home("~/a/b"), "/h/a/b");
  EXPECT_EQ(expand_home("~user/a"), "~user/a");
  EXPECT_EQ(expand_home("a/~/b"), "a/~/b");
  ::setenv("HOME", saved.c_str(), 1);
}

TEST(validate, suggestions_are_close_or_nothing) {
  static constexpr std::string_view keys[] = {"prompt", "checks", "threshold"};
  EXPECT_EQ(closest("promt", keys), "prompt");
  EXPECT_EQ(closest("chekcs", keys), "checks");
  EXPECT_EQ(closest("banana", keys), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

}  // namespace
}  // namespace evalbox::harness
