// A candidate's model gateway and the budgets it enforces (docs/agents.md, "The model
// gateway"; docs/suite-format.md, "budget").
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/fs.h"
#include "harness/config/parse_parts.h"
#include "harness/config/validate.h"

namespace evalbox::harness {
inline namespace config {
namespace parsing {

namespace fs = std::filesystem;

namespace {

// A count as people write budgets: 400, 200k, 1.5M (k = 1,000, M = 1,000,000).
std::optional<uint64_t> count(reader& r, const YAML::Node& n, const std::string& what) {
  auto bad = [&] {
    r.fail(n,
           fmt::format("{} must be a whole number, e.g. 400, 200k or 1.5M, found {}", what,
                       r.describe(n)),
           "k = 1,000 and M = 1,000,000");
    return std::nullopt;
  };
  if (!n.IsScalar() || n.Scalar().empty()) return bad();
  std::string s = n.Scalar();
  double scale = 1;
  if (s.back() == 'k' || s.back() == 'K') {
    scale = 1e3;
    s.pop_back();
  } else if (s.back() == 'M' || s.back() == 'm') {
    scale = 1e6;
    s.pop_back();
  }
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v))
    return bad();
  v *= scale;
  if (v < 1 || v > 9.0e15 || v != std::floor(v)) {
    r.fail(n, fmt::format("{} must be a whole number from 1 to 9e15, found {}", what, n.Scalar()));
    return std::nullopt;
  }
  return static_cast<uint64_t>(v);
}

// The host of an http(s) URL ("" when it has none), without brackets.
std::string url_host(std::string_view url) {
  const size_t start = url.find("://");
  if (start == std::string_view::npos) return {};
  std::string_view rest = url.substr(start + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (rest.find('@') != std::string_view::npos) return "@";  // credentials: refused
  if (rest.starts_with('[')) {
    const size_t end = rest.find(']');
    return end == std::string_view::npos ? std::string() : std::string(rest.substr(1, end - 1));
  }
  return std::string(rest.substr(0, rest.find(':')));
}

bool loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace

budget_spec parse_budget(reader& r, const YAML::Node& n, const std::string& what) {
  static constexpr std::string_view known[] = {"cost", "input_tokens", "output_tokens", "tokens",
                                               "requests"};
  budget_spec b;
  b.where = r.at(n);
  auto f = r.mapping(n, what, known, {});
  if (!f) return b;
  if (f->entries.empty())
    r.fail(n, fmt::format("{} sets no limit", what),
           "e.g. {cost: 2.00, output_tokens: 200k, requests: 400}");
  for (const auto& [key, value] : f->entries) {
    const std::string name = fmt::format("{}.{}", what, key);
    if (key == "cost") {
      auto v = r.number(value, name);
      if (v && (!std::isfinite(*v) || *v <= 0))
        r.fail(value, fmt::format("{} must be more than 0 (US dollars)", name));
      else if (v)
        b.cost = *v;
    } else {
      auto v = count(r, value, name);
      if (key == "input_tokens") b.input_tokens = v;
      if (key == "output_tokens") b.output_tokens = v;
      if (key == "tokens") b.tokens = v;
      if (key == "requests") b.requests = v;
    }
  }
  return b;
}

std::optional<gateway_spec> parse_gateway(reader& r, const YAML::Node& n, const std::string& what,
                                          const fs::path& base_dir) {
  static constexpr std::string_view known[] = {"upstream", "ca_files", "key_env", "token_url"};
  static constexpr std::string_view required[] = {"upstream"};
  auto f = r.mapping(n, what, known, required);
  if (!f) return std::nullopt;
  gateway_spec g;
  g.where = r.at(n);
  const size_t errors = r.error_count();
  // An endpoint the key or a login's tokens go to: https, or plain http to loopback only.
  auto endpoint = [&](std::string_view key, std::string& into) {
    if (!f->has(key)) return;
    YAML::Node u = f->get(key);
    const std::string name = fmt::format("{}.{}", what, key);
    if (auto s = r.string(u, name)) {
      const std::string host = url_host(*s);
      const bool https = s->starts_with("https://");
      if (!https && !s->starts_with("http://"))
        r.fail(u, fmt::format("{} '{}' must start with https://", name, *s),
               "e.g. https://api.anthropic.com or https://api.openai.com/v1");
      else if (host.empty())
        r.fail(u, fmt::format("{} '{}' has no host", name, *s), "e.g. https://api.anthropic.com");
      else if (host == "@")  // not repeated: what is before the @ may be a key
        r.fail(u, fmt::format("{} must not carry credentials (user@ or user:key@)", name),
               "the key comes from the candidate's credential or gateway.key_env, never from "
               "the URL");
      else if (s->find_first_of("?#") != std::string::npos)
        r.fail(u, fmt::format("{} '{}' must not have a query or fragment", name, *s));
      else if (!https && !loopback_host(host))
        r.fail(u,
               fmt::format("{} '{}': plain http only to a loopback address (the key "
                           "would cross the network in clear)",
                           name, *s),
               "use https://");
      into = *s;
      while (into.ends_with('/')) into.pop_back();
    }
  };
  endpoint("upstream", g.upstream);
  endpoint("token_url", g.token_url);
  if (f->has("ca_files")) {
    YAML::Node list = f->get("ca_files");
    if (auto files = r.string_list(list, what + ".ca_files")) {
      for (size_t i = 0; i < files->size(); ++i) {
        const fs::path p = normalize(base_dir / expand_home((*files)[i]));
        std::error_code ec;
        if (!fs::is_regular_file(p, ec))
          r.fail(list[i], fmt::format("{}.ca_files: {} is not a file", what, p.string()),
                 "PEM certificates, relative to the suite file");
        else
          g.ca_files.push_back(p);
      }
    }
  }
  if (f->has("key_env")) {
    YAML::Node k = f->get("key_env");
    if (auto s = r.string(k, what + ".key_env")) {
      if (!is_env_name(*s))
        r.fail(k, fmt::format("{}.key_env '{}' is not a variable name", what, *s),
               "name the host variable that holds the key (never the key)");
      g.key_env = *s;
    }
  }
  if (r.error_count() != errors) return std::nullopt;
  return g;
}

}  // namespace parsing
}  // namespace config
}  // namespace evalbox::harness
