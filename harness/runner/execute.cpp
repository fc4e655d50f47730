// One attempt at one run, phase by phase (see execute.h).
#include "harness/runner/execute.h"

#include <strings.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "base/fs.h"
#include "base/json_checks.h"
#include "base/json_get.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/agent/host_client.h"
#include "harness/agent/settings.h"
#include "harness/gateway/gateway.h"
#include "harness/grading/grading.h"
#include "harness/judge/client.h"
#include "harness/session/commands.h"
#include "harness/session/server.h"
#include "harness/session/session.h"
#include "harness/transcripts/atif.h"
#include "harness/transcripts/read_limits.h"
#include "sandbox/http/client.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::harness {
inline namespace runner {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

uint32_t session_nonce() {
  static std::mutex mu;
  static std::mt19937 gen{std::random_device{}()};
  std::lock_guard lock(mu);
  return static_cast<uint32_t>(gen());
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= path.size();) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    out.push_back(path.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// What a Harbor verifier may leave in /logs/verifier that is kept under the run directory: it
// ran over what the agent left, so its files are bounded like any agent-influenced data.
constexpr size_t max_verifier_files = 64;
constexpr size_t max_verifier_file_bytes = 8u << 20;
constexpr size_t max_verifier_bytes = 32u << 20;
constexpr size_t max_reward_bytes = 64u << 10;

// Copies the regular files below `from` (a tree the verifier wrote: symlinks are never
// followed) into `to`, within the bounds above; says what was left out.
std::vector<std::string> keep_verifier_files(const fs::path& from, const fs::path& to) {
  std::vector<std::string> skipped;
  auto files = list_beneath(from, ".", max_verifier_files);
  if (!files) return {fmt::format("/logs/verifier: {}", files.error().message)};
  size_t total = 0;
  for (const auto& f : *files) {
    auto e = lookup_beneath(from, f, false, false);
    if (!e || e->type != beneath_entry::type_kind::regular) {
      skipped.push_back(fmt::format("{} (not a regular file)", f));
      continue;
    }
    if (e->size > max_verifier_file_bytes || total + e->size > max_verifier_bytes) {
      skipped.push_back(fmt::format("{} ({} bytes: past what evalbox keeps)", f, e->size));
      continue;
    }
    e = lookup_beneath(from, f, false, true, max_verifier_file_bytes);
    if (!e) {
      skipped.push_back(fmt::format("{} ({})", f, e.error().message));
      continue;
    }
    total += e->content.size();
    const fs::path dest = to / f;
    if (!make_dirs(dest.parent_path()) || !write_file(dest, e->content))
      skipped.push_back(fmt::format("{} (could not be written)", f));
  }
  return skipped;
}

// How much of workspace.diff a judge check reads (its evidence is bounded below that).
constexpr size_t max_judge_diff_bytes = 4u << 20;

// The first `max` bytes of `path` (a diff of any size), with a line saying how large it is
// when that is not all of it.
std::string diff_head(const fs::path& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "(the diff could not be read)";
  std::string text(max, '\0');
  in.read(text.data(), static_cast<std::streamsize>(max));
  text.resize(static_cast<size_t>(in.gcount()));
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec && size > text.size())
    text += fmt::format("\n[evalbox: workspace.diff is {} bytes; its first {} are shown]", size,
                        text.size());
  return text;
}

// A judge check's request, from the host process (it executes nothing the agent wrote): the
// key is read from the host's environment now, and goes only into the request.
result<judge_exchange> ask_judge_from_host(const judge_spec& judge, const judge_prompt& prompt) {
  std::string key;
  if (!judge.api_key_env.empty()) {
    const char* value = std::getenv(judge.api_key_env.c_str());
    if (!value || !*value)
      return make_error(error_kind::invalid_argument,
                        "judge {}: the key variable {} is not set in evalbox's environment",
                        judge.name, judge.api_key_env);
    key = value;
  }
  return ask_judge(judge, prompt, key);
}

// A launch for the harness's own commands (setup, diff, checks): the run's environment without
// the agent's additions, no credential leases, no network.
sandbox::launch_options harness_launch(std::string label, std::string script,
                                       std::map<std::string, std::string> env) {
  sandbox::launch_options o;
  o.label = std::move(label);
  o.argv = {"/bin/sh", "-c", std::move(script)};
  o.env = std::move(env);
  o.with_secrets = false;
  o.network_override = sandbox::network_policy{};
  return o;
}

// A shell word that sets `p` to exactly these bytes. The launch plan travels as JSON, which
// holds text: a name that is not printable UTF-8 (the kernel allows any byte but '/' and NUL)
// would arrive with U+FFFD in place of its bytes and name no file. Such a name is spelled in
// octal escapes, which printf turns back into the bytes (the trailing x keeps a final newline
// from $(...)).
std::string shell_assign(const std::string& name) {
  bool plain = true;
  for (size_t i = 0; i < name.size() && plain;) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) plain = false;
    size_t n = utf8_sequence_length(std::string_view(name).substr(i));
    if (n == 0) plain = false;
    i += n ? n : 1;
  }
  if (plain) return "p=" + shell_quote(name);
  std::string octal;
  for (unsigned char c : name) octal += fmt::format("\\{:03o}", c);
  return "p=$(printf '" + octal + "x'); p=${p%x}";
}

// A shell script that copies each directory in `from` (a Harbor task's skills_dir, in the image)
// into `to` (the client's skills directory in the home), unless `to` holds that name already —
// the candidate's own skill, mounted read-only — and prints one line per skill: "skill: NAME"
// or "kept: NAME (...)". Exit 66: `from` is not a directory; 1: a copy failed (the home's disk
// is full, a file cannot be read), which fails the run's setup. POSIX sh and cp, so that busybox
// images run it too; links are copied as links (they resolve inside the sandbox only).
std::string task_skills_script(const std::string& from, const fs::path& to) {
  return "src=" + shell_quote(from) + "\ndst=" + shell_quote(to.string()) + "\n" + R"sh(
if [ ! -d "$src" ]; then echo "evalbox: skills_dir $src is not a directory in the image" >&2; exit 66; fi
mkdir -p "$dst"
nl='
'
for s in "$src"/*; do
  [ -d "$s" ] || continue
  n=${s##*/}
  case $n in *"$nl"*) echo "evalbox: skipped a skill whose name holds a line break" >&2; continue;; esac
  if [ -e "$dst/$n" ] || [ -L "$dst/$n" ]; then echo "kept: $n (the candidate's own skill of that name)"; continue; fi
  cp -R -P "$s" "$dst/$n" || { echo "evalbox: skill $n could not be copied" >&2; exit 1; }
  echo "skill: $n"
done
)sh";
}

// A shell script that writes the unified diff of `changed` (at most 2000 paths) between the
// snapshot at /evalbox/before and the workspace at `target`.
std::string diff_script(const std::vector<std::string>& changed, const fs::path& target) {
  std::string script;
  const std::string now = shell_quote(target.string() + "/");
  size_t n = 0;
  for (const auto& p : changed) {
    if (++n > 2000) break;
    // Directories are listed too (created, removed, made opaque): their files have entries.
    script += shell_assign(p) + "\n[ -d \"/evalbox/before/$p\" ] || [ -d " + now +
              "\"$p\" ] || diff -uN --no-dereference --label \"a/$p\" --label \"b/$p\" "
              "\"/evalbox/before/$p\" " +
              now + "\"$p\"\n";
  }
  return script + "exit 0";
}

// One attempt's state while it goes through the phases. Each phase returns false when the
// attempt ends there; st_ then says how (an execution error, or cancelled).
class attempt {
 public:
  attempt(const execution_context& x, const run_spec& r,
          std::optional<sandbox::prepared_session>& session)
      : x_(x),
        r_(r),
        fixture_(x.suite.fixtures[r.fixture]),
        cand_(x.suite.candidates[r.candidate]),
        run_dir_(x.results.run_dir(r.run_id)),
        native_(run_dir_ / "native"),
        ctx_{fixture_, cand_, r.trial, r.run_id, x.suite.credentials},
        session_(session),
        image_(x.images[r.fixture] ? &*x.images[r.fixture] : nullptr),
        launch_env_(run_environment(image_)) {}

  // A finished run graded again from the final state it kept (regrade_attempt).
  attempt_state regrade() {
    auto t0 = clock_type::now();
    // Why it cannot be graded again; `again`: whether another attempt might do better.
    auto stop = [this](run_error_kind kind, std::string_view why, bool again) {
      fail(kind, why);
      st_.retryable = again;
      return done();
    };
    out_dir_ = run_dir_ / "gradings" / grading_digest(fixture_, x_.suite);
    (void)remove_tree(out_dir_);
    if (auto s = make_dirs(out_dir_); !s)
      return stop(run_error_kind::host, s.error().message, true);
    auto trees = read_final_state(x_.results.root(), r_.run_id);
    if (!trees) return stop(run_error_kind::host, trees.error().message, false);
    auto tr = read_transcript(transcript_path());
    if (!tr) return stop(run_error_kind::host, "its transcript: " + tr.error().message, false);
    // A root layer over another image than the one it was written on would be another state.
    if (auto text = read_file(run_dir_ / "run.json"); text && image_) {
      auto rec = parse_json(*text, "run.json");
      const std::string was = rec ? json_value_or(json_member(*rec, "environment"), "id", "") : "";
      if (!was.empty() && was != image_->id)
        return stop(run_error_kind::host,
                    fmt::format("the fixture's image is not the one the run had (it had {}, it "
                                "is {} now): its state cannot be rebuilt on it; run it again",
                                was, image_->id),
                    false);
    }
    transcript_ = std::move(*tr);
    plan_.argv = {"/bin/true"};  // never launched: the request needs a program
    if (!prepare(0)) return done();
    auto pristine = session_->snapshot_workspace();
    if (!pristine) return stop(run_error_kind::sandbox, pristine.error().message, true);
    pristine_ = std::move(*pristine);
    std::vector<fs::path> after{pristine_.view}, before{pristine_.view};
    state_stack_.home = {session_->home_dir()};
    int n = 0;
    for (const auto& t : *trees) {
      auto dir = session_->scratch_dir(fmt::format("regrade-{}", n++));
      if (!dir) return stop(run_error_kind::sandbox, dir.error().message, true);
      const fs::path base = t.name == "root" ? fs::path() : pristine_.view;
      if (auto w = write_state_layer(x_.results.root(), t, base, *dir / "layer",
                                     session_->sandbox_uid(), session_->sandbox_gid());
          !w)
        return stop(run_error_kind::host, w.error().message, false);
      if (t.name == "workspace") after.insert(after.begin(), *dir / "layer");
      if (t.name == "setup") before.insert(before.begin(), *dir / "layer");
      if (t.name == "root") {
        if (!session_->image())
          return stop(run_error_kind::host,
                      "its final state has an image root, but the fixture has no image now", false);
        state_stack_.root.push_back(*dir / "layer");
      }
    }
    state_stack_.workspace = after;
    graded_stack_ = &state_stack_;
    for (auto* v : {&after, &before}) {
      if (v->size() == 1) continue;
      auto at = session_->scratch_dir(v == &after ? "regrade-after" : "regrade-before");
      if (!at) return stop(run_error_kind::sandbox, at.error().message, true);
      auto view = sandbox::layers_view::make(*v, *at);
      if (!view) return stop(run_error_kind::sandbox, view.error().message, true);
      regrade_views_.push_back(std::move(*view));
    }
    after_.view = after.size() == 1 ? pristine_.view : regrade_views_.front().path();
    before_.view = before.size() == 1 ? pristine_.view : regrade_views_.back().path();
    grade(t0);
    graded_stack_ = nullptr;
    for (const auto& d : graded_dirs_) (void)remove_tree(d);
    graded_dirs_.clear();
    return done();
  }

  attempt_state run(int number) {
    if (!fresh_run_dir()) return done();
    if (!start_gateway()) return done();
    if (!plan()) return done();
    if (!prepare(number)) return done();
    if (!setup()) {
      finish_gateway();
    } else if (const bool ran = agent(); finish_gateway(), ran && record_transcript()) {
      // Grading time, as run.json has always counted it, includes the diff.
      auto t0 = clock_type::now();
      if (diff()) {
        keep_state();
        grade(t0);
      }
    }
    keep_workspace();
    return done();  // the session stays alive until the caller has recorded the result
  }

 private:
  attempt_state done() { return std::move(st_); }
  bool fail(run_error_kind kind, std::string_view message) {
    st_.fail(kind, message);
    return false;
  }
  bool cancelled() {
    st_.cancelled = true;
    return false;
  }

  // A launch whose record goes into run.json under its label.
  result<sandbox::run_record> launch(const sandbox::launch_options& o,
                                     const sandbox::cancel_token* cancel = nullptr) {
    auto rec = sandbox::launch_in(*session_, o, cancel ? cancel : x_.options.cancel);
    if (rec) st_.records[o.label] = rec->to_json();
    return rec;
  }

  // A crashed earlier attempt left an unrecorded directory: start from nothing.
  bool fresh_run_dir() {
    (void)remove_tree(run_dir_);
    if (auto s = make_dirs(native_); !s) return fail(run_error_kind::host, s.error().message);
    return true;
  }

  bool plan() {
    adapter_ = x_.adapters.find(cand_.adapter);
    if (!adapter_)
      return fail(run_error_kind::adapter, fmt::format("no adapter named '{}'", cand_.adapter));
    auto p = adapter_->plan(ctx_);
    if (!p) return fail(run_error_kind::adapter, p.error().message);
    plan_ = std::move(*p);
    if (gateway_) {
      // Any client can find the gateway here (a command agent's own loop, say).
      plan_.env["EVALBOX_GATEWAY_URL"] = endpoint_.base_url;
      plan_.env["EVALBOX_GATEWAY_KEY"] = endpoint_.placeholder;
    }
    if (login_secret_) {
      // The gateway's login never enters the sandbox, whatever the adapter would mount.
      std::erase_if(plan_.secrets, [&](const sandbox::secret_mount& s) {
        return s.handle == login_secret_->handle || s.source == login_secret_->source;
      });
      plan_.secrets.push_back(*login_secret_);
    }
    if (auto a = in_image(plan_); !a) return fail(run_error_kind::adapter, a.error().message);
    return true;
  }

  // The candidate's model gateway (docs/agents.md, "The model gateway"), started before the
  // adapter plans so that it can point its client at it. Its key is read here, on the host.
  bool start_gateway() {
    if (!cand_.gateway || x_.options.interactive) return true;
    const bool replay_only = !x_.options.model_cache_dir.empty() &&
                             x_.options.model_cache_mode == gateway::cache_mode::replay;
    auto key = gateway_key(cand_, x_.suite.credentials);
    // Replaying needs no key: nothing goes upstream.
    if (!key && replay_only) key = gateway_secret{"evalbox-replay-sends-nothing-upstream"};
    if (!key) return fail(run_error_kind::adapter, key.error().message);
    gateway::gateway_options o;
    for (const auto& f : cand_.gateway->ca_files) o.ca_files.push_back(f.string());
    if (key->login_file) {
      // A subscription login: leased for the run but kept on the host (plan() makes it a
      // host-only secret), its token sent by the gateway.
      const auto kind = gateway::login_kind_of(key->value);
      if (!kind)
        return fail(run_error_kind::adapter,
                    fmt::format("candidate {}: credential '{}' ({}) is neither an API key on one "
                                "line nor a login the gateway can use (Claude's OAuth "
                                "credentials, Codex's ChatGPT auth.json)",
                                cand_.id, key->handle, key->source.string()));
      login_ = std::make_shared<gateway::upstream_login>(gateway::login_options{
          *kind, cand_.gateway->token_url, o.ca_files, std::chrono::seconds(300)});
      login_secret_ = sandbox::secret_mount{key->handle, key->source, {}};
      login_secret_->host_only = true;
      o.login = login_;
    } else {
      o.key = std::move(key->value);
    }
    if (!x_.options.model_cache_dir.empty())
      o.cache = std::make_shared<gateway::model_cache>(
          x_.options.model_cache_dir / fixture_.id / cand_.id / std::to_string(r_.trial),
          x_.options.model_cache_mode);
    if (x_.rates && !key->handle.empty())
      if (auto it = x_.rates->find(key->handle); it != x_.rates->end()) o.rate = it->second;
    o.upstream = cand_.gateway->upstream;
    budget_ = cand_.budget.value_or(budget_spec{});
    if (fixture_.budget) budget_ = budget_.merged_with(*fixture_.budget);
    o.budget = budget_;
    o.price = [this](const std::string& model,
                     const gateway::call_usage& u) -> std::optional<double> {
      const price_spec* p = x_.suite.price_for(cand_, model);
      if (!p) return std::nullopt;
      return p->cost(u.input_tokens.value_or(0), u.cached_input_tokens.value_or(0),
                     u.cache_write_tokens.value_or(0), u.output_tokens.value_or(0));
    };
    o.calls_file = run_dir_ / "model-calls.jsonl";
    auto g = gateway::model_gateway::start(std::move(o));
    if (!g) return fail(run_error_kind::host, g.error().message);
    gateway_ = std::move(*g);
    endpoint_ = {gateway_->base_url(), gateway_->placeholder()};
    ctx_.gateway = &endpoint_;
    return true;
  }

  // The gateway stops with the agent: its totals are the run's usage (exact: counted from every
  // response) and say whether a budget was reached.
  void finish_gateway() {
    if (!gateway_) return;
    const gateway::gateway_totals t = gateway_->stop();
    gateway_.reset();
    auto percentile = [](std::vector<double> v, double q) -> json {
      if (v.empty()) return nullptr;
      std::sort(v.begin(), v.end());
      const size_t i =
          std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
      return std::round(v[i] * 1000) / 1000;
    };
    st_.gateway = {{"upstream", cand_.gateway->upstream},
                   {"url", endpoint_.base_url},
                   {"budget", budget_.to_json()},
                   {"calls_file", "model-calls.jsonl"},
                   {"totals", t.to_json()},
                   {"latency",
                    {{"ttfb_ms_p50", percentile(t.ttfb_ms, 0.5)},
                     {"ttfb_ms_p90", percentile(t.ttfb_ms, 0.9)},
                     {"duration_ms_p50", percentile(t.duration_ms, 0.5)},
                     {"duration_ms_p90", percentile(t.duration_ms, 0.9)}}}};
    if (t.exhausted) st_.budget_exhausted = *t.exhausted;
    replay_misses_ = t.replay_misses;
    auto count = [&](const std::optional<uint64_t>& v) -> json {
      if (v) return *v;
      return t.calls == 0 ? json(0) : json(nullptr);
    };
    const bool priced = t.calls_unpriced == 0 && t.calls_without_usage == 0;
    // A replayed call costs nothing now: what the run spent is what went upstream.
    const double spent = std::max(0.0, t.cost_usd - t.replayed_cost_usd);
    st_.usage = {{"input_tokens", count(t.usage.input_tokens)},
                 {"output_tokens", count(t.usage.output_tokens)},
                 {"cached_input_tokens", count(t.usage.cached_input_tokens)},
                 {"reasoning_tokens", count(t.usage.reasoning_tokens)},
                 {"cost_usd", priced ? json(spent) : json(nullptr)},
                 {"cost_source", priced ? json("gateway") : json(nullptr)},
                 {"source", "gateway"}};
  }

  // A gateway run's network: the gateway, reached through the relay at the same loopback
  // address inside, and never the upstream around it.
  void gateway_network() {
    if (!gateway_) return;
    sandbox::network_policy& n = request_.network;
    if (n.mode == sandbox::network_mode::host) return;  // a Harbor task's internet: as asked
    n.mode = sandbox::network_mode::allow;
    if (auto up = sandbox::http::parse_url(cand_.gateway->upstream)) {
      std::erase_if(n.allow, [&](const std::string& entry) {
        const size_t colon = entry.rfind(':');
        std::string host = entry.substr(0, colon);
        if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
        return strcasecmp(host.c_str(), up->host.c_str()) == 0;
      });
    }
    n.allow.push_back(fmt::format("127.0.0.1:{}", gateway_->port()));
  }

  // A host client in the fixture's image: started so that it runs there, or refused now, with
  // the reason, rather than failing mid-run (host_client.h).
  status in_image(agent_plan& p) {
    if (!image_) return {};
    image_view view;
    view.reference = image_->reference;
    for (const auto& kv : image_->env)
      if (kv.starts_with("PATH="))
        for (const auto& d : split_path(kv.substr(5))) view.path_dirs.push_back(d);
    view.has_file = [this](const fs::path& f) { return x_.preparer.image_has_file(image_->id, f); };
    return adapt_to_image(p, view);
  }

  // The request, then the session.
  bool prepare(int number) {
    std::vector<fs::path> roots = x_.options.protected_roots;
    roots.push_back(x_.results.root());
    // The session id names the run directory and cgroups, which are host-wide: two results
    // trees running the same suite at once (or a rerun racing a crashed one) must not share
    // them, so a nonce follows the deterministic run id.
    auto req = make_session_request(
        {fixture_, cand_, plan_, x_.suite.default_limits,
         fmt::format("{}-{}-{:08x}", r_.run_id, number, session_nonce()), std::move(roots),
         fixture_.has_bin ? x_.bin_digests[r_.fixture] : std::string(), image_,
         x_.bundles ? &(*x_.bundles)[r_.fixture] : nullptr,
         x_.caches ? &(*x_.caches)[r_.fixture] : nullptr});
    if (!req) return fail(run_error_kind::adapter, req.error().message);
    request_ = std::move(*req);
    if (x_.caches && !(*x_.caches)[r_.fixture].empty()) {
      st_.caches = json::array();
      for (const auto& c : (*x_.caches)[r_.fixture]) st_.caches.push_back(c.to_json());
    }
    for (auto& s : request_.secrets) s.max_concurrent = x_.suite.max_concurrent(s.handle);
    gateway_network();
    if (!x_.options.workspace_override.empty()) {
      request_.workspace.source = x_.options.workspace_override;
      request_.workspace.image_dir.clear();
      request_.workspace.digest.clear();
    }

    auto t0 = clock_type::now();
    auto prepared = x_.preparer.prepare(request_);
    st_.timings["prepare_ms"] = ms_since(t0);
    if (!prepared) {
      const error_kind kind = prepared.error().kind;
      // Busy with secrets to lease: another evalbox process holds the login (the scheduler
      // waits for it).
      st_.lease_busy = kind == error_kind::busy && !request_.secrets.empty();
      st_.retryable = kind != error_kind::invalid_argument && kind != error_kind::permission;
      return fail(run_error_kind::sandbox, prepared.error().message);
    }
    session_.emplace(std::move(*prepared));
    st_.session_id = request_.run_id;
    if (login_) {
      auto lease = session_->lease_path(login_secret_->handle);
      if (!lease) return fail(run_error_kind::sandbox, "the gateway's login was not leased");
      login_->attach(*lease);
    }
    if (image_)
      st_.environment = {
          {"image", image_->reference},
          {"id", image_->id},
          {"manifest_digest",
           image_->manifest_digest.empty() ? json(nullptr) : json(image_->manifest_digest)},
          {"layers", image_->layers},
          {"workdir", session_->workspace_target().string()},
          {"from_suite", fixture_.environment_from_suite}};
    if (image_ && fixture_.harbor)
      st_.environment["harbor"] = {{"task", fixture_.harbor->name},
                                   {"source", fixture_.environment->image},
                                   {"network", fixture_.harbor->internet ? "host" : "none"}};
    return true;
  }

  // The fixture's setup commands, then the snapshot the agent's changes are measured from.
  // With setup commands the workspace is first snapshot as the fixture gave it (O(1) on an
  // overlay: nothing was written yet), what the kept final state is measured from.
  bool setup() {
    if (fixture_.harbor && !fixture_.harbor->skills_dir.empty() && !plan_.skills_dir.empty() &&
        !copy_task_skills())
      return false;
    if (!fixture_.setup.empty()) {
      if (x_.options.final_state_bytes > 0) {
        auto pristine = session_->snapshot_workspace();
        if (!pristine) return fail(run_error_kind::sandbox, pristine.error().message);
        pristine_ = std::move(*pristine);
      }
      auto t0 = clock_type::now();
      std::string script = "set -e\n";
      for (const auto& cmd : fixture_.setup) script += cmd + "\n";
      auto o = harness_launch("setup", std::move(script), launch_env_);
      o.stdout_path = run_dir_ / "setup.log";
      o.stderr_path = run_dir_ / "setup.log";
      auto rec = launch(o);
      st_.timings["setup_ms"] = ms_since(t0);
      if (!rec) return fail(run_error_kind::sandbox, rec.error().message);
      if (!rec->ok()) return fail(run_error_kind::sandbox, rec->error);
      if (rec->outcome == sandbox::outcome_kind::cancelled) return cancelled();
      if (rec->outcome != sandbox::outcome_kind::exited || rec->exit_code != 0)
        return fail(run_error_kind::setup,
                    fmt::format("setup failed ({} {}); see runs/{}/setup.log",
                                to_string(rec->outcome), rec->exit_code, r_.run_id));
    }
    auto before = session_->snapshot_workspace();
    if (!before) return fail(run_error_kind::sandbox, before.error().message);
    before_ = std::move(*before);
    if (pristine_.view.empty()) {
      pristine_ = before_;
    } else if (auto changed = session_->changed_paths(pristine_)) {
      setup_changed_ = std::move(*changed);  // what the setup changed, kept with the state
    }
    return true;
  }

  // A Harbor task's skills_dir (docs/harbor.md): its skills, in the image, copied into the
  // client's skills directory in the home, in the run's root as the task gave it; names in
  // run.json's environment.harbor.skills, the copy's output in runs/<id>/skills.log.
  bool copy_task_skills() {
    const std::string& from = fixture_.harbor->skills_dir;
    auto o = harness_launch(
        "skills", task_skills_script(from, fs::path(sandbox::sandbox_home) / plan_.skills_dir),
        launch_env_);
    const fs::path log = run_dir_ / "skills.log";
    o.stdout_path = log;
    o.stderr_path = log;
    auto rec = launch(o);
    if (!rec) return fail(run_error_kind::sandbox, rec.error().message);
    if (!rec->ok()) {
      if (rec->error_step.starts_with("execve"))
        return fail(run_error_kind::setup,
                    fmt::format("the task's skills_dir could not be copied: {} (the image "
                                "needs /bin/sh)",
                                rec->error));
      return fail(run_error_kind::sandbox, rec->error);
    }
    if (rec->outcome == sandbox::outcome_kind::cancelled) return cancelled();
    if (rec->outcome != sandbox::outcome_kind::exited || rec->exit_code != 0)
      return fail(
          run_error_kind::setup,
          rec->outcome == sandbox::outcome_kind::exited && rec->exit_code == 66
              ? fmt::format("the task's skills_dir {} is not a directory in its image", from)
              : fmt::format("copying the task's skills_dir {} failed ({} {}); see "
                            "runs/{}/skills.log",
                            from, to_string(rec->outcome), rec->exit_code, r_.run_id));
    json names = json::array();
    const std::string out = read_file(log, 1u << 20).value_or("");
    for (size_t at = 0; at < out.size();) {
      const size_t end = std::min(out.find('\n', at), out.size());
      const std::string_view line = std::string_view(out).substr(at, end - at);
      if (line.starts_with("skill: ")) names.push_back(sanitize_json_text(line.substr(7)));
      at = end + 1;
    }
    st_.environment["harbor"]["skills_dir"] = from;
    st_.environment["harbor"]["skills"] = std::move(names);
    return true;
  }

  // One launch of the agent: stdout and stderr under native/ (the follow-up's prefixed).
  std::optional<sandbox::run_record> launch_agent(const agent_plan& p, const std::string& label) {
    sandbox::launch_options o;
    o.label = label;
    o.argv = p.argv;
    std::map<std::string, std::string> env = request_.env;
    for (const auto& [k, v] : p.env) env[k] = v;
    o.env = env;
    o.stdout_path = native_ / (label == "agent" ? p.stdout_name : label + "." + p.stdout_name);
    o.stderr_path = native_ / (label == "agent" ? "stderr.txt" : label + ".stderr.txt");
    o.stdin_data = p.stdin_data;
    auto rec = gateway_ ? launch_watched(o) : launch(o);
    if (!rec) {
      fail(run_error_kind::sandbox, rec.error().message);
      return std::nullopt;
    }
    if (!rec->ok()) {
      // The agent's program is not in the sandbox (a bare name not on its PATH, an image
      // without it): the candidate's or fixture's mistake, which another attempt would repeat.
      if (rec->error_step.starts_with("execve"))
        fail(run_error_kind::adapter, fmt::format("the agent's program {} could not be started: {}",
                                                  p.argv.front(), rec->error));
      else
        fail(run_error_kind::sandbox, rec->error);
      return std::nullopt;
    }
    outputs_.push_back({o.stdout_path, o.stderr_path, session_->home_dir(), native_, rec->exit_code,
                        rec->outcome == sandbox::outcome_kind::exited});
    return std::move(*rec);
  }

  // The agent's launch while its gateway serves: ended when the budget is spent and the agent
  // keeps asking (model_gateway::should_stop_agent), as well as on evalbox's own cancel.
  result<sandbox::run_record> launch_watched(const sandbox::launch_options& o) {
    sandbox::cancel_token token;
    std::atomic<bool> watching{true};
    std::thread watcher([&] {
      while (watching.load()) {
        if (x_.options.cancel && x_.options.cancel->requested.load()) token.requested = true;
        if (!budget_stopped_ && gateway_->should_stop_agent()) {
          budget_stopped_ = true;
          token.requested = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    auto rec = launch(o, &token);
    watching = false;
    watcher.join();
    return rec;
  }

  // The agent ended by evalbox's cancel: a budget spent is the run's outcome, not a cancel.
  bool agent_cancelled() {
    if (budget_stopped_) return true;
    return cancelled();
  }

  // A person instead of the agent (runner_options::interactive): a shell in the session with
  // the agent's environment, at the caller's terminal.
  bool interactive() {
    auto t0 = clock_type::now();
    sandbox::launch_options o;
    o.label = "shell";
    std::map<std::string, std::string> env = request_.env;
    for (const auto& [k, v] : plan_.env) env[k] = v;
    o.env = env;
    if (x_.options.interactive_grader && fixture_.has_grader)
      o.extra_mounts.push_back({fixture_.grader_dir(), "/grader", false, false});
    if (x_.options.on_state_grader)
      x_.options.on_state_grader(
          [this](const sandbox::layer_stack& stack, const fs::path& commands) {
            return grade_state(stack, commands);
          });
    auto rec = x_.options.interactive(*session_, o);
    if (x_.options.on_state_grader) x_.options.on_state_grader({});
    st_.timings["agent_ms"] = ms_since(t0);
    if (!rec) return fail(run_error_kind::sandbox, rec.error().message);
    st_.records["shell"] = rec->to_json();
    if (!rec->ok()) return fail(run_error_kind::sandbox, rec->error);
    if (rec->outcome == sandbox::outcome_kind::cancelled) return cancelled();
    // No transcript: transcript checks see an empty one.
    if (auto s = write_transcript(transcript_path(), transcript_); !s)
      return fail(run_error_kind::host, s.error().message);
    return true;
  }

  // A session's state graded as this run's end would be (runner_options::on_state_grader), one
  // grading at a time: its workspace seen through a read-only view of `stack`, its checks'
  // sandboxes over the stack, its transcript the session's commands. No workspace.diff: a
  // judge check sees none. What the grading leaves (its uppers, the view) is removed after.
  result<json> grade_state(const sandbox::layer_stack& stack, const fs::path& commands) {
    std::lock_guard lock(grade_state_m_);
    transcript_ = EB_TRY(transcript_of_commands(commands));
    EB_TRY(write_transcript(transcript_path(), transcript_));
    (void)write_file(run_dir_ / "workspace.diff", "");
    const fs::path at = EB_TRY(session_->scratch_dir(fmt::format("view-{}", ++graded_uppers_)));
    auto view = EB_TRY(sandbox::layers_view::make(stack.workspace, at));
    after_.view = view.path();
    graded_stack_ = &stack;
    auto t0 = clock_type::now();
    grade(t0);
    graded_stack_ = nullptr;
    for (const auto& d : graded_dirs_) (void)remove_tree(d);
    graded_dirs_.clear();
    json out = st_.grading;
    out["verdict"] = std::string(to_string(st_.verdict));
    st_.grading = json();
    st_.verdict = run_verdict::not_assessed;
    after_ = {};
    return out;
  }

  // A host-side loop (adapter: loop, agent_plan::drives_session): the run's sandbox becomes its
  // task session — the fixture's workspace, image and network, no credentials — served on a
  // socket in a directory of its own; the loop's program runs in a sandbox of its own on the
  // same prepared session (the candidate's home and credentials and network, an empty
  // workspace, the host's root) with that socket at /evalbox/session.sock. When it exits the
  // task's state is frozen and graded (graded_stack_); its commands are the transcript.
  bool drive_session() {
    auto t0 = clock_type::now();
    // On the run's disk, with the rest of it: reclaimed with the run, also after a crash.
    auto sock_dir = session_->scratch_dir("session");
    if (!sock_dir) return fail(run_error_kind::sandbox, sock_dir.error().message);
    auto layers = session_->scratch_dir("session-layers");
    if (!layers) return fail(run_error_kind::sandbox, layers.error().message);
    sessions::session_setup setup;
    setup.id = "task";
    setup.dir = *sock_dir;
    // The family holds the layers the grading reads after the session is gone: kept here.
    state_family_ = std::make_shared<sessions::family>(*layers, locked_fd());
    setup.fam = state_family_;
    setup.options.label = "task";
    setup.options.env = launch_env_;
    setup.options.with_secrets = false;
    setup.options.network_override = to_policy(fixture_.network);
    sandbox::resource_limits task_limits = request_.limits;
    task_limits.wall_ms += 60000;  // the loop's own wall limit ends it first
    setup.options.limits_override = task_limits;
    setup.source = {{"fixture", fixture_.dir.string()}};
    setup.expires =
        std::chrono::system_clock::now() + std::chrono::milliseconds(task_limits.wall_ms);
    auto task = sessions::session::start(std::move(setup), *session_, nullptr);
    if (!task) return fail(run_error_kind::sandbox, task.error().message);
    sessions::server_options so;
    so.trusted_uids = {session_->sandbox_uid()};
    sessions::server srv(std::move(so));
    if (auto h = srv.host(*task, locked_fd()); !h)
      return fail(run_error_kind::sandbox, h.error().message);
    const fs::path socket = *sock_dir / "socket";
    ::chmod(sock_dir->c_str(), 0711);  // the socket is reached by its bind only
    ::chmod(socket.c_str(), 0666);     // the loop's processes run as the sandbox's id
    std::atomic<bool> stop{false};
    std::thread serving([&] { srv.run(stop); });
    // The loop's own sandbox.
    sandbox::launch_options o;
    o.label = "agent";
    o.argv = plan_.argv;
    std::map<std::string, std::string> env = request_.env;
    for (const auto& [k, v] : plan_.env) env[k] = v;
    env["EVALBOX_SESSION"] = "/evalbox/session.sock";
    o.env = env;
    o.host_root = true;
    o.stdin_data = plan_.stdin_data;
    o.stdout_path = native_ / plan_.stdout_name;
    o.stderr_path = native_ / "stderr.txt";
    o.extra_mounts.push_back({socket, "/evalbox/session.sock", false, true});
    auto empty = session_->scratch_dir("loop-workspace");
    std::optional<result<sandbox::run_record>> rec;
    if (!empty) {
      rec = std::unexpected(std::move(empty.error()));
    } else if (auto dir = sandbox::stack_layers(*session_, {{*empty}, {session_->home_dir()}, {}},
                                                "loop", o);
               !dir) {
      rec = std::unexpected(std::move(dir.error()));
    } else {
      rec = launch(o);
    }
    // The task's state as the loop left it, then the session ends (every process of it killed).
    auto stack = (*task)->fork_point(std::nullopt);
    std::error_code ec;
    fs::copy_file(*sock_dir / "transcript.jsonl", native_ / "session-commands.jsonl", ec);
    stop = true;
    serving.join();
    task->reset();
    st_.timings["agent_ms"] = ms_since(t0);
    if (!*rec) return fail(run_error_kind::sandbox, rec->error().message);
    const sandbox::run_record& r = **rec;
    if (!r.ok()) {
      if (r.error_step.starts_with("execve"))
        return fail(run_error_kind::adapter,
                    fmt::format("the loop's program {} could not be started: {}",
                                plan_.argv.front(), r.error));
      return fail(run_error_kind::sandbox, r.error);
    }
    if (r.outcome == sandbox::outcome_kind::cancelled) return cancelled();
    agent_outcome_ = r.outcome;
    agent_signal_ = r.signal;
    if (!stack) return fail(run_error_kind::sandbox, stack.error().message);
    state_stack_ = std::move(*stack);
    graded_stack_ = &state_stack_;
    auto tr = transcript_of_commands(native_ / "session-commands.jsonl");
    if (!tr) return fail(run_error_kind::host, tr.error().message);
    transcript_ = std::move(*tr);
    transcript_.agent = "loop";
    // The loop's answer, as a final message: its last line of output.
    if (auto out = read_file(native_ / plan_.stdout_name, 1u << 20)) {
      std::string text = std::move(*out);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      if (const size_t nl = text.rfind('\n'); nl != std::string::npos) text.erase(0, nl + 1);
      if (!text.empty()) transcript_.final_message = text.substr(0, 2000);
    }
    if (auto w = write_transcript(transcript_path(), transcript_); !w)
      return fail(run_error_kind::host, w.error().message);
    const json trajectory = to_atif(
        transcript_, {r_.run_id, cand_.adapter, plan_.client_version, cand_.id, fixture_.prompt});
    if (auto w = write_file(run_dir_ / "trajectory.json", pretty_json(trajectory)); !w)
      return fail(run_error_kind::host, w.error().message);
    if (agent_outcome_ == sandbox::outcome_kind::signaled)
      return fail(run_error_kind::agent,
                  fmt::format("the loop was killed by signal {}", agent_signal_));
    return true;
  }

  // The relative paths the layers of a session's state hold above the run's own workspace (the
  // stack's last): what a loop changed.
  std::set<std::string> state_layer_paths() const {
    std::set<std::string> out;
    for (size_t i = 0; i + 1 < graded_stack_->workspace.size(); ++i) {
      const fs::path& layer = graded_stack_->workspace[i];
      std::error_code ec;
      for (auto it = fs::recursive_directory_iterator(layer, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        out.insert(it->path().lexically_relative(layer).string());
    }
    return out;
  }

  // workspace.diff of a session's state (drive_session): the paths its frozen workspace layers
  // hold, compared with the snapshot before the agent in a sandbox over that state.
  bool diff_state() {
    auto at = session_->scratch_dir("state-view");
    if (!at) return fail(run_error_kind::sandbox, at.error().message);
    auto view = sandbox::layers_view::make(graded_stack_->workspace, *at);
    if (!view) return fail(run_error_kind::sandbox, view.error().message);
    state_view_.emplace(std::move(*view));
    after_.view = state_view_->path();
    const std::set<std::string> changed = state_layer_paths();
    if (changed.empty()) {
      (void)write_file(run_dir_ / "workspace.diff", "");
      return true;
    }
    auto o = harness_launch(
        "diff", diff_script({changed.begin(), changed.end()}, session_->workspace_target()),
        base_environment());
    o.host_root = true;
    o.extra_mounts.push_back({before_.view, "/evalbox/before", false, false});
    o.stdout_path = run_dir_ / "workspace.diff";
    o.stderr_path = run_dir_ / "diff.log";
    if (auto s = over_state(o); !s) return fail(run_error_kind::sandbox, s.error().message);
    if (auto rec = sandbox::launch_in(*session_, o, x_.options.cancel); !rec || !rec->ok())
      log::warn("run {}: workspace diff failed: {}", r_.run_id,
                rec ? rec->error : rec.error().message);
    return true;
  }

  // The agent, and its follow-up when the fixture has one and the agent exited.
  bool agent() {
    if (x_.options.interactive) return interactive();
    if (plan_.drives_session) return drive_session();
    auto t0 = clock_type::now();
    auto rec = launch_agent(plan_, "agent");
    if (!rec) return false;
    if (rec->outcome == sandbox::outcome_kind::cancelled && !agent_cancelled()) return false;
    agent_outcome_ = rec->outcome;
    agent_signal_ = rec->signal;
    if (fixture_.follow_up && rec->outcome == sandbox::outcome_kind::exited &&
        !(gateway_ && gateway_->totals().exhausted)) {
      auto follow_up = adapter_->plan_follow_up(ctx_, outputs_.back());
      if (!follow_up) return fail(run_error_kind::adapter, follow_up.error().message);
      if (*follow_up) {
        if (auto a = in_image(**follow_up); !a)
          return fail(run_error_kind::adapter, a.error().message);
        auto rec2 = launch_agent(**follow_up, "follow-up");
        if (!rec2) return false;
        if (rec2->outcome == sandbox::outcome_kind::cancelled && !agent_cancelled()) return false;
      }
    }
    st_.timings["agent_ms"] = ms_since(t0);
    return true;
  }

  // transcript.jsonl and usage; then the agent's own failures, which end the run as errors.
  bool record_transcript() {
    if (x_.options.interactive) return true;  // written by interactive()
    if (plan_.drives_session) return true;    // written by drive_session()
    result<transcript> tr;
    try {  // an adapter reads what the agent wrote: whatever it throws ends this run only
      tr = adapter_->read_transcript(ctx_, outputs_);
    } catch (const std::exception& e) {
      return fail(run_error_kind::adapter, fmt::format("reading the transcript: {}", e.what()));
    }
    if (!tr) return fail(run_error_kind::adapter, tr.error().message);
    transcript_ = std::move(*tr);
    if (auto s = write_transcript(transcript_path(), transcript_); !s)
      return fail(run_error_kind::host, s.error().message);
    // The same run as an ATIF trajectory, for tools made for Harbor's (atif.h).
    const json trajectory = to_atif(
        transcript_, {r_.run_id, cand_.adapter, plan_.client_version, cand_.id, fixture_.prompt});
    if (auto s = write_file(run_dir_ / "trajectory.json", pretty_json(trajectory)); !s)
      return fail(run_error_kind::host, s.error().message);
    if (!transcript_.total.unknown() && cand_.gateway == std::nullopt)
      st_.usage = usage_json(transcript_.total, cand_, transcript_.model, x_.suite);
    // A spent budget ends the agent as the gateway's refusal made it end: graded as it left the
    // workspace, a task failure (its outcome says why), never an execution error.
    if (replay_misses_ > 0)
      return fail(run_error_kind::agent,
                  fmt::format("replay: {} model request(s) had no answer in the model cache {} "
                              "(the agent asked what the recorded run did not; see "
                              "runs/{}/model-calls.jsonl, refused: replay_miss)",
                              replay_misses_, x_.options.model_cache_dir.string(), r_.run_id));
    if (st_.budget_exhausted) return true;
    if (agent_outcome_ == sandbox::outcome_kind::signaled)
      return fail(run_error_kind::agent,
                  fmt::format("the agent was killed by signal {}", agent_signal_));
    if (transcript_.error) return fail(run_error_kind::agent, *transcript_.error);
    return true;
  }

  // workspace.diff: a failed diff is logged, not the run's failure.
  bool diff() {
    if (graded_stack_) return diff_state();
    auto after = session_->snapshot_workspace();
    if (!after) return fail(run_error_kind::sandbox, after.error().message);
    after_ = std::move(*after);
    auto changed = session_->changed_paths(before_);
    if (!changed || changed->empty()) {
      (void)write_file(run_dir_ / "workspace.diff", "");
      return true;
    }
    // evalbox's own tool: on the host's allow-listed root even for an image run (the image may
    // have no diff, or another one).
    auto o = harness_launch("diff", diff_script(*changed, session_->workspace_target()),
                            base_environment());
    o.host_root = true;
    o.extra_mounts.push_back({before_.view, "/evalbox/before", false, false});
    o.stdout_path = run_dir_ / "workspace.diff";
    o.stderr_path = run_dir_ / "diff.log";
    if (auto rec = sandbox::launch_in(*session_, o, x_.options.cancel); !rec || !rec->ok())
      log::warn("run {}: workspace diff failed: {}", r_.run_id,
                rec ? rec->error : rec.error().message);
    return true;
  }

  // A grading launch of a session's state (grade_state) stacks that state's layers under uppers
  // of its own; any other launch is left as it is.
  // `top`: a workspace layer over the state's (what an earlier launch of the same check wrote).
  status over_state(sandbox::launch_options& o, const fs::path& top = {}) {
    if (!graded_stack_) return {};
    sandbox::layer_stack stack = *graded_stack_;
    if (!top.empty()) stack.workspace.insert(stack.workspace.begin(), top);
    const fs::path dir = EB_TRY(
        sandbox::stack_layers(*session_, stack, fmt::format("graded-{}", ++graded_uppers_), o));
    graded_dirs_.push_back(dir);
    return {};
  }

  // One shell check in a fresh sandbox: /grader and the transcript mounted read-only.
  result<shell_check_outcome> run_shell_check(const check_spec& c) {
    // In the run's own root (the image's, as the agent left it) and workspace.
    auto o = harness_launch(fmt::format("grade-{}", check_index_++), c.shell, launch_env_);
    EB_TRY(over_state(o));
    if (fixture_.has_grader)
      o.extra_mounts.push_back({fixture_.grader_dir(), "/grader", false, false});
    o.extra_mounts.push_back({transcript_path(), "/evalbox/transcript.jsonl", false, true});
    fs::path log_path = out_dir_ / "checks" / (c.id + ".log");
    EB_TRY(make_dirs(log_path.parent_path()));
    o.stdout_path = log_path;
    o.stderr_path = log_path;
    auto rec = EB_TRY(sandbox::launch_in(*session_, o, x_.options.cancel));
    if (!rec.ok()) return make_error(error_kind::io, "grading sandbox: {}", rec.error);
    if (rec.outcome == sandbox::outcome_kind::cancelled)
      return make_error(error_kind::cancelled, "cancelled");
    std::string out = read_file(log_path).value_or("");
    if (out.size() > 400) out = out.substr(out.size() - 400);
    return shell_check_outcome{rec.outcome == sandbox::outcome_kind::exited, rec.exit_code,
                               std::string(to_string(rec.outcome)), out};
  }

  // A Harbor task's verifier (docs/harbor.md): `bash /tests/test.sh` in the run's own root as
  // the agent left it, from the workspace (the image's working directory), with tests/ at
  // /tests and an empty /logs/verifier — both mounted only now, over whatever the agent put
  // there, so nothing it planted counts — the task's [verifier] env, its timeout as the wall
  // limit, and the task's network. Its output and the files it leaves are kept (bounded) under
  // runs/<id>/verifier/.
  result<verifier_outcome> run_verifier(const check_spec&) {
    const harbor_spec& h = *fixture_.harbor;
    const fs::path keep = out_dir_ / "verifier";
    EB_TRY(make_dirs(keep));
    const fs::path logs = EB_TRY_CTX(session_->scratch_dir("verifier-logs"), "/logs/verifier");
    auto env = launch_env_;
    for (const auto& [k, v] : h.verifier_env) env[k] = v;
    auto o = harness_launch("verifier", "", std::move(env));
    o.argv = {"bash", "/tests/test.sh"};
    o.extra_mounts.push_back({h.tests_dir, "/tests", false, false});
    o.extra_mounts.push_back({logs, "/logs/verifier", true, false});
    o.network_override = to_policy(fixture_.network);
    sandbox::resource_limits limits = request_.limits;
    if (h.verifier_wall_ms) limits.wall_ms = *h.verifier_wall_ms;
    o.limits_override = limits;
    o.stdout_path = keep / "stdout.txt";
    o.stderr_path = keep / "stderr.txt";
    EB_TRY(over_state(o));
    auto rec = EB_TRY(sandbox::launch_in(*session_, o, x_.options.cancel));
    st_.records[o.label] = rec.to_json();
    const std::vector<std::string> skipped = keep_verifier_files(logs, keep / "logs");
    if (!skipped.empty())
      (void)write_file(keep / "skipped.txt", fmt::format("{}\n", fmt::join(skipped, "\n")));
    if (!rec.ok()) {
      if (rec.error_step.starts_with("execve"))
        return make_error(error_kind::invalid_argument,
                          "the verifier could not start: {} (the task's image needs bash)",
                          rec.error);
      return make_error(error_kind::io, "verifier sandbox: {}", rec.error);
    }
    if (rec.outcome == sandbox::outcome_kind::cancelled)
      return make_error(error_kind::cancelled, "cancelled");
    if (rec.outcome == sandbox::outcome_kind::timed_out)
      return make_error(error_kind::expired,
                        "the verifier timed out after {} (verifier.timeout_sec); see "
                        "runs/{}/verifier/",
                        format_duration_ms(limits.wall_ms), r_.run_id);
    auto read = [&](const char* name) -> result<std::optional<std::string>> {
      auto e = lookup_beneath(logs, name, false, false);
      if (!e) return std::unexpected(std::move(e).error());
      if (e->type == beneath_entry::type_kind::missing) return std::optional<std::string>{};
      if (e->type != beneath_entry::type_kind::regular || e->size > max_reward_bytes)
        return make_error(error_kind::invalid_argument,
                          "/logs/verifier/{} is not a regular file of at most {}", name,
                          format_bytes(max_reward_bytes));
      e = lookup_beneath(logs, name, false, true, max_reward_bytes);
      if (!e) return std::unexpected(std::move(e).error());
      return std::optional<std::string>(std::move(e->content));
    };
    auto txt = EB_TRY(read("reward.txt"));
    auto js = EB_TRY(read("reward.json"));
    auto out = read_reward(txt, js);
    if (!out)
      return make_error(out.error().kind, "{} (the verifier {} {}; see runs/{}/verifier/)",
                        out.error().message, to_string(rec.outcome), rec.exit_code, r_.run_id);
    return out;
  }

  // A tests check: the patch applied to the final workspace (evalbox's own step, on the host's
  // root so that it needs no git in the image), then the command in the run's root, then its
  // report read back, bounded (docs/swebench.md).
  result<tests_check_outcome> run_tests_check(const check_spec& c) {
    tests_check_outcome out;
    const int n = check_index_++;
    fs::path patched;  // over a graded state: the upper the patch step wrote
    const fs::path logs = out_dir_ / "checks";
    EB_TRY(make_dirs(logs));
    auto finish = [&](const sandbox::run_record& rec) -> status {
      if (!rec.ok()) return make_error(error_kind::io, "grading sandbox: {}", rec.error);
      if (rec.outcome == sandbox::outcome_kind::cancelled)
        return make_error(error_kind::cancelled, "cancelled");
      return {};
    };
    if (!c.tests.patch.empty()) {
      const fs::path patch = fixture_.grader_dir() / c.tests.patch;
      auto text = EB_TRY(read_file(patch, 256u << 20));
      auto o =
          harness_launch(fmt::format("grade-{}-patch", n),
                         test_patch_script(text, "/grader/" + c.tests.patch), base_environment());
      o.host_root = true;
      o.extra_mounts.push_back({fixture_.grader_dir(), "/grader", false, false});
      const fs::path log = logs / (c.id + ".patch.log");
      o.stdout_path = log;
      o.stderr_path = log;
      EB_TRY(over_state(o));
      if (graded_stack_) patched = graded_dirs_.back() / "workspace" / "upper";
      auto rec = EB_TRY(sandbox::launch_in(*session_, o, x_.options.cancel));
      EB_TRY(finish(rec));
      if (rec.outcome != sandbox::outcome_kind::exited || rec.exit_code != 0) {
        out.patch_applied = false;
        out.patch_output = read_file(log, 1u << 20).value_or("");
        if (out.patch_output.size() > 600)
          out.patch_output = out.patch_output.substr(out.patch_output.size() - 600);
        return out;
      }
    }
    auto o = harness_launch(fmt::format("grade-{}", n), c.tests.command, launch_env_);
    if (fixture_.has_grader)
      o.extra_mounts.push_back({fixture_.grader_dir(), "/grader", false, false});
    o.extra_mounts.push_back({transcript_path(), "/evalbox/transcript.jsonl", false, true});
    const fs::path log = logs / (c.id + ".log");
    o.stdout_path = log;
    o.stderr_path = log;
    // Over a graded state the patch went into its own launch's upper: the tests see it there.
    EB_TRY(over_state(o, patched));
    auto rec = EB_TRY(sandbox::launch_in(*session_, o, x_.options.cancel));
    EB_TRY(finish(rec));
    out.exited = rec.outcome == sandbox::outcome_kind::exited;
    out.exit_code = rec.exit_code;
    out.outcome = std::string(to_string(rec.outcome));
    if (c.tests.report == tests_check::report_kind::pytest) {
      auto text = read_file(log, max_test_report_bytes);
      if (text)
        out.report = std::move(*text);
      else
        out.report_error = fmt::format(
            "the test output is larger than {} bytes, which evalbox "
            "reads at most of a report",
            max_test_report_bytes);
    } else {
      // The command (code the agent wrote) made this file: looked up beneath the workspace,
      // never following a link out of it, and read bounded. Over a graded stack the command
      // wrote into its launch's own upper.
      const fs::path where =
          graded_stack_ ? graded_dirs_.back() / "workspace" / "upper" : session_->workspace_dir();
      auto e = lookup_beneath(where, c.tests.junit_path, true, true, max_test_report_bytes);
      if (e && e->type == beneath_entry::type_kind::missing && graded_stack_)
        e = lookup_beneath(after_.view, c.tests.junit_path, true, true, max_test_report_bytes);
      if (!e)
        out.report_error = fmt::format("{}: {}", c.tests.junit_path, e.error().message);
      else if (e->type != beneath_entry::type_kind::regular)
        out.report_error =
            fmt::format("the test command wrote no report at {}", c.tests.junit_path);
      else
        out.report = std::move(e->content);
    }
    return out;
  }

  // The script that applies a tests check's patch in the workspace: the files it touches are
  // first put back as they were at the fixture's commit (an agent's edit of a test file must
  // not keep the real tests from applying, as in SWE-bench's harness), then `git apply`, and
  // if that refuses, `patch` with some fuzz, as SWE-bench falls back to it.
  std::string test_patch_script(const std::string& patch_text, const std::string& patch_path) {
    std::string script = "p_file=" + shell_quote(patch_path) + "\n";
    if (!fixture_.git_commit.empty()) {
      for (const auto& f : patch_files(patch_text)) {
        script += shell_assign(f) + "\n";
        script += "git checkout -q " + fixture_.git_commit +
                  " -- \"$p\" 2>/dev/null || rm -f -- \"$p\"\n";
      }
    }
    script +=
        "git apply --verbose --whitespace=nowarn \"$p_file\" && exit 0\n"
        "echo 'evalbox: git apply refused the patch; trying patch --fuzz=5' >&2\n"
        "patch --batch --fuzz=5 -p1 -i \"$p_file\"\n";
    return script;
  }

  void grade(clock_type::time_point t0) {
    grading_inputs in{fixture_,
                      transcript_,
                      before_.view,
                      after_.view,
                      [this](const check_spec& c) { return run_shell_check(c); },
                      [this](const check_spec& c) { return run_verifier(c); },
                      [this](const check_spec& c) { return run_tests_check(c); }};
    in.judges = &x_.suite.judges;
    in.prices = &x_.suite.prices;
    in.ask_judge = ask_judge_from_host;
    in.fault = x_.options.grading_fault;
    for (const auto& c : fixture_.checks)
      if (c.kind == check_kind::judge) {
        // The diff the judge may be shown: its head, as written above (bounded again per
        // evidence, which says how much there was).
        in.diff = diff_head(run_dir_ / "workspace.diff", max_judge_diff_bytes);
        break;
      }
    grading_result g = harness::grade(in);
    st_.timings["grading_ms"] = ms_since(t0);
    st_.judge_usage = g.judge_usage_json();
    if (x_.options.cancel && x_.options.cancel->requested.load()) {
      cancelled();
      return;
    }
    st_.grading = g.to_json(fixture_.threshold);
    st_.verdict = !g.ok      ? run_verdict::not_assessed
                  : g.passed ? run_verdict::passed
                             : run_verdict::failed;
  }

  // --keep-workspaces: the final workspace copied out of the session before teardown — the
  // state that was graded (the snapshot after the agent) when there is one, else the
  // workspace as the run left it. Never the run's failure: run.json says what happened.
  void keep_workspace() {
    if (!session_ || !should_keep(x_.options.keep_workspaces, st_)) return;
    const fs::path from = after_.view.empty() ? session_->workspace_dir() : after_.view;
    const fs::path to = run_dir_ / kept_workspace_dir;
    const uint64_t bound = x_.options.keep_workspace_bytes;
    json k = {{"path", nullptr}, {"bound_bytes", bound}};
    auto kept = keep_tree(from, to, bound);
    if (!kept) {
      k["skipped"] = kept.error().message;
    } else {
      k["bytes"] = kept->bytes;
      k["entries"] = kept->entries;
      if (kept->kept)
        k["path"] = fmt::format("runs/{}/{}", r_.run_id, kept_workspace_dir);
      else
        k["skipped"] = kept->skipped;
    }
    k["target"] = session_->workspace_target().string();
    k["fixture_dir"] = fixture_.dir.string();  // where `evalbox runs shell` finds the grader
    st_.kept_workspace = std::move(k);
  }

  // The final state as graded, kept for `evalbox regrade` (final_state.h): the workspace's
  // differences from the fixture's, and with an image the root's writable layers. Taken before
  // the checks run (they may write). Never the run's failure: run.json says what was kept.
  void keep_state() {
    if (x_.options.final_state_bytes == 0 || after_.view.empty() || pristine_.view.empty()) return;
    const auto t0 = clock_type::now();
    keep_state_now();
    st_.timings["final_state_ms"] = ms_since(t0);
  }

  void keep_state_now() {
    std::vector<state_source> sources;
    state_source ws{
        "workspace", session_->workspace_target().string(), after_.view, pristine_.view, {}};
    auto changed = session_->changed_paths(pristine_);
    if (!changed) {
      st_.final_state = {{"path", nullptr}, {"reason", changed.error().message}};
      return;
    }
    ws.candidates = std::move(*changed);
    if (graded_stack_) {
      // A loop's task session: what its frozen layers hold, and what the fixture had below
      // each directory there (an opaque one hides it: deletions to keep).
      for (const auto& rel : state_layer_paths()) {
        ws.candidates.push_back(rel);
        for (auto& hidden : list_beneath(pristine_.view, rel).value_or(std::vector<std::string>{}))
          if (hidden != rel) ws.candidates.push_back(std::move(hidden));
      }
    }
    sources.push_back(std::move(ws));
    if (pristine_.index != before_.index)  // the workspace after setup, for git checks
      sources.push_back({"setup", session_->workspace_target().string(), before_.view,
                         pristine_.view, setup_changed_});
    if (const auto* image = session_->image()) {
      if (graded_stack_)
        for (const auto& layer : graded_stack_->root)
          sources.push_back({"root", "/", layer, {}, {}});
      sources.push_back({"root", "/", image->upper, {}, {}});
    }
    auto kept =
        keep_final_state(x_.results.root(), r_.run_id, sources, x_.options.final_state_bytes);
    if (!kept)
      st_.final_state = {{"path", nullptr}, {"reason", kept.error().message}};
    else
      st_.final_state = std::move(*kept);
  }

  fs::path transcript_path() const { return run_dir_ / transcript_file_name; }

  const execution_context& x_;
  const run_spec& r_;
  const fixture_spec& fixture_;
  const candidate_spec& cand_;
  const fs::path run_dir_;
  const fs::path native_;
  run_context ctx_;
  std::optional<sandbox::prepared_session>& session_;
  const sandbox::image_summary* image_;
  const std::map<std::string, std::string> launch_env_;

  attempt_state st_;
  // The model gateway while the agent runs (a gateway candidate), what the adapter is told of
  // it, the run's budget, and whether that budget ended the agent.
  std::unique_ptr<gateway::model_gateway> gateway_;
  gateway_endpoint endpoint_;
  std::shared_ptr<gateway::upstream_login> login_;  // a subscription login the gateway serves
  std::optional<sandbox::secret_mount> login_secret_;
  budget_spec budget_;
  std::atomic<bool> budget_stopped_{false};
  uint64_t replay_misses_ = 0;
  const adapter* adapter_ = nullptr;
  agent_plan plan_;
  sandbox::session_request request_;
  sandbox::workspace_snapshot pristine_, before_, after_;
  std::vector<std::string> setup_changed_;  // between pristine_ and before_
  std::vector<agent_output> outputs_;
  sandbox::outcome_kind agent_outcome_ = sandbox::outcome_kind::exited;
  int agent_signal_ = 0;
  transcript transcript_;
  int check_index_ = 0;
  // grade_state: the stack graded now, and the uppers made for its launches.
  std::mutex grade_state_m_;
  const sandbox::layer_stack* graded_stack_ = nullptr;
  int graded_uppers_ = 0;
  std::vector<fs::path> graded_dirs_;
  // drive_session: the task's state as the loop left it, and its view on the host.
  std::shared_ptr<sessions::family> state_family_;  // declared first: its layers go last
  sandbox::layer_stack state_stack_;
  std::optional<sandbox::layers_view> state_view_;
  // regrade: where the grading's files go (the run directory, or a regrade's own), and the
  // views of the rebuilt state.
  fs::path out_dir_ = run_dir_;
  std::vector<sandbox::layers_view> regrade_views_;
};

}  // namespace

attempt_state regrade_attempt(const execution_context& x, const run_spec& r,
                              std::optional<sandbox::prepared_session>& session) {
  try {
    return attempt(x, r, session).regrade();
  } catch (const std::exception& e) {
    attempt_state st;
    st.fail(run_error_kind::host, fmt::format("internal error: {}", e.what()));
    st.retryable = false;
    return st;
  }
}

attempt_state execute_attempt(const execution_context& x, const run_spec& r, int number,
                              std::optional<sandbox::prepared_session>& session) {
  // An exception from any phase (grading has its own, per check) ends this attempt as an
  // error, recorded like any other, and the runner goes on with the next run.
  try {
    return attempt(x, r, session).run(number);
  } catch (const std::exception& e) {
    attempt_state st;
    st.fail(run_error_kind::host, fmt::format("internal error: {}", e.what()));
    st.retryable = false;
    return st;
  }
}

}  // namespace runner
}  // namespace evalbox::harness
