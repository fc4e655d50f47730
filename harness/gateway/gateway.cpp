// model_gateway (see gateway.h).
#include "harness/gateway/gateway.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "harness/gateway/model_cache.h"
#include "sandbox/http/client.h"
#include "sandbox/http/server.h"

namespace evalbox::harness::gateway {

namespace fs = std::filesystem;
namespace http = sandbox::http;
using http::iequals;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::string_view placeholder_prefix = "evalbox-gateway-";

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::any_of(names.begin(), names.end(), [&](auto n) { return iequals(name, n); });
}

// Headers never forwarded either way: the connection's own (RFC 9110 7.6.1), the framing the
// server and client redo, and what would name the agent's host.
bool hop_by_hop(std::string_view name) {
  return one_of(
      name, {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
             "upgrade", "content-length", "host", "proxy-authorization", "proxy-authenticate"});
}

// Where a client puts its key: the agent's placeholder is found there and the real key put in
// the same place.
enum class key_place { none, bearer, x_api_key, x_goog_api_key, api_key, query };

bool credential_header(std::string_view name) {
  return one_of(name, {"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"});
}

// Headers whose values never reach a record.
bool secret_header(std::string_view name) {
  return credential_header(name) || one_of(name, {"set-cookie", "proxy-authorization"});
}

json headers_json(const http::header_list& headers) {
  json j = json::object();
  for (const auto& [k, v] : headers) {
    std::string name = k;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    j[name] = secret_header(name) ? std::string("<redacted>") : v;
  }
  return j;
}

// `key=...` of a query string, replaced by `with` (or by <redacted> for the record).
std::string replace_query_key(std::string_view target, std::string_view with) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view rest = target.substr(q + 1);
  bool first = true;
  while (true) {
    const size_t amp = rest.find('&');
    std::string_view param = rest.substr(0, amp);
    if (!first) out += '&';
    first = false;
    if (param.starts_with("key="))
      out += fmt::format("key={}", with);
    else
      out += param;
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return out;
}

std::optional<std::string> query_key(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    std::string_view param = rest.substr(0, amp);
    if (param.starts_with("key=")) return std::string(param.substr(4));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return std::nullopt;
}

std::string percent_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

// An error as the API itself would answer it, so that its client reports it and stops.
std::string api_error_body(api_kind api, int status, std::string_view message,
                           std::string_view code) {
  json j;
  if (api == api_kind::anthropic_messages) {
    j = {{"type", "error"},
         {"error",
          {{"type", status == 401 ? "authentication_error" : "invalid_request_error"},
           {"message", message}}}};
  } else if (api == api_kind::gemini) {
    j = {{"error",
          {{"code", status},
           {"message", message},
           {"status", status == 401 ? "UNAUTHENTICATED" : "INVALID_ARGUMENT"}}}};
  } else {
    j = {{"error",
          {{"message", message},
           {"type", status == 401 ? "authentication_error" : "invalid_request_error"},
           {"param", nullptr},
           {"code", code}}}};
  }
  return j.dump();
}

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A body for the record: JSON when it parses (and fits), else text, cut at `max` bytes.
json body_json(std::string_view body, size_t max) {
  if (body.size() <= max) {
    json j = json::parse(body, nullptr, false);
    if (!j.is_discarded()) return j;
    return json(std::string(body));
  }
  return json(std::string(body.substr(0, max)));
}

// An origin-form path the upstream reads as it is written: absolute, with no "." or ".."
// segment (also percent-escaped: "/v1/%2e%2e/admin" leaves the upstream's prefix as surely)
// and no backslash.
bool plain_path(std::string_view path) {
  if (!path.starts_with('/') || path.find('\\') != std::string_view::npos) return false;
  std::string lower;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && path[i + 1] == '2' &&
        (path[i + 2] == 'e' || path[i + 2] == 'E')) {
      lower += '.';
      i += 2;
    } else if (path[i] == '%' && i + 2 < path.size() && path[i + 1] == '5' &&
               (path[i + 2] == 'c' || path[i + 2] == 'C')) {
      return false;  // an escaped backslash
    } else if (path[i] == '%' && i + 2 < path.size() && path[i + 1] == '2' &&
               (path[i + 2] == 'f' || path[i + 2] == 'F')) {
      lower += '/';  // an escaped slash makes segments too, for some servers
      i += 2;
    } else {
      lower += path[i];
    }
  }
  size_t start = 1;
  while (start <= lower.size()) {
    const size_t end = std::min(lower.find('/', start), lower.size());
    const std::string_view seg = std::string_view(lower).substr(start, end - start);
    if (seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

bool looks_like_placeholder(std::string_view text) {
  if (!text.starts_with(placeholder_prefix)) return false;
  text.remove_prefix(placeholder_prefix.size());
  return text.size() == 32 && std::all_of(text.begin(), text.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(c);
         });
}

json gateway_totals::to_json() const {
  auto opt = [](const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); };
  return {{"calls", calls},
          {"refused", refused},
          {"failed", failed},
          {"calls_without_usage", calls_without_usage},
          {"calls_unpriced", calls_unpriced},
          {"replayed", replayed},
          {"replayed_cost_usd", replayed_cost_usd},
          {"replay_misses", replay_misses},
          {"input_tokens", opt(usage.input_tokens)},
          {"cached_input_tokens", opt(usage.cached_input_tokens)},
          {"cache_write_tokens", opt(usage.cache_write_tokens)},
          {"output_tokens", opt(usage.output_tokens)},
          {"reasoning_tokens", opt(usage.reasoning_tokens)},
          {"cost_usd", cost_usd},
          {"rate_waited", rate_waited},
          {"rate_wait_ms", rate_wait_ms},
          {"exhausted", exhausted ? json(*exhausted) : json(nullptr)}};
}

struct model_gateway::impl {
  gateway_options o;
  http::url upstream;
  std::string prefix;  // the upstream's path prefix ("" or "/v1")
  std::string placeholder;
  std::unique_ptr<http::server> server;

  mutable std::mutex m;  // the totals
  std::mutex file_m;     // the record
  gateway_totals t;
  uint64_t seq = 0;
  uint64_t refused_after_spent = 0;
  std::optional<clock_type::time_point> spent_at;

  // The budget reached by totals `t`, in words (under m).
  std::optional<std::string> reached() const {
    return o.budget.reached(t.cost_usd, t.usage.input_tokens.value_or(0),
                            t.usage.output_tokens.value_or(0), t.calls);
  }

  // The call's line, with its request (parsed only now: after the agent has its answer).
  void append(json line, const http::incoming_request& req) {
    if (o.calls_file.empty()) return;
    line["request"] = {{"headers", headers_json(req.headers)},
                       {"bytes", req.body.size()},
                       {"body", body_json(req.body, o.max_recorded_body)},
                       {"truncated", req.body.size() > o.max_recorded_body}};
    std::lock_guard lock(file_m);
    if (auto s = append_durable(o.calls_file,
                                line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
        !s)
      log::warn("gateway: {}: {}", o.calls_file.string(), s.error().message);
  }

  // A request answered by the gateway itself.
  void refuse(const http::incoming_request& req, http::response_stream& out, api_kind api,
              int status, std::string_view message, std::string_view code, json call) {
    const std::string body = api_error_body(api, status, message, code);
    {
      // Counted before the client has the answer: its next request sees the count.
      std::lock_guard lock(m);
      ++t.refused;
      if (t.exhausted && code == "budget_exhausted") ++refused_after_spent;
    }
    (void)out.begin(status, {{"Content-Type", "application/json"}}, body.size());
    (void)out.write(body);
    (void)out.end();
    call["refused"] = code;
    call["response"] = {{"status", status}, {"body", json::parse(body)}};
    append(std::move(call), req);
  }

  void handle(const http::incoming_request& req, http::response_stream& out) {
    // A client's reachability probe (Claude Code's HEAD /, keyless): answered here, neither
    // forwarded nor counted.
    if (req.method == "HEAD") {
      (void)out.begin(200, {}, 0);
      (void)out.end();
      return;
    }
    const auto t0 = clock_type::now();
    const api_kind api = api_of(req.method, req.target);
    json call = {{"started_at", now_text()},
                 {"api", to_string(api)},
                 {"method", req.method},
                 {"path", replace_query_key(req.target, "<redacted>")}};
    {
      std::lock_guard lock(m);
      call["seq"] = ++seq;
    }

    // The placeholder, where the client put it.
    key_place place = key_place::none;
    bool other_key = false;
    for (const auto& [k, v] : req.headers) {
      std::string_view value = v;
      if (iequals(k, "authorization")) {
        if (value.size() > 7 && iequals(value.substr(0, 7), "bearer ") &&
            value.substr(7) == placeholder)
          place = key_place::bearer;
        else
          other_key = true;
      } else if (iequals(k, "x-api-key") || iequals(k, "x-goog-api-key") || iequals(k, "api-key")) {
        if (value == placeholder)
          place = iequals(k, "x-api-key")        ? key_place::x_api_key
                  : iequals(k, "x-goog-api-key") ? key_place::x_goog_api_key
                                                 : key_place::api_key;
        else
          other_key = true;
      }
    }
    if (auto q = query_key(req.target)) {
      if (*q == placeholder)
        place = key_place::query;
      else
        other_key = true;
    }
    if (place == key_place::none || other_key)
      return refuse(req, out, api, 401,
                    "evalbox gateway: this request does not carry the run's key (the gateway "
                    "serves only the run it was started for)",
                    "invalid_api_key", std::move(call));
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (!plain_path(path))
      return refuse(req, out, api, 404,
                    "evalbox gateway: a path with '.' or '..' segments (or their escapes) or "
                    "backslashes is not forwarded",
                    "not_found", std::move(call));
    if (!prefix.empty() && path != prefix && !path.starts_with(prefix + "/"))
      return refuse(
          req, out, api, 404,
          fmt::format("evalbox gateway: {} is not under the upstream's path {}", path, prefix),
          "not_found", std::move(call));
    std::optional<std::string> spent;
    {
      std::lock_guard lock(m);
      if (!t.exhausted) t.exhausted = reached();
      if (t.exhausted && !spent_at) spent_at = clock_type::now();
      spent = t.exhausted;
      if (!spent) ++t.calls;  // admitted: counted now, so that concurrent requests see it
    }
    if (spent)
      return refuse(req, out, api, 400,
                    fmt::format("evalbox gateway: the run's budget is spent ({}); no more model "
                                "requests are served",
                                *spent),
                    "budget_exhausted", std::move(call));
    forward(req, out, api, t0, std::move(call), place);
  }

  void forward(const http::incoming_request& req, http::response_stream& out, api_kind api,
               clock_type::time_point t0, json call, key_place place) {
    http::request up;
    up.method = req.method;
    up.to = upstream;
    up.to.target = place == key_place::query ? replace_query_key(req.target, percent_encode(o.key))
                                             : req.target;
    std::string client_beta;  // merged with a login's own flag
    for (const auto& [k, v] : req.headers) {
      if (o.login && iequals(k, "anthropic-beta")) {
        client_beta += (client_beta.empty() ? "" : ",") + v;
        continue;
      }
      if (!hop_by_hop(k) && !credential_header(k) && !iequals(k, "accept-encoding"))
        up.headers.emplace_back(k, v);
    }
    // Usage is read from the response: it must come uncompressed.
    up.headers.emplace_back("Accept-Encoding", "identity");
    const size_t own_headers = up.headers.size();
    if (o.login) {
      if (place == key_place::query)
        return refuse(req, out, api, 401,
                      "evalbox gateway: a login's token is not sent in a query string",
                      "invalid_api_key", std::move(call));
      // Resolved below, when the request really goes upstream (a replay needs no token).
      place = key_place::none;
    }
    switch (place) {
      case key_place::bearer:
        up.headers.emplace_back("Authorization", "Bearer " + o.key);
        break;
      case key_place::x_api_key:
        up.headers.emplace_back("x-api-key", o.key);
        break;
      case key_place::x_goog_api_key:
        up.headers.emplace_back("x-goog-api-key", o.key);
        break;
      case key_place::api_key:
        up.headers.emplace_back("api-key", o.key);
        break;
      case key_place::query:
      case key_place::none:
        break;
    }
    up.body = req.body;

    // The model cache: a stored answer instead of the upstream, or a miss that replay refuses.
    std::string cache_key;
    const std::string path = req.target.substr(0, req.target.find('?'));
    const std::string shape = o.cache ? request_shape(req.body) : std::string();
    int occurrence = 0;
    int position = 0;
    if (o.cache) {
      cache_key = request_key(req.method, req.target, req.body,
                              {placeholder, fmt::format("127.0.0.1:{}", server->port())});
      call["cache_key"] = cache_key;
      auto hit = o.cache->lookup(cache_key, path, shape);
      if (!hit) {
        call["error"] = hit.error().message;
        return answer_failed(
            req, out, api, 502,
            fmt::format("evalbox gateway: the model cache: {}", hit.error().message),
            "model_cache_error", std::move(call));
      }
      occurrence = hit->occurrence;
      position = hit->position;
      if (hit->response) {
        call["replayed"] = true;
        call["replay_match"] = hit->match;
        std::string_view body = hit->response->body;
        auto read = [body](std::span<std::byte> buf) mutable -> result<size_t> {
          const size_t n = std::min(buf.size(), body.size());
          std::memcpy(buf.data(), body.data(), n);
          body.remove_prefix(n);
          return n;
        };
        (void)relay(req, out, api, t0, std::move(call), hit->response->status,
                    hit->response->headers, std::nullopt, read, nullptr);
        return;
      }
      if (o.cache->mode() == cache_mode::replay) {
        {
          std::lock_guard lock(m);
          ++t.replay_misses;
        }
        call["error"] = "not in the model cache";
        return answer_failed(
            req, out, api, 502,
            fmt::format("evalbox gateway: replay: the model cache {} has no answer to this "
                        "request (key {}, asked {} time(s) before in this run); the agent asked "
                        "something the recorded run did not",
                        o.cache->dir().string(), cache_key, occurrence),
            "replay_miss", std::move(call));
      }
    }

    // The credential's requests_per_minute: the request waits for its slot (shared with every
    // gateway in front of the credential); ttfb and duration then measure the upstream alone.
    if (o.rate) {
      auto waited = o.rate->acquire(&server->stopping_flag());
      if (!waited) {
        call["error"] = "the run ended while the request waited for its credential's rate";
        return answer_failed(req, out, api, 503,
                             "evalbox gateway: the run ended while this request waited for its "
                             "credential's requests_per_minute",
                             "rate_wait_stopped", std::move(call));
      }
      if (waited->count() > 0) {
        call["rate_wait_ms"] = waited->count();
        std::lock_guard lock(m);
        ++t.rate_waited;
        t.rate_wait_ms += static_cast<uint64_t>(waited->count());
      }
      t0 = clock_type::now();
    }
    http::options opts;
    opts.head_timeout = o.upstream_head_timeout;
    opts.idle_timeout = o.upstream_idle_timeout;
    opts.ca_files = o.ca_files;
    opts.cancel = &server->stopping_flag();
    opts.user_agent.clear();
    for (const auto& [k, v] : req.headers)
      if (iequals(k, "user-agent")) opts.user_agent = v;
    if (auto via = http::proxy_for(upstream); via && *via) opts.via = **via;

    // A login's token, refreshed when it is about to expire or the upstream refuses it (once).
    auto authenticate = [&](std::optional<std::string> refused) -> status {
      auto h = o.login->headers(client_beta, std::move(refused));
      if (!h) return std::unexpected(h.error());
      up.headers.resize(own_headers);
      for (auto& kv : *h) up.headers.push_back(std::move(kv));
      return {};
    };
    if (o.login)
      if (auto s = authenticate(std::nullopt); !s) {
        call["error"] = s.error().message;
        return answer_failed(req, out, api, 502,
                             fmt::format("evalbox gateway: the run's login: {}", s.error().message),
                             "login_error", std::move(call));
      }
    auto res = http::fetch(up, opts);
    if (res && res->status() == 401 && o.login) {
      const std::string sent = o.login->last_token();
      if (auto s = authenticate(sent); s && o.login->last_token() != sent) {
        call["login_refreshed"] = true;
        res = http::fetch(up, opts);
      }
    }
    if (!res) {
      const std::string why = log::scrub(res.error().message);
      call["error"] = why;
      call["duration_ms"] = ms_between(t0, clock_type::now());
      return answer_failed(
          req, out, api, 502,
          fmt::format("evalbox gateway: the upstream could not be reached: {}", why),
          "upstream_unreachable", std::move(call));
    }
    cached_response* keep = nullptr;
    cached_response stored;
    if (o.cache) {
      stored.status = res->status();
      for (const auto& [k, v] : res->headers())
        if (!hop_by_hop(k) && !secret_header(k)) stored.headers.emplace_back(k, v);
      keep = &stored;
    }
    auto read = [&res](std::span<std::byte> buf) { return res->read(buf); };
    const bool ok = relay(req, out, api, t0, std::move(call), res->status(), res->headers(),
                          res->content_length(), read, keep ? &keep->body : nullptr);
    if (keep && ok)
      if (auto s = o.cache->store(cache_key, occurrence, path, position, shape, *keep); !s)
        log::warn("gateway: the model cache: {}", s.error().message);
  }

  // A call that got no response from the upstream (or the cache): an error in the API's shape.
  void answer_failed(const http::incoming_request& req, http::response_stream& out, api_kind api,
                     int status, std::string_view message, std::string_view code, json call) {
    const std::string body = api_error_body(api, status, message, code);
    {
      std::lock_guard lock(m);
      ++t.failed;
      ++t.calls_without_usage;
    }
    (void)out.begin(status, {{"Content-Type", "application/json"}}, body.size());
    (void)out.write(body);
    (void)out.end();
    call["response"] = {{"status", status}, {"body", json::parse(body)}};
    append(std::move(call), req);
  }

  // A response passed to the agent as it is read (from the upstream or the cache): its usage
  // counted, the call recorded. `tee`: where its bytes are also kept (the cache), unless cut.
  // True when it was passed whole.
  bool relay(const http::incoming_request& req, http::response_stream& out, api_kind api,
             clock_type::time_point t0, json call, int status, const http::header_list& headers,
             std::optional<uint64_t> content_length,
             const std::function<result<size_t>(std::span<std::byte>)>& read, std::string* tee) {
    http::header_list back;
    bool sse = false;
    for (const auto& [k, v] : headers) {
      if (hop_by_hop(k)) continue;
      if (iequals(k, "content-type") && v.find("text/event-stream") != std::string::npos)
        sse = true;
      back.emplace_back(k, v);
    }
    const std::optional<uint64_t> length = sse ? std::nullopt : content_length;
    std::optional<std::string> error;
    if (auto s = out.begin(status, back, length); !s) error = "the agent went away";

    sse_reader events;
    stream_usage streamed(api);
    std::vector<sse_event> batch;
    std::vector<sse_event> recorded_events;  // for the record (parsed after the answer ends)
    const bool recording = !o.calls_file.empty();
    size_t recorded = 0;
    bool truncated = false;
    std::string body;  // a non-streamed body (for its usage), up to the response cap
    uint64_t total = 0;
    std::optional<clock_type::time_point> first;
    const bool replayed = call.value("replayed", false);

    // The call's usage is counted before the agent can see the response end — before the
    // bytes that complete a body of known length, or the chunk holding a stream's final
    // event — so the next request it sends meets the budget this one spent.
    bool settled = false;
    auto settle = [&](bool at_end) {
      settled = true;
      if (sse && at_end) {
        batch.clear();
        events.finish(batch);
        for (auto& e : batch) streamed.add(e);
      }
      const auto t1 = clock_type::now();
      call_usage u = sse ? streamed.usage() : usage_of_body(api, body);
      if (u.model.empty()) {
        json rb = json::parse(req.body, nullptr, false);
        if (rb.is_object())
          if (auto it = rb.find("model"); it != rb.end() && it->is_string())
            u.model = it->get<std::string>();
      }
      call["ttfb_ms"] = ms_between(t0, first.value_or(t1));
      call["duration_ms"] = ms_between(t0, t1);
      call["model"] = u.model;
      std::optional<double> cost;
      if (u.known() && o.price) cost = o.price(u.model, u);
      auto opt = [](const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); };
      call["usage"] = {{"input_tokens", opt(u.input_tokens)},
                       {"cached_input_tokens", opt(u.cached_input_tokens)},
                       {"cache_write_tokens", opt(u.cache_write_tokens)},
                       {"output_tokens", opt(u.output_tokens)},
                       {"reasoning_tokens", opt(u.reasoning_tokens)}};
      call["cost_usd"] = cost ? json(*cost) : json(nullptr);
      if (u.error) call["api_error"] = *u.error;
      std::lock_guard lock(m);
      count(u, cost, error.has_value(), ms_between(t0, first.value_or(t1)), ms_between(t0, t1));
      if (replayed) {
        ++t.replayed;
        if (cost) t.replayed_cost_usd += *cost;
      }
    };

    std::byte buf[16384];
    while (!error) {
      auto n = read(buf);
      if (!n) {
        error = log::scrub(n.error().message);
        break;
      }
      if (*n == 0) break;
      if (!first) first = clock_type::now();
      total += *n;
      if (total > o.max_response_bytes) {
        error = fmt::format("the response is longer than {} bytes: cut", o.max_response_bytes);
        break;
      }
      const std::string_view chunk(reinterpret_cast<const char*>(buf), *n);
      if (tee) tee->append(chunk);
      if (sse) {
        batch.clear();
        events.feed(chunk, batch);
        for (auto& e : batch) {
          streamed.add(e);
          if (!recording) continue;
          if (recorded + e.data.size() > o.max_recorded_body) {
            truncated = true;
            continue;
          }
          recorded += e.data.size();
          recorded_events.push_back(std::move(e));
        }
      } else {
        body.append(chunk);
      }
      if (!settled && (sse ? streamed.completed() : length && total >= *length)) settle(false);
      if (auto s = out.write(chunk); !s) error = "the agent went away";
    }
    if (!settled) {
      settle(true);
    } else if (error) {
      std::lock_guard lock(m);
      ++t.failed;  // counted as whole, then cut
    }
    call["error"] = error ? json(*error) : json(nullptr);
    json response = {
        {"status", status}, {"headers", headers_json(headers)}, {"bytes", total}, {"stream", sse}};

    if (error)
      out.abort();
    else
      (void)out.end();
    if (recording) {
      // The record, after the agent has its answer.
      if (sse) {
        json list = json::array();
        for (const auto& e : recorded_events) {
          json data = json::parse(e.data, nullptr, false);
          list.push_back({{"event", e.event}, {"data", data.is_discarded() ? json(e.data) : data}});
        }
        response["events"] = std::move(list);
        response["truncated"] = truncated;
      } else {
        response["body"] = body_json(body, o.max_recorded_body);
        response["truncated"] = body.size() > o.max_recorded_body;
      }
      call["response"] = std::move(response);
      append(std::move(call), req);
    }
    return !error;
  }

  void count(const call_usage& u, std::optional<double> cost, bool failed, double ttfb,
             double duration) {
    if (failed) ++t.failed;
    t.ttfb_ms.push_back(ttfb);
    t.duration_ms.push_back(duration);
    if (u.known()) {
      auto add = [](std::optional<uint64_t>& sum, const std::optional<uint64_t>& v) {
        if (v) sum = sum.value_or(0) + *v;
      };
      add(t.usage.input_tokens, u.input_tokens);
      add(t.usage.cached_input_tokens, u.cached_input_tokens);
      add(t.usage.cache_write_tokens, u.cache_write_tokens);
      add(t.usage.output_tokens, u.output_tokens);
      add(t.usage.reasoning_tokens, u.reasoning_tokens);
      if (cost)
        t.cost_usd += *cost;
      else
        ++t.calls_unpriced;
    } else {
      ++t.calls_without_usage;
    }
    if (!t.exhausted) t.exhausted = reached();
    if (t.exhausted && !spent_at) spent_at = clock_type::now();
  }

  static std::string now_text() {
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000;
    struct tm tm {};
    gmtime_r(&t, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  }
};

model_gateway::model_gateway(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

model_gateway::~model_gateway() {
  if (impl_ && impl_->server) impl_->server->stop();
}

result<std::unique_ptr<model_gateway>> model_gateway::start(gateway_options options) {
  auto p = std::make_unique<impl>();
  if (options.key.empty() && !options.login)
    return make_error(error_kind::invalid_argument, "the gateway has no key to send upstream");
  if (!options.key.empty()) log::redact_secret(options.key);
  p->upstream = EB_TRY_CTX(http::parse_url(options.upstream), "gateway upstream");
  p->prefix = p->upstream.target == "/" ? std::string() : p->upstream.target;
  while (p->prefix.ends_with('/')) p->prefix.pop_back();
  p->placeholder = std::string(placeholder_prefix) + random_suffix() + random_suffix();
  p->o = std::move(options);
  http::server_options so;
  so.max_body = p->o.max_request_body;
  // An agent may hold many keep-alive connections and stream on many at once.
  so.max_connections = 1024;
  so.read_timeout = std::chrono::milliseconds(120'000);
  so.write_timeout = std::chrono::milliseconds(120'000);
  impl* raw = p.get();
  p->server =
      EB_TRY_CTX(http::server::start(std::move(so),
                                     [raw](const http::incoming_request& req,
                                           http::response_stream& out) { raw->handle(req, out); }),
                 "starting the model gateway");
  return std::unique_ptr<model_gateway>(new model_gateway(std::move(p)));
}

uint16_t model_gateway::port() const noexcept { return impl_->server->port(); }

std::string model_gateway::base_url() const {
  return fmt::format("http://127.0.0.1:{}{}", port(), impl_->prefix);
}

const std::string& model_gateway::placeholder() const noexcept { return impl_->placeholder; }

bool model_gateway::should_stop_agent() const {
  std::lock_guard lock(impl_->m);
  if (!impl_->spent_at) return false;
  return impl_->refused_after_spent >= static_cast<uint64_t>(impl_->o.refusals_before_stop) ||
         clock_type::now() - *impl_->spent_at >= impl_->o.stop_grace;
}

gateway_totals model_gateway::totals() const {
  std::lock_guard lock(impl_->m);
  return impl_->t;
}

gateway_totals model_gateway::stop() {
  impl_->server->stop();
  return totals();
}

}  // namespace evalbox::harness::gateway
