// JSON form of the run record (schema evalbox.run-record.v1, docs/run-record.md).
#include "sandbox/launch/run_record.h"
#include "sandbox/base/json_checks.h"

namespace evalbox::sandbox {

std::string_view to_string(outcome_kind kind) noexcept {
  switch (kind) {
    case outcome_kind::exited:
      return "exited";
    case outcome_kind::signaled:
      return "signaled";
    case outcome_kind::timed_out:
      return "timed_out";
    case outcome_kind::cpu_limit:
      return "cpu_limit";
    case outcome_kind::oom_killed:
      return "oom_killed";
    case outcome_kind::output_limit:
      return "output_limit";
    case outcome_kind::cancelled:
      return "cancelled";
  }
  return "exited";
}

namespace {
std::optional<outcome_kind> outcome_from(std::string_view s) {
  for (auto k : {outcome_kind::exited, outcome_kind::signaled, outcome_kind::timed_out,
                 outcome_kind::cpu_limit, outcome_kind::oom_killed, outcome_kind::output_limit,
                 outcome_kind::cancelled}) {
    if (to_string(k) == s) return k;
  }
  return std::nullopt;
}
}  // namespace

json run_record::to_json() const {
  json conns = json::array();
  for (const auto& c : connections) {
    conns.push_back(
        {{"target", c.target}, {"allowed", c.allowed}, {"via", c.via}, {"detail", c.detail}});
  }
  json j{
      {"schema", "evalbox.run-record.v1"},
      {"outcome", ok() ? json(to_string(outcome)) : json(nullptr)},
      {"exit_code", ok() && outcome == outcome_kind::exited ? json(exit_code) : json(nullptr)},
      {"signal", ok() && outcome == outcome_kind::signaled ? json(signal) : json(nullptr)},
      {"wall_ms", wall_ms},
      {"cpu_ms", cpu_ms},
      {"peak_memory_bytes", peak_memory_bytes},
      {"output_bytes", output_bytes},
      {"output_truncated", output_truncated},
      {"pids_limit_hit", pids_limit_hit},
      {"mechanisms", mechanisms},
      {"binding_digest", binding_digest},
      {"connections", conns},
      {"error", error.empty() ? json(nullptr) : json(error)},
      {"error_step", error_step.empty() ? json(nullptr) : json(error_step)},
  };
  return j;
}

std::optional<run_record> run_record::from_json(const json& j) {
  try {
    if (!j.is_object() || j.value("schema", "") != "evalbox.run-record.v1") return std::nullopt;
    run_record r;
    if (!j.at("error").is_null()) r.error = j.at("error").get<std::string>();
    if (!j.at("error_step").is_null()) r.error_step = j.at("error_step").get<std::string>();
    if (!j.at("outcome").is_null()) {
      auto k = outcome_from(j.at("outcome").get<std::string>());
      if (!k) return std::nullopt;
      r.outcome = *k;
    } else if (r.error.empty()) {
      return std::nullopt;  // neither an outcome nor an error
    }
    if (!j.at("exit_code").is_null()) r.exit_code = checked_integer<int>(j.at("exit_code"));
    if (!j.at("signal").is_null()) r.signal = checked_integer<int>(j.at("signal"));
    r.wall_ms = checked_integer<uint64_t>(j.at("wall_ms"));
    r.cpu_ms = checked_integer<uint64_t>(j.at("cpu_ms"));
    r.peak_memory_bytes = checked_integer<uint64_t>(j.at("peak_memory_bytes"));
    r.output_bytes = checked_integer<uint64_t>(j.at("output_bytes"));
    r.output_truncated = j.at("output_truncated").get<bool>();
    r.pids_limit_hit = j.at("pids_limit_hit").get<bool>();
    r.mechanisms = j.at("mechanisms");
    r.binding_digest = j.at("binding_digest").get<std::string>();
    for (const auto& c : j.at("connections")) {
      r.connections.push_back({c.at("target").get<std::string>(), c.at("allowed").get<bool>(),
                               c.at("via").get<std::string>(), c.at("detail").get<std::string>()});
    }
    return r;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace evalbox::sandbox
