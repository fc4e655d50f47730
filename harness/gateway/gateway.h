// The model gateway of one run (docs/agents.md, "The model gateway"): an HTTP server on the
// host's loopback that the run's agent reaches through its network relay, holding a placeholder
// key worthless outside the run. Each request that carries the placeholder is forwarded to the
// one upstream with the real key (read on the host, never in the sandbox), its response passed
// back as it arrives (SSE included), its usage counted and priced, and the exchange appended to
// runs/<id>/model-calls.jsonl. Once a budget is reached the next request gets an error in its
// API's own shape, so that the client stops cleanly.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_fwd.h"
#include "harness/config/spec.h"
#include "harness/gateway/login.h"
#include "harness/gateway/model_cache.h"
#include "harness/gateway/rate_limit.h"
#include "harness/gateway/usage.h"

namespace evalbox::harness::gateway {

struct gateway_options {
  std::string upstream;  // gateway_spec::upstream: scheme://host[:port][/prefix]
  std::vector<std::string> ca_files;
  std::string key;  // the real key (registered with log::redact_secret by start())
  // A subscription login instead of a key: each upstream request is authenticated with its
  // access token, refreshed on the host (login.h).
  std::shared_ptr<upstream_login> login;
  budget_spec budget;
  // The cost of one call in US dollars (its model as the response names it, else the request's),
  // or nullopt when no price is known for it.
  std::function<std::optional<double>(const std::string& model, const call_usage& usage)> price;
  std::filesystem::path calls_file;          // model-calls.jsonl; empty: no record
  size_t max_recorded_body = 4u << 20;       // of each request and response body in the record
  size_t max_request_body = 32u << 20;       // larger requests are refused (413)
  uint64_t max_response_bytes = 256u << 20;  // a longer response is cut
  std::chrono::milliseconds upstream_head_timeout{600'000};  // a model may think long
  std::chrono::milliseconds upstream_idle_timeout{300'000};  // between body bytes
  // Refused requests after the budget is spent before should_stop_agent() says so.
  int refusals_before_stop = 3;
  std::chrono::milliseconds stop_grace{30'000};  // or this long after the budget was spent
  // The run's model cache (--model-cache): answers from it, and what the upstream answers
  // stored in it, as its mode says. Null: every request goes upstream.
  std::shared_ptr<model_cache> cache;
  // The credential's requests_per_minute, shared with every gateway in front of it: each request
  // that goes upstream waits for its slot. Null: no limit.
  std::shared_ptr<request_rate> rate;
};

// What the gateway saw, summed over the run.
struct gateway_totals {
  uint64_t calls = 0;    // forwarded to the upstream
  uint64_t refused = 0;  // answered by the gateway itself (budget, key, path, size)
  uint64_t failed = 0;   // forwarded, but the upstream could not be reached or was cut
  call_usage usage;      // summed over the calls whose usage was read
  uint64_t calls_without_usage = 0;
  double cost_usd = 0;
  uint64_t calls_unpriced = 0;   // calls with usage but no price
  uint64_t replayed = 0;         // answered from the model cache (of `calls`)
  double replayed_cost_usd = 0;  // what those cost when they were recorded (of cost_usd)
  uint64_t replay_misses = 0;    // replay: requests the cache had no answer to
  uint64_t rate_waited = 0;      // calls that waited for the credential's requests_per_minute
  uint64_t rate_wait_ms = 0;     // how long they waited, summed
  std::optional<std::string> exhausted;  // the budget reached, in words
  std::vector<double> ttfb_ms;           // per forwarded call: time to the response's first byte
  std::vector<double> duration_ms;       // per forwarded call: to its last byte

  [[nodiscard]] json to_json() const;
};

class model_gateway {
 public:
  // Serves on 127.0.0.1 at a free port; the upstream is checked now (a bad URL is an error).
  static result<std::unique_ptr<model_gateway>> start(gateway_options options);
  ~model_gateway();
  model_gateway(const model_gateway&) = delete;
  model_gateway& operator=(const model_gateway&) = delete;

  [[nodiscard]] uint16_t port() const noexcept;
  // "http://127.0.0.1:PORT" followed by the upstream's path prefix: what the agent is given.
  [[nodiscard]] std::string base_url() const;
  [[nodiscard]] const std::string& placeholder() const noexcept;
  // A budget is spent and the agent keeps asking (refusals_before_stop refusals, or stop_grace
  // since it was spent): the runner ends the agent.
  [[nodiscard]] bool should_stop_agent() const;
  [[nodiscard]] gateway_totals totals() const;
  // Stops serving (a request in flight is cut) and returns the totals; the record is synced.
  gateway_totals stop();

  struct impl;

 private:
  explicit model_gateway(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// The placeholder's form, for tests and docs: "evalbox-gateway-" and 32 hex digits.
bool looks_like_placeholder(std::string_view text);

}  // namespace evalbox::harness::gateway
