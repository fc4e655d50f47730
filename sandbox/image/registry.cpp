// The distribution client (see registry.h): challenges, tokens, manifests and blob streams.
#include "sandbox/image/registry.h"

#include <algorithm>
#include <cctype>
#include <thread>

#include "base/base64.h"
#include "base/digest.h"
#include "base/json.h"
#include "base/log.h"
#include "sandbox/http/client.h"

namespace evalbox::sandbox::image {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int max_redirects = 5;
constexpr size_t max_token_bytes = 1u << 20;
constexpr size_t max_error_body = 64u << 10;

constexpr std::string_view manifest_accept =
    "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~/:").find(c) != std::string_view::npos;
}

bool loopback_host(std::string_view host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1" || host == "[::1]";
}

// "host[:port]" without the port.
std::string host_of(const std::string& authority) {
  if (authority.starts_with('[')) return authority.substr(0, authority.find(']') + 1);
  return authority.substr(0, authority.rfind(':'));
}

// What a registry's error body says ({"errors":[{"code","message"}]}), briefly.
std::string registry_says(const std::string& body) {
  auto j = parse_json(body, "registry error");
  if (!j || !j->is_object()) return {};
  auto errs = j->find("errors");
  if (errs == j->end() || !errs->is_array() || errs->empty()) return {};
  const json& e = errs->front();
  if (!e.is_object()) return {};
  std::string code = e.value("code", "");
  std::string msg = e.value("message", "");
  std::string out = code.empty() ? msg : code + (msg.empty() ? "" : ": " + msg);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return out.substr(0, 200);
}

bool retryable(int status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

bool redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

}  // namespace

result<challenge> parse_challenge(std::string_view header) {
  auto bad = [&](std::string_view why) {
    return make_error(error_kind::invalid_argument, "malformed WWW-Authenticate header ({})", why);
  };
  challenge c;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
  };
  skip_space();
  while (i < header.size() && std::isalpha(static_cast<unsigned char>(header[i])))
    c.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(header[i++])));
  if (c.scheme.empty()) return bad("no scheme");
  if (i < header.size() && header[i] != ' ' && header[i] != '\t') return bad("no scheme");
  skip_space();
  while (i < header.size()) {
    std::string key;
    while (i < header.size() && is_token_char(header[i]) && header[i] != '=')
      key += static_cast<char>(std::tolower(static_cast<unsigned char>(header[i++])));
    skip_space();
    if (key.empty() || i >= header.size() || header[i] != '=')
      return bad("a parameter without '='");
    ++i;
    skip_space();
    std::string value;
    if (i < header.size() && header[i] == '"') {
      ++i;
      bool closed = false;
      while (i < header.size()) {
        char ch = header[i++];
        if (ch == '\\' && i < header.size()) {
          value += header[i++];
        } else if (ch == '"') {
          closed = true;
          break;
        } else {
          value += ch;
        }
      }
      if (!closed) return bad("an unclosed quote");
    } else {
      while (i < header.size() && is_token_char(header[i])) value += header[i++];
      if (value.empty()) return bad("an empty value");
    }
    if (value.size() > 4096) return bad("a value over 4096 bytes");
    c.params[key] = value;
    skip_space();
    if (i < header.size()) {
      if (header[i] != ',') return bad("parameters not separated by ','");
      ++i;
      skip_space();
    }
  }
  if (c.scheme == "bearer" && !c.params.count("realm"))
    return bad("a Bearer challenge without realm");
  return c;
}

// ---- the client ----

struct registry_client::state {
  const registry_settings& settings;
  reference ref;
  std::string label;  // the reference as normalized, for messages

  std::mutex mu;                       // guards what follows
  std::vector<std::string> endpoints;  // "https://host" candidates: mirrors first
  size_t chosen = 0;                   // the endpoint that answered a manifest
  std::string authorization;           // "Bearer …" / "Basic …" for the chosen endpoint
  clock::time_point token_expiry = clock::time_point::max();
  bool plain_http = false;  // the chosen endpoint answers HTTP only (insecure)
  std::optional<credential> cred;
  bool cred_looked_up = false;

  state(const registry_settings& s, reference r) : settings(s), ref(std::move(r)) {
    label = ref.str();
    const std::string canonical = ref.domain == "docker.io" ? "registry-1.docker.io" : ref.domain;
    for (const auto& [location, mirrors] : settings.mirrors) {
      if (location != ref.domain && !(ref.domain == "docker.io" && location == "docker.io"))
        continue;
      for (const auto& m : mirrors) endpoints.push_back(m);
    }
    endpoints.push_back(canonical);
  }

  [[nodiscard]] bool may_be_plain(const std::string& authority) const {
    const std::string host = host_of(authority);
    if (loopback_host(host) || loopback_host(authority)) return true;
    return std::find(settings.insecure.begin(), settings.insecure.end(), authority) !=
               settings.insecure.end() ||
           std::find(settings.insecure.begin(), settings.insecure.end(), host) !=
               settings.insecure.end();
  }

  [[nodiscard]] http::options http_options(bool body_stream,
                                           const std::atomic<bool>* stop = nullptr) const {
    http::options o;
    o.head_timeout = settings.timeout;
    o.idle_timeout = settings.timeout;
    o.rate_window = settings.timeout;
    o.min_rate = body_stream ? settings.min_rate : 0;
    if (!body_stream) o.total_timeout = settings.timeout * 2;
    o.ca_files = settings.ca_files;
    o.cancel = stop ? stop : settings.cancel;
    o.user_agent = "evalbox";
    return o;
  }

  status sleep_for(milliseconds d) const {
    const auto until = clock::now() + d;
    while (clock::now() < until) {
      if (settings.cancel && settings.cancel->load())
        return make_error(error_kind::cancelled, "{}: cancelled", label);
      std::this_thread::sleep_for(
          std::min<clock::duration>(until - clock::now(), milliseconds(100)));
    }
    return {};
  }

  [[nodiscard]] milliseconds backoff(int attempt, const http::response* r) const {
    milliseconds d{500 << std::min(attempt, 6)};
    if (r) {
      if (auto ra = r->header("Retry-After")) {
        char* end = nullptr;
        long secs = std::strtol(ra->c_str(), &end, 10);
        if (end && *end == '\0' && secs >= 0) d = milliseconds(secs * 1000);
      }
    }
    return std::min(d, settings.max_backoff);
  }

  status lookup_credential() {
    if (cred_looked_up) return {};
    cred_looked_up = true;
    cred = EB_TRY(find_credential(settings, ref.domain, ref.repository));
    return {};
  }

  [[nodiscard]] std::string files_read() const {
    std::string out;
    for (const auto& f : settings.auth_files) out += (out.empty() ? "" : ", ") + f.string();
    return out.empty() ? "none" : out;
  }

  [[nodiscard]] std::string base(size_t endpoint) const {
    const std::string& e = endpoints[endpoint];
    if (e.starts_with("https://") || e.starts_with("http://")) {
      std::string b = e;
      while (b.ends_with('/')) b.pop_back();
      return b;
    }
    return (plain_http ? "http://" : "https://") + e;
  }

  // Asks the realm for a token for this repository (pull), with the credential when there is
  // one.
  status get_token(const challenge& ch, const http::url& from) {
    EB_TRY(lookup_credential());
    const std::string realm = ch.params.at("realm");
    auto realm_url = http::parse_url(realm);
    if (!realm_url)
      return make_error(error_kind::invalid_argument,
                        "{}: the registry's token realm '{}' is not "
                        "an http(s) URL",
                        label, realm.substr(0, 200));
    if (!realm_url->tls && from.tls)
      return make_error(error_kind::invalid_argument,
                        "{}: the registry sends credentials' tokens over plain HTTP ({}); refused",
                        label, realm_url->str());
    std::string query;
    auto add = [&](std::string_view k, const std::string& v) {
      query += (query.empty() ? "" : "&") + std::string(k) + "=" + url_escape(v);
    };
    if (auto s = ch.params.find("service"); s != ch.params.end()) add("service", s->second);
    auto scope = ch.params.find("scope");
    add("scope",
        scope != ch.params.end() ? scope->second : "repository:" + ref.repository + ":pull");
    realm_url->target += (realm_url->target.find('?') == std::string::npos ? "?" : "&") + query;
    http::request req;
    req.to = *realm_url;
    if (cred && !cred->secret.empty())
      req.headers.emplace_back("Authorization",
                               "Basic " + base64_encode(cred->username + ":" + cred->secret));
    http::options o = http_options(false);
    o.via = settings.use_proxy ? EB_TRY(http::proxy_for(req.to)) : std::nullopt;
    http::reply rep;
    for (int attempt = 0;; ++attempt) {
      auto r = http::fetch_all(req, o, max_token_bytes);
      if (!r)
        return std::unexpected(
            std::move(r).error().with_context(fmt::format("{}: token endpoint", label)));
      rep = std::move(*r);
      if (retryable(rep.status) && attempt < settings.retries) {
        EB_TRY(sleep_for(backoff(attempt, nullptr)));
        continue;
      }
      break;
    }
    if (rep.status == 401 || rep.status == 403) {
      if (cred)
        return make_error(error_kind::permission,
                          "{}: the registry's token endpoint refused the credentials from {} "
                          "(status {})",
                          label, cred->from, rep.status);
      return make_error(error_kind::permission,
                        "{}: the registry requires credentials and none were found (files read: "
                        "{}); `podman login {}` or `docker login {}` writes them",
                        label, files_read(), ref.domain, ref.domain);
    }
    if (rep.status != 200)
      return make_error(error_kind::io, "{}: the token endpoint {} answered {}", label,
                        realm_url->authority(), rep.status);
    auto j = parse_json(rep.body, "token");
    std::string token;
    if (j && j->is_object()) {
      for (const char* k : {"token", "access_token"})
        if (auto it = j->find(k); it != j->end() && it->is_string() && token.empty())
          token = it->get<std::string>();
    }
    if (token.empty() || token.size() > 64 * 1024 ||
        std::any_of(token.begin(), token.end(),
                    [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; }))
      return make_error(error_kind::invalid_argument,
                        "{}: the token endpoint {} answered something that is not a token", label,
                        realm_url->authority());
    int64_t expires = 60;
    if (j->contains("expires_in") && (*j)["expires_in"].is_number_integer())
      expires = std::clamp<int64_t>((*j)["expires_in"].get<int64_t>(), 1, 24 * 3600);
    authorization = "Bearer " + token;
    // Refreshed a little early, so a long blob does not start on a token about to lapse.
    token_expiry = clock::now() + std::chrono::seconds(expires) -
                   std::min<std::chrono::seconds>(std::chrono::seconds(expires / 10),
                                                  std::chrono::seconds(10));
    return {};
  }

  // Answers a 401: a new token, or Basic credentials.
  status authenticate(const http::response& r, const http::url& at) {
    auto header = r.header("WWW-Authenticate");
    if (!header)
      return make_error(error_kind::permission, "{}: the registry answered 401 without a challenge",
                        label);
    challenge ch = EB_TRY_CTX(parse_challenge(*header), label);
    if (ch.scheme == "bearer") return get_token(ch, at);
    if (ch.scheme == "basic") {
      EB_TRY(lookup_credential());
      if (!cred || cred->secret.empty())
        return make_error(error_kind::permission,
                          "{}: the registry requires credentials and none were found (files "
                          "read: {}); `podman login {}` or `docker login {}` writes them",
                          label, files_read(), ref.domain, ref.domain);
      if (!at.tls && !may_be_plain(at.authority()))
        return make_error(error_kind::permission,
                          "{}: refusing to send credentials over plain HTTP", label);
      authorization = "Basic " + base64_encode(cred->username + ":" + cred->secret);
      token_expiry = clock::time_point::max();
      return {};
    }
    return make_error(error_kind::unsupported,
                      "{}: the registry asks for '{}' authentication, "
                      "which evalbox does not speak (Bearer and Basic)",
                      label, ch.scheme);
  }

  static std::string url_escape(const std::string& v) {
    std::string out;
    for (unsigned char c : v) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ':' || c == '/') {
        out += static_cast<char>(c);
      } else {
        out += fmt::format("%{:02X}", c);
      }
    }
    return out;
  }

  // One registry request to `path` on the chosen endpoint, with authentication, retries and
  // redirects. Returns the final response (any status the caller must judge).
  result<http::response> send(const std::string& method, const std::string& path,
                              const http::header_list& extra, bool body_stream,
                              const std::atomic<bool>* stop = nullptr) {
    std::unique_lock lock(mu);
    http::url start = EB_TRY(http::parse_url(base(chosen) + path));
    lock.unlock();
    bool reauthenticated = false;
    for (int attempt = 0;; ++attempt) {
      http::url at = start;
      bool same_origin = true;
      for (int hops = 0;; ++hops) {
        http::request req;
        req.method = method;
        req.to = at;
        req.headers = extra;
        lock.lock();
        if (clock::now() >= token_expiry) authorization.clear();
        // The registry's token goes to the registry only: not to blob storage it redirects to.
        if (same_origin && !authorization.empty())
          req.headers.emplace_back("Authorization", authorization);
        lock.unlock();
        http::options o = http_options(body_stream, stop);
        if (settings.use_proxy) o.via = EB_TRY(http::proxy_for(at));
        // The reference first: "GET https://…: no progress …" alone does not say which pull.
        http::response r = EB_TRY_CTX(http::fetch(req, o), label);
        const int st = r.status();
        if (redirect(st)) {
          auto loc = r.header("Location");
          if (!loc)
            return make_error(error_kind::invalid_argument,
                              "{}: a redirect ({}) without a "
                              "Location",
                              label, st);
          if (hops + 1 >= max_redirects)
            return make_error(error_kind::invalid_argument,
                              "{}: more than {} redirects (a redirect loop?) at {}", label,
                              max_redirects, at.str().substr(0, 200));
          http::url next = EB_TRY_CTX(http::resolve_url(at, *loc), label);
          if (!next.tls && (at.tls || !may_be_plain(next.authority())))
            return make_error(error_kind::invalid_argument,
                              "{}: the registry redirects to {}, which is not HTTPS; refused",
                              label, next.str().substr(0, 200));
          same_origin = same_origin && next.authority() == at.authority() && next.tls == at.tls;
          at = next;
          continue;
        }
        if (st == 401 && same_origin && !reauthenticated) {
          reauthenticated = true;
          lock.lock();
          auto auth = authenticate(r, at);
          lock.unlock();
          EB_TRY(auth);
          break;  // again from the start, with the new authorization
        }
        if (retryable(st) && attempt < settings.retries) {
          const milliseconds wait = backoff(attempt, &r);
          log::debug("registry: {} {} answered {}; again in {} ms", method, at.str(), st,
                     wait.count());
          EB_TRY(sleep_for(wait));
          break;
        }
        return r;
      }
    }
  }

  // An answer that is not the one wanted, as an error naming the reference.
  error unexpected_status(http::response& r, std::string_view what) {
    std::string says;
    if (auto body = r.read_all(max_error_body)) says = registry_says(*body);
    const int st = r.status();
    if (st == 404)
      return error{error_kind::not_found, fmt::format("{}: {} not found in the registry{}", label,
                                                      what, says.empty() ? "" : " (" + says + ")")};
    if (st == 401 || st == 403) {
      std::string who = cred ? "the credentials from " + cred->from
                             : "anonymous access (credential files read: " + files_read() + ")";
      return error{error_kind::permission,
                   fmt::format("{}: the registry refused {} for {} (status {}{})", label, who, what,
                               st, says.empty() ? "" : ", " + says)};
    }
    return error{error_kind::io, fmt::format("{}: the registry answered {} for {}{}", label, st,
                                             what, says.empty() ? "" : " (" + says + ")")};
  }
};

registry_client::registry_client(const registry_settings& settings, reference ref)
    : state_(std::make_unique<state>(settings, std::move(ref))) {}
registry_client::~registry_client() = default;

const reference& registry_client::ref() const noexcept { return state_->ref; }

std::string registry_client::endpoint() const {
  std::lock_guard lock(state_->mu);
  return state_->base(state_->chosen);
}

result<fetched_manifest> registry_client::manifest(const std::string& tag_or_digest,
                                                   bool head_only) {
  state& s = *state_;
  const std::string name = s.ref.name();
  for (const auto& [prefix, where] : s.settings.blocked)
    if (name == prefix || name.starts_with(prefix + "/"))
      return make_error(error_kind::permission, "{}: pulls from {} are blocked ({})", s.label,
                        prefix, where);
  const std::string path = "/v2/" + s.ref.repository + "/manifests/" + tag_or_digest;
  const http::header_list accept{{"Accept", std::string(manifest_accept)}};
  // Mirrors first; the registry itself last. A mirror that fails is passed over (logged).
  error last{error_kind::io, "no endpoint"};
  for (size_t e = 0; e < s.endpoints.size(); ++e) {
    {
      std::lock_guard lock(s.mu);
      if (e != s.chosen) s.authorization.clear();
      s.chosen = e;
      s.plain_http = false;
    }
    auto r = s.send(head_only ? "HEAD" : "GET", path, accept, false);
    if (!r && r.error().kind == error_kind::io && s.may_be_plain(s.endpoints[e]) &&
        r.error().message.find("TLS") != std::string::npos) {
      // A registry declared insecure (or on loopback) that speaks plain HTTP only.
      std::lock_guard lock(s.mu);
      s.plain_http = true;
    }
    if (!r && s.plain_http) {
      auto plain = s.send(head_only ? "HEAD" : "GET", path, accept, false);
      if (plain) {
        r = std::move(plain);
      } else {
        // Plain HTTP fails too: a TLS registry whose certificate is not trusted, most likely.
        // The TLS error is the one that says so (the plain attempt's is an "end of stream").
        std::lock_guard lock(s.mu);
        s.plain_http = false;
      }
    }
    if (r && r->status() == 200) {
      fetched_manifest m;
      auto ct = r->header("Content-Type");
      m.media_type = ct ? ct->substr(0, ct->find(';')) : "";
      const auto announced = r->header("Docker-Content-Digest");
      if (head_only) {
        if (!announced || !announced->starts_with("sha256:") ||
            !is_sha256_hex(announced->substr(7)))
          return make_error(error_kind::unsupported,
                            "{}: the registry names no digest for a "
                            "HEAD request",
                            s.label);
        m.digest = *announced;
        return m;
      }
      auto body = r->read_all(max_json_bytes);
      if (!body) {
        if (body.error().kind == error_kind::invalid_argument)
          return make_error(error_kind::invalid_argument,
                            "{}: the manifest is larger than {} bytes; refused", s.label,
                            max_json_bytes);
        return std::unexpected(std::move(body).error().with_context(s.label));
      }
      m.bytes = std::move(*body);
      m.digest = "sha256:" + sha256_hex(m.bytes);
      if (tag_or_digest.starts_with("sha256:") && m.digest != tag_or_digest)
        return make_error(error_kind::invalid_argument,
                          "{}: the manifest's bytes do not match the digest {} (they hash to "
                          "{}); refused",
                          s.label, tag_or_digest, m.digest);
      if (announced && *announced != m.digest)
        return make_error(error_kind::invalid_argument,
                          "{}: the manifest's bytes hash to {}, not to the {} the registry "
                          "announced; refused",
                          s.label, m.digest, *announced);
      auto j = parse_json(m.bytes, "manifest");
      if (!j || !j->is_object())
        return make_error(error_kind::invalid_argument, "{}: the manifest is not a JSON object",
                          s.label);
      if (auto mt = j->find("mediaType"); mt != j->end() && mt->is_string())
        m.media_type = mt->get<std::string>();
      if (m.media_type.starts_with("application/vnd.docker.distribution.manifest.v1"))
        return make_error(error_kind::unsupported,
                          "{}: a Docker schema 1 manifest ({}); re-push the image with a current "
                          "tool",
                          s.label, m.media_type);
      m.kind = classify_media_type(m.media_type);
      if (m.kind != media_kind::index && m.kind != media_kind::manifest)
        return make_error(error_kind::invalid_argument,
                          "{}: the manifest's media type '{}' is not an image index or manifest",
                          s.label, m.media_type.substr(0, 200));
      return m;
    }
    if (!r) {
      last = std::move(r).error();
    } else {
      last = s.unexpected_status(*r, "manifest " + tag_or_digest);
    }
    if (last.kind == error_kind::cancelled) break;
    if (e + 1 < s.endpoints.size())
      log::warn("registry: mirror {} failed ({}); trying the next", s.endpoints[e], last.message);
  }
  return std::unexpected(std::move(last));
}

result<std::string> registry_client::small_blob(const std::string& digest, size_t max) {
  state& s = *state_;
  http::response r =
      EB_TRY(s.send("GET", "/v2/" + s.ref.repository + "/blobs/" + digest, {}, false));
  if (r.status() != 200) return std::unexpected(s.unexpected_status(r, "blob " + digest));
  auto body = r.read_all(max);
  if (!body)
    return std::unexpected(std::move(body).error().with_context(s.label + ": blob " + digest));
  if ("sha256:" + sha256_hex(*body) != digest)
    return make_error(error_kind::invalid_argument,
                      "{}: blob {}: its bytes do not match its digest; refused", s.label, digest);
  return body;
}

namespace {

// A blob being downloaded: reads through, reopens with Range after a broken connection, and
// refuses bytes past the declared size.
class blob_stream final : public byte_source {
 public:
  blob_stream(registry_client::state& s, std::string digest, int64_t size,
              const std::atomic<bool>* stop)
      : s_(s), digest_(std::move(digest)), size_(size), stop_(stop) {}

  result<size_t> read(std::span<std::byte> buf) override {
    for (;;) {
      if (!body_) EB_TRY(open());
      auto n = body_->read(buf);
      if (n) {
        if (*n == 0) return size_t{0};
        offset_ += *n;
        if (size_ >= 0 && static_cast<int64_t>(offset_) > size_)
          return make_error(error_kind::invalid_argument,
                            "{}: blob {} is larger than the {} bytes the manifest declares; "
                            "refused",
                            s_.label, digest_, size_);
        return *n;
      }
      // A broken connection is resumed; a server too slow (below the rate floor) or silent is
      // given one more chance, not `retries` more windows of waiting.
      const bool slow = n.error().kind == error_kind::expired;
      if (n.error().kind == error_kind::cancelled || resumes_ >= s_.settings.retries ||
          (slow && slow_resumes_++ >= 1))
        return std::unexpected(
            std::move(n).error().with_context(fmt::format("{}: blob {}", s_.label, digest_)));
      ++resumes_;
      log::info("registry: blob {} broke off at {} bytes ({}); resuming", digest_, offset_,
                n.error().message);
      body_.reset();
    }
  }

 private:
  status open() {
    http::header_list extra;
    if (offset_ > 0) extra.emplace_back("Range", fmt::format("bytes={}-", offset_));
    http::response r = EB_TRY(
        s_.send("GET", "/v2/" + s_.ref.repository + "/blobs/" + digest_, extra, true, stop_));
    if (r.status() == 206 && offset_ > 0) {
      body_ = std::move(r);
      return {};
    }
    if (r.status() != 200) return std::unexpected(s_.unexpected_status(r, "blob " + digest_));
    // A server that ignores Range starts again at 0: skip what was read already.
    uint64_t skip = offset_;
    std::byte scratch[16384];
    while (skip > 0) {
      size_t n = EB_TRY(r.read(std::span(scratch, std::min<uint64_t>(skip, sizeof scratch))));
      if (n == 0)
        return make_error(error_kind::io, "{}: blob {} ended early on resume", s_.label, digest_);
      skip -= n;
    }
    body_ = std::move(r);
    return {};
  }

  registry_client::state& s_;
  std::string digest_;
  int64_t size_;
  uint64_t offset_ = 0;
  const std::atomic<bool>* stop_;  // ends a wait (null: the settings' cancel flag)
  int resumes_ = 0;
  int slow_resumes_ = 0;
  std::optional<http::response> body_;
};

}  // namespace

result<std::unique_ptr<byte_source>> registry_client::open_blob(const std::string& digest,
                                                                int64_t size,
                                                                const std::atomic<bool>* stop) {
  return std::make_unique<blob_stream>(*state_, digest, size, stop);
}

}  // namespace evalbox::sandbox::image
