// JSON form of the run record (schema evalbox.run-record.v1, docs/run-record.md).
#include "sandbox/protocol/run_record.h"

#include <type_traits>

#include "base/json_get.h"

namespace evalbox::sandbox {
inline namespace protocol {

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

// Field `key` of `j` as a T; `nullable` fields may be null (then nothing). Integers are
// range-checked: a hostile record's 1e300 or -5 is refused, not misread.
template <class T>
result<std::optional<T>> field(const json& j, const char* key, bool nullable = false) {
  if (nullable) return EB_TRY_CTX(json_get_optional<T>(j, key), "run record");
  return std::optional<T>(EB_TRY_CTX(json_get<T>(j, key), "run record"));
}

template <class T>
result<T> required(const json& j, const char* key) {
  return EB_TRY_CTX(json_get<T>(j, key), "run record");
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
      {"oom_kills", oom_kills},
      {"disk_limit_hit", disk_limit_hit},
      {"mechanisms", mechanisms},
      {"binding_digest", binding_digest},
      {"connections", conns},
      {"error", error.empty() ? json(nullptr) : json(error)},
      {"error_step", error_step.empty() ? json(nullptr) : json(error_step)},
  };
  return j;
}

result<run_record> run_record::from_json(const json& j) {
  if (!j.is_object())
    return make_error(error_kind::invalid_argument, "run record: not a JSON object");
  const auto schema = EB_TRY(field<std::string>(j, "schema"));
  if (*schema != "evalbox.run-record.v1")
    return make_error(error_kind::invalid_argument,
                      "run record: schema is '{}', not evalbox.run-record.v1", *schema);
  run_record r;
  r.error = EB_TRY(field<std::string>(j, "error", true)).value_or("");
  r.error_step = EB_TRY(field<std::string>(j, "error_step", true)).value_or("");
  if (const auto outcome = EB_TRY(field<std::string>(j, "outcome", true))) {
    const auto k = outcome_from(*outcome);
    if (!k)
      return make_error(error_kind::invalid_argument, "run record: unknown outcome '{}'", *outcome);
    r.outcome = *k;
  } else if (r.error.empty()) {
    return make_error(error_kind::invalid_argument,
                      "run record: neither an outcome nor an error (both are null)");
  }
  r.exit_code = EB_TRY(field<int>(j, "exit_code", true)).value_or(0);
  r.signal = EB_TRY(field<int>(j, "signal", true)).value_or(0);
  r.wall_ms = EB_TRY(required<uint64_t>(j, "wall_ms"));
  r.cpu_ms = EB_TRY(required<uint64_t>(j, "cpu_ms"));
  r.peak_memory_bytes = EB_TRY(required<uint64_t>(j, "peak_memory_bytes"));
  r.output_bytes = EB_TRY(required<uint64_t>(j, "output_bytes"));
  r.output_truncated = EB_TRY(required<bool>(j, "output_truncated"));
  r.pids_limit_hit = EB_TRY(required<bool>(j, "pids_limit_hit"));
  // Added to v1 later: a record written before them reads as none.
  if (j.contains("oom_kills")) r.oom_kills = EB_TRY(required<uint64_t>(j, "oom_kills"));
  if (j.contains("disk_limit_hit")) r.disk_limit_hit = EB_TRY(required<bool>(j, "disk_limit_hit"));
  r.mechanisms = EB_TRY(required<json>(j, "mechanisms"));
  r.binding_digest = EB_TRY(required<std::string>(j, "binding_digest"));
  const json connections = EB_TRY(required<json>(j, "connections"));
  if (!connections.is_array())
    return make_error(error_kind::invalid_argument, "run record: connections is not an array");
  for (const auto& c : connections) {
    if (!c.is_object())
      return make_error(error_kind::invalid_argument,
                        "run record: a connection is not an object: {}", c.dump());
    r.connections.push_back(
        {EB_TRY(required<std::string>(c, "target")), EB_TRY(required<bool>(c, "allowed")),
         EB_TRY(required<std::string>(c, "via")), EB_TRY(required<std::string>(c, "detail"))});
  }
  return r;
}

}  // namespace protocol
}  // namespace evalbox::sandbox
