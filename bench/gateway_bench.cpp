// The model gateway against a direct connection (harness/gateway/gateway.h; docs/performance.md,
// "The model gateway"). An upstream stub in this process (sandbox/http/server.h) answers POST
// /v1/messages with an Anthropic-style stream — message_start with usage, N content_block_delta
// events of about 100 bytes, message_delta with the output usage, message_stop — N and the pause
// between events read from the request's query. Clients (sandbox/http/client.h: one connection
// per request) reach it three ways, in the same process and the same rounds:
//   direct      the stub itself, with the key;
//   gateway     a model_gateway in front of it, with its placeholder, recording every call in a
//               model-calls.jsonl in a temporary directory (under $TMPDIR; appended and
//               fdatasynced per call, as a run's record is);
//   unrecorded  a second gateway with no calls_file: the record's cost is the difference.
//
//   gateway/ttfb/<request>/against_direct   from fetch() to the first body byte of a 20-event
//       stream, the three ways once per round in an order that rotates, 2 ms apart (and after
//       the recorded gateway's record is synced: an agent's next request follows its tools);
//       p50 and p90 of each, gateway p50 ÷ direct p50 and the milliseconds added at p50, and
//       how long after the stream's end its record was synced. <request> is the request body:
//       1kb (a first turn) or 200kb (an agent's conversation, which it sends whole every turn,
//       and which the gateway parses for its record before it forwards the request).
//   gateway/throughput/<n>_streams/against_direct   n client threads released at once, each
//       reading a whole stream of 200 events (about 21 KB) with no pause; the body bytes per
//       second of each way and the medians of the rounds' ratios, and the recorded gateway's
//       bytes per second until its last record of the burst was synced ("until recorded").
//       Only whole streams count: a stream refused (503) or cut is counted as such, and its
//       bytes are not. 100 streams (the target) and 60 (under the gateway's server's limit of
//       64 connections); 60_streams_paced: 50 events 10 ms apart, a fast model's pace.
//   gateway/held/100_streams   100 streams held open at once (50 events 4 ms apart): how many
//       each way serves, and the most streams the stub had open at once.
// The figures and the targets' verdicts are printed at the end. No root needed.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/fs.h"
#include "base/unique_fd.h"
#include "harness/gateway/gateway.h"
#include "sandbox/http/client.h"
#include "sandbox/http/server.h"

namespace evalbox::bench {
namespace {

namespace http = sandbox::http;
namespace gw = harness::gateway;
using clock_type = std::chrono::steady_clock;

// What the stub accepts, and what the gateways send it in place of their placeholders.
const std::string fake_key = "sk-ant-bench-not-a-real-key-0123456789abcdef";

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The p-quantile (0..1) of `v`, interpolated between the two nearest ranks.
double quantile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  if (lo + 1 >= v.size()) return v[lo];
  return v[lo] + (pos - static_cast<double>(lo)) * (v[lo + 1] - v[lo]);
}

// The figures of the last run of each benchmark, printed as a table at the end.
std::mutex g_figures_m;
std::map<std::string, double> g_figures;
void figure(const std::string& name, double value) {
  std::lock_guard lock(g_figures_m);
  g_figures[name] = value;
}

// ---- the stream ----

std::string message_start() {
  return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
         "\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-bench\","
         "\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":1200,"
         "\"cache_read_input_tokens\":800,\"output_tokens\":1}}}\n\n";
}

// About 100 bytes, as a token or two of text is.
std::string delta(int i) {
  return fmt::format(
      "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{{\"type\":\"text_delta\",\"text\":\"word{:06} \"}}}}\n\n",
      i);
}

std::string message_end(int events) {
  return fmt::format(
      "event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":"
      "\"end_turn\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":{}}}}}\n\n"
      "event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
      events);
}

// The whole body the stub sends for `events` deltas: what a client must have read.
uint64_t stream_bytes(int events) {
  uint64_t n = message_start().size() + message_end(events).size();
  for (int i = 0; i < events; ++i) n += delta(i).size();
  return n;
}

std::string stream_target(int events, int delay_us) {
  return fmt::format("/v1/messages?events={}&delay_us={}", events, delay_us);
}

// `name=<digits>` of a query string, or `otherwise`.
int query_int(std::string_view target, std::string_view name, int otherwise) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return otherwise;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view param = rest.substr(0, amp);
    if (param.size() > name.size() && param.starts_with(name) && param[name.size()] == '=') {
      int v = 0;
      for (char c : param.substr(name.size() + 1)) {
        if (c < '0' || c > '9') return otherwise;
        v = v * 10 + (c - '0');
      }
      return v;
    }
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return otherwise;
}

// A request body shaped like an Anthropic Messages request: a system prompt and alternating
// turns of about 2 KB of text until it is about `bytes` long.
std::string request_body(size_t bytes) {
  std::string text;
  while (text.size() < 2000) text += "The quick brown fox jumps over the lazy dog; ";
  std::string messages;
  for (int i = 0; messages.size() + 400 < bytes; ++i) {
    if (!messages.empty()) messages += ',';
    const size_t room = bytes - messages.size() - 400;
    messages +=
        fmt::format(R"({{"role":"{}","content":[{{"type":"text","text":"{} {}"}}]}})",
                    i % 2 ? "assistant" : "user", i, text.substr(0, std::min(text.size(), room)));
  }
  return fmt::format(
      R"({{"model":"claude-bench","max_tokens":8192,"stream":true,)"
      R"("system":"You are a coding agent working in /workspace.","messages":[{}]}})",
      messages);
}

// ---- the upstream stub ----

class upstream_stub {
 public:
  static result<std::unique_ptr<upstream_stub>> start() {
    auto s = std::unique_ptr<upstream_stub>(new upstream_stub());
    http::server_options o;
    o.max_connections = 512;  // the direct clients and both gateways' at once
    upstream_stub* raw = s.get();
    s->server_ = EB_TRY_CTX(
        http::server::start(o, [raw](const http::incoming_request& req,
                                     http::response_stream& out) { raw->serve(req, out); }),
        "the upstream stub");
    return s;
  }
  ~upstream_stub() {
    if (server_) server_->stop();
  }
  upstream_stub(const upstream_stub&) = delete;
  upstream_stub& operator=(const upstream_stub&) = delete;

  [[nodiscard]] std::string url() const {
    return fmt::format("http://127.0.0.1:{}", server_->port());
  }
  void reset_peak() { peak_ = open_.load(); }
  [[nodiscard]] int peak() const { return peak_.load(); }

 private:
  upstream_stub() = default;

  void serve(const http::incoming_request& req, http::response_stream& out) {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (req.method != "POST" || path != "/v1/messages") {
      (void)out.begin(404, {}, 0);
      (void)out.end();
      return;
    }
    // The gateway must have put the key where its placeholder was.
    if (req.header("x-api-key") != fake_key) {
      (void)out.begin(401, {}, 0);
      (void)out.end();
      return;
    }
    const int events = query_int(req.target, "events", 200);
    const auto pause = std::chrono::microseconds(query_int(req.target, "delay_us", 0));
    const int now_open = ++open_;
    for (int p = peak_.load(); now_open > p && !peak_.compare_exchange_weak(p, now_open);) {
    }
    stream(out, events, pause);
    --open_;
  }

  static void stream(http::response_stream& out, int events, std::chrono::microseconds pause) {
    if (!out.begin(200, {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}},
                   std::nullopt))
      return;
    if (!out.write(message_start())) return;
    for (int i = 0; i < events; ++i) {
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
      if (!out.write(delta(i))) return;
    }
    if (!out.write(message_end(events))) return;
    (void)out.end();
  }

  std::unique_ptr<http::server> server_;
  std::atomic<int> open_{0};
  std::atomic<int> peak_{0};
};

// ---- the three ways ----

struct way {
  std::string name;
  http::url to;  // its target replaced per request
  std::string key;
};

struct setup {
  temp_dir tmp{"evalbox-bench-gateway"};
  std::unique_ptr<upstream_stub> stub;
  std::unique_ptr<gw::model_gateway> recorded, unrecorded;
  std::vector<way> ways;  // direct, gateway, unrecorded
  std::string error;      // why there is none
  // The recorded gateway's model-calls.jsonl, read as it grows: its lines so far.
  std::filesystem::path calls;
  uint64_t calls_read = 0;
  uint64_t calls_lines = 0;
};

result<std::unique_ptr<gw::model_gateway>> start_gateway(const std::string& upstream,
                                                         const std::filesystem::path& calls) {
  gw::gateway_options o;
  o.upstream = upstream;
  o.key = fake_key;
  o.price = [](const std::string&, const gw::call_usage&) -> std::optional<double> {
    return std::nullopt;
  };
  o.calls_file = calls;
  return gw::model_gateway::start(std::move(o));
}

status make_setup(setup& s) {
  s.stub = EB_TRY(upstream_stub::start());
  s.calls = s.tmp.path() / "model-calls.jsonl";
  s.recorded = EB_TRY(start_gateway(s.stub->url(), s.calls));
  s.unrecorded = EB_TRY(start_gateway(s.stub->url(), {}));
  s.ways.push_back({"direct", EB_TRY(http::parse_url(s.stub->url())), fake_key});
  s.ways.push_back(
      {"gateway", EB_TRY(http::parse_url(s.recorded->base_url())), s.recorded->placeholder()});
  s.ways.push_back({"unrecorded", EB_TRY(http::parse_url(s.unrecorded->base_url())),
                    s.unrecorded->placeholder()});
  return {};
}

setup& env() {
  static setup s;
  static const bool made = [] {
    if (auto ok = make_setup(s); !ok) s.error = ok.error().message;
    return true;
  }();
  (void)made;
  return s;
}

// Gateways first: their connections to the stub end before it stops.
void teardown() {
  setup& s = env();
  if (s.recorded) (void)s.recorded->stop();
  if (s.unrecorded) (void)s.unrecorded->stop();
  s.recorded.reset();
  s.unrecorded.reset();
  s.stub.reset();
}

// Waits until the recorded gateway has appended the record of every call it counted (each call
// it forwarded or refused writes one line, after its response ended) and synced it: until then
// its connections stay open, each holding one of the gateway's server's connections. False after
// 30 s.
bool wait_recorded(setup& s) {
  const auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (clock_type::now() < deadline) {
    const gw::gateway_totals t = s.recorded->totals();
    if (std::FILE* f = std::fopen(s.calls.c_str(), "rb")) {
      if (::fseeko(f, static_cast<off_t>(s.calls_read), SEEK_SET) == 0) {
        char buf[65536];
        size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
          s.calls_read += n;
          s.calls_lines += static_cast<uint64_t>(std::count(buf, buf + n, '\n'));
        }
      }
      std::fclose(f);
    }
    if (s.calls_lines >= t.calls + t.refused) {
      // Written; durable once the gateway's fdatasync is through, which this one waits for.
      unique_fd fd(::open(s.calls.c_str(), O_RDONLY | O_CLOEXEC));
      return fd && ::fdatasync(fd.get()) == 0;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return false;
}

struct stream_result {
  int status = 0;
  double ttfb_ms = 0;  // fetch() called → first body byte read
  uint64_t bytes = 0;  // of the body
};

// One request, its whole response read.
result<stream_result> read_stream(const way& w, const std::string& target,
                                  const std::string& body) {
  http::request req;
  req.method = "POST";
  req.to = w.to;
  req.to.target = target;
  req.headers = {{"x-api-key", w.key},
                 {"anthropic-version", "2023-06-01"},
                 {"Content-Type", "application/json"},
                 {"Accept", "text/event-stream"}};
  req.body = body;
  const http::options opts;
  stream_result r;
  const auto t0 = clock_type::now();
  auto res = EB_TRY(http::fetch(req, opts));
  r.status = res.status();
  std::byte buf[16384];
  while (true) {
    const size_t n = EB_TRY(res.read(buf));
    if (n == 0) break;
    if (r.bytes == 0) r.ttfb_ms = ms_between(t0, clock_type::now());
    r.bytes += n;
  }
  return r;
}

// ---- time to first byte ----

void bm_ttfb(benchmark::State& state, size_t body_bytes, const std::string& label) {
  setup& e = env();
  if (!e.error.empty()) return state.SkipWithError(e.error.c_str());
  const int events = 20;
  const std::string target = stream_target(events, 0);
  const std::string body = request_body(body_bytes);
  const uint64_t want = stream_bytes(events);
  std::vector<std::vector<double>> ttfb(e.ways.size());
  std::vector<double> record_ms;  // from the stream's end to its record synced
  size_t round = 0;
  for (auto _ : state) {
    for (size_t k = 0; k < e.ways.size(); ++k) {
      const size_t i = (k + round) % e.ways.size();
      auto r = read_stream(e.ways[i], target, body);
      // The record is written after the response ended: waited for here, and then a pause
      // after every request, or the next request would pay for its fdatasync and thread's end
      // (an agent's next request comes after its tools ran).
      if (i == 1) {
        const auto t0 = clock_type::now();
        if (!wait_recorded(e)) return state.SkipWithError("the gateway's record never came");
        record_ms.push_back(ms_between(t0, clock_type::now()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (!r || r->status != 200 || r->bytes != want)
        return state.SkipWithError(
            fmt::format("{}: {}", e.ways[i].name,
                        !r ? r.error().message
                           : fmt::format("status {}, {} of {} bytes", r->status, r->bytes, want))
                .c_str());
      ttfb[i].push_back(r->ttfb_ms);
    }
    ++round;
    state.SetIterationTime(ttfb[1].back() / 1000);  // the gateway's
  }
  const std::string prefix = "ttfb/" + label + "/";
  for (size_t i = 0; i < e.ways.size(); ++i) {
    const double p50 = quantile(ttfb[i], 0.5), p90 = quantile(ttfb[i], 0.9);
    state.counters[e.ways[i].name + "_p50_ms"] = p50;
    state.counters[e.ways[i].name + "_p90_ms"] = p90;
    figure(prefix + e.ways[i].name + "_p50_ms", p50);
    figure(prefix + e.ways[i].name + "_p90_ms", p90);
  }
  state.counters["record_p50_ms"] = quantile(record_ms, 0.5);
  figure(prefix + "gateway_record_synced_after_end_p50_ms", quantile(record_ms, 0.5));
  const double direct = quantile(ttfb[0], 0.5);
  for (size_t i = 1; i < e.ways.size(); ++i) {
    const double p50 = quantile(ttfb[i], 0.5);
    state.counters[e.ways[i].name + "_per_direct"] = p50 / direct;
    state.counters[e.ways[i].name + "_added_p50_ms"] = p50 - direct;
    figure(prefix + e.ways[i].name + "_per_direct", p50 / direct);
    figure(prefix + e.ways[i].name + "_added_p50_ms", p50 - direct);
  }
}

// ---- many streams at once ----

struct burst {
  double seconds = 0;
  uint64_t bytes = 0;  // of the whole streams
  int served = 0;      // whole streams
  int refused = 0;     // 503 (the server's connection limit)
  int failed = 0;      // another status, an error, a cut stream
  std::string first_failure;
};

// `streams` threads, released at once, each reading one stream through `w`.
burst run_burst(const way& w, int streams, const std::string& target, const std::string& body,
                uint64_t want) {
  std::vector<result<stream_result>> got(static_cast<size_t>(streams), stream_result{});
  std::latch started(streams);
  std::latch go(1);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(streams));
  for (int t = 0; t < streams; ++t) {
    threads.emplace_back([&, t] {
      started.count_down();
      go.wait();
      got[static_cast<size_t>(t)] = read_stream(w, target, body);
    });
  }
  started.wait();
  const auto t0 = clock_type::now();
  go.count_down();
  for (auto& t : threads) t.join();
  burst b;
  b.seconds = ms_between(t0, clock_type::now()) / 1000;
  for (const auto& r : got) {
    if (r && r->status == 200 && r->bytes == want) {
      ++b.served;
      b.bytes += r->bytes;
    } else if (r && r->status == 503) {
      ++b.refused;
    } else {
      ++b.failed;
      if (b.first_failure.empty())
        b.first_failure = !r ? r.error().message
                             : fmt::format("status {}, {} of {} bytes", r->status, r->bytes, want);
    }
  }
  return b;
}

// `streams` at once through each way, in rounds. After the recorded gateway's burst, its records
// are waited for (untimed but for the "until recorded" figure), so that the connections still
// writing them do not count against the next burst.
void bm_throughput(benchmark::State& state, int streams, int events, int delay_us,
                   const std::string& label) {
  setup& e = env();
  if (!e.error.empty()) return state.SkipWithError(e.error.c_str());
  const std::string target = stream_target(events, delay_us);
  const std::string body = request_body(1000);
  const uint64_t want = stream_bytes(events);
  const size_t n = e.ways.size();
  std::vector<std::vector<double>> rate(n);  // MB/s of each round
  std::vector<std::vector<double>> ratio(n);
  std::vector<int> refused(n), failed(n), served(n);
  std::vector<double> until_recorded;  // MB/s of the recorded gateway, to its last record
  std::string first_failure;
  size_t round = 0;
  for (auto _ : state) {
    std::vector<burst> b(n);
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + round) % n;
      b[i] = run_burst(e.ways[i], streams, target, body, want);
      rate[i].push_back(static_cast<double>(b[i].bytes) / b[i].seconds / 1e6);
      if (i == 1) {
        const auto t0 = clock_type::now();
        if (!wait_recorded(e)) return state.SkipWithError("the gateway's records never came");
        until_recorded.push_back(static_cast<double>(b[i].bytes) /
                                 (b[i].seconds + ms_between(t0, clock_type::now()) / 1000) / 1e6);
      }
      served[i] += b[i].served;
      refused[i] += b[i].refused;
      failed[i] += b[i].failed;
      if (first_failure.empty() && !b[i].first_failure.empty())
        first_failure = e.ways[i].name + ": " + b[i].first_failure;
    }
    ++round;
    for (size_t i = 1; i < n; ++i) ratio[i].push_back(rate[i].back() / rate[0].back());
    state.SetIterationTime(b[1].seconds);  // the gateway's
  }
  const std::string prefix = "throughput/" + label + "/";
  state.counters["gateway_until_recorded_mb_per_s"] = quantile(until_recorded, 0.5);
  figure(prefix + "gateway_until_recorded_mb_per_s", quantile(until_recorded, 0.5));
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = e.ways[i].name;
    state.counters[name + "_mb_per_s"] = quantile(rate[i], 0.5);
    state.counters[name + "_refused"] = refused[i];
    state.counters[name + "_failed"] = failed[i];
    figure(prefix + name + "_mb_per_s", quantile(rate[i], 0.5));
    figure(prefix + name + "_served_of_" + std::to_string(streams * static_cast<int>(round)),
           served[i]);
    figure(prefix + name + "_refused", refused[i]);
    figure(prefix + name + "_failed", failed[i]);
    if (i > 0) {
      state.counters[name + "_per_direct"] = quantile(ratio[i], 0.5);
      figure(prefix + name + "_per_direct", quantile(ratio[i], 0.5));
    }
  }
  if (!first_failure.empty()) std::fprintf(stderr, "gateway_bench: %s\n", first_failure.c_str());
}

// 100 streams open at once: each way once, the stub's peak of open streams with it.
void bm_held(benchmark::State& state, int streams) {
  setup& e = env();
  if (!e.error.empty()) return state.SkipWithError(e.error.c_str());
  const int events = 50;
  const std::string target = stream_target(events, 4000);
  const std::string body = request_body(1000);
  const uint64_t want = stream_bytes(events);
  const std::string prefix = fmt::format("held/{}_streams/", streams);
  for (auto _ : state) {
    double gateway_seconds = 0;
    for (size_t i = 0; i < e.ways.size(); ++i) {
      e.stub->reset_peak();
      const burst b = run_burst(e.ways[i], streams, target, body, want);
      const std::string& name = e.ways[i].name;
      state.counters[name + "_served"] = b.served;
      state.counters[name + "_refused"] = b.refused;
      state.counters[name + "_peak_open"] = e.stub->peak();
      figure(prefix + name + "_served", b.served);
      figure(prefix + name + "_refused", b.refused);
      figure(prefix + name + "_failed", b.failed);
      figure(prefix + name + "_stub_peak_open", e.stub->peak());
      if (i == 1) gateway_seconds = b.seconds;
    }
    state.SetIterationTime(gateway_seconds);
  }
}

void register_all() {
  auto manual_ms = [](benchmark::internal::Benchmark* b) {
    return b->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  // Fixed rounds, not --benchmark_min_time: quantiles need many, and the suite stays under a
  // minute.
  manual_ms(benchmark::RegisterBenchmark("gateway/ttfb/1kb/against_direct",
                                         [](benchmark::State& st) { bm_ttfb(st, 1000, "1kb"); }))
      ->Iterations(1000);
  manual_ms(
      benchmark::RegisterBenchmark("gateway/ttfb/200kb/against_direct",
                                   [](benchmark::State& st) { bm_ttfb(st, 200'000, "200kb"); }))
      ->Iterations(300);
  // As fast as the stub can write (the gateway's own cost), and at a fast model's pace (10 ms
  // between events: 100 a second per stream). 60: under the gateway's server's limit of 64
  // connections (server_options::max_connections, which the gateway leaves at its default).
  manual_ms(benchmark::RegisterBenchmark(
                "gateway/throughput/100_streams/against_direct",
                [](benchmark::State& st) { bm_throughput(st, 100, 200, 0, "100_streams"); }))
      ->Iterations(8);
  manual_ms(benchmark::RegisterBenchmark(
                "gateway/throughput/60_streams/against_direct",
                [](benchmark::State& st) { bm_throughput(st, 60, 200, 0, "60_streams"); }))
      ->Iterations(8);
  manual_ms(benchmark::RegisterBenchmark(
                "gateway/throughput/60_streams_paced/against_direct",
                [](benchmark::State& st) { bm_throughput(st, 60, 50, 10000, "60_streams_paced"); }))
      ->Iterations(5);
  manual_ms(benchmark::RegisterBenchmark("gateway/held/100_streams", [](benchmark::State& st) {
    bm_held(st, 100);
  }))->Iterations(1);
}

// The figures against the targets (docs/performance.md, "The model gateway").
void print_summary() {
  std::lock_guard lock(g_figures_m);
  if (g_figures.empty()) return;
  auto get = [](const std::string& k) -> std::optional<double> {
    if (auto it = g_figures.find(k); it != g_figures.end()) return it->second;
    return std::nullopt;
  };
  auto verdict = [](bool met) { return met ? "met" : "NOT met"; };
  std::fprintf(stderr, "\ngateway_bench: figures of this run\n");
  for (const auto& [k, v] : g_figures) std::fprintf(stderr, "  %-52s %10.3f\n", k.c_str(), v);
  std::fprintf(stderr, "targets:\n");
  for (const char* size : {"1kb", "200kb"}) {
    const std::string p = fmt::format("ttfb/{}/gateway_", size);
    if (auto a = get(p + "added_p50_ms"), r = get(p + "per_direct"); a && r)
      std::fprintf(stderr, "  added TTFB at p50, %-5s request    %6.3f ms (%.2fx) (<= 1 ms) %s\n",
                   size, *a, *r, verdict(*a <= 1));
  }
  for (const char* label : {"100_streams", "60_streams", "60_streams_paced"}) {
    const int streams = std::string_view(label).starts_with("100") ? 100 : 60;
    const std::string p = fmt::format("throughput/{}/", label);
    const auto r = get(p + "gateway_per_direct");
    if (!r) continue;
    // A stream refused is a target missed, whatever the bytes/s of the others.
    const double refused = get(p + "gateway_refused").value_or(0) +
                           get(p + "gateway_failed").value_or(0) +
                           get(fmt::format("held/{}_streams/gateway_refused", streams)).value_or(0);
    std::fprintf(stderr, "  %-16s gateway / direct     %6.2f (>= 0.90) %s\n", label, *r,
                 verdict(*r >= 0.9 && refused == 0));
    if (refused > 0)
      std::fprintf(stderr, "      %.0f streams refused or cut by the gateway\n", refused);
  }
}

}  // namespace
}  // namespace evalbox::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ::signal(SIGPIPE, SIG_IGN);
  evalbox::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  evalbox::bench::teardown();
  evalbox::bench::print_summary();
  benchmark::Shutdown();
  return 0;
}
