// model_cache (see model_cache.h).
#include "harness/gateway/model_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"

namespace evalbox::harness::gateway {

namespace fs = std::filesystem;

namespace {

// Top-level request fields that clients fill with per-session ids.
constexpr std::string_view volatile_fields[] = {"metadata", "user", "prompt_cache_key",
                                                "safety_identifier", "client_metadata"};

// The longest response body a cache entry holds (as the gateway's own cap).
constexpr size_t max_entry_body = 256u << 20;

void replace_all(std::string& s, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size()))
    s.replace(at, what.size(), with);
}

// Every UUID (8-4-4-4-12 hex digits) in `s` as "<uuid>": clients mint them per session, per
// turn and per message (Codex's message ids, Claude Code's session id in what a command printed).
std::string without_uuids(std::string_view s) {
  auto uuid_at = [&](size_t i) {
    if (i + 36 > s.size()) return false;
    for (size_t k = 0; k < 36; ++k) {
      const char c = s[i + k];
      if (k == 8 || k == 13 || k == 18 || k == 23) {
        if (c != '-') return false;
      } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
        return false;
      }
    }
    // Not the middle of a longer run of hex digits.
    const bool before = i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1]));
    const bool after = i + 36 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 36]));
    return !before && !after;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (std::isxdigit(static_cast<unsigned char>(s[i])) && uuid_at(i)) {
      out += "<uuid>";
      i += 36;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::string without_query_key(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view rest = target.substr(q + 1);
  bool first = true;
  while (true) {
    const size_t amp = rest.find('&');
    const std::string_view param = rest.substr(0, amp);
    if (!param.starts_with("key=")) {
      if (!first) out += '&';
      out += param;
      first = false;
    }
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return out;
}

}  // namespace

std::string_view to_string(cache_mode m) noexcept {
  switch (m) {
    case cache_mode::record:
      return "record";
    case cache_mode::replay:
      return "replay";
    case cache_mode::replay_or_record:
      return "replay-or-record";
  }
  return "record";
}

std::optional<cache_mode> parse_cache_mode(std::string_view text) {
  for (auto m : {cache_mode::record, cache_mode::replay, cache_mode::replay_or_record})
    if (text == to_string(m)) return m;
  return std::nullopt;
}

std::string request_key(std::string_view method, std::string_view target, std::string_view body,
                        const std::vector<std::string>& run_values) {
  std::string canonical;
  json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    for (auto f : volatile_fields) j.erase(std::string(f));
    canonical = canonical_json(j);
  } else if (!j.is_discarded()) {
    canonical = canonical_json(j);
  } else {
    canonical = std::string(body);
  }
  // Longest first: a gateway address holds no placeholder, but one value may hold another.
  std::vector<std::string> values = run_values;
  std::sort(values.begin(), values.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (size_t i = 0; i < values.size(); ++i)
    replace_all(canonical, values[i], fmt::format("<run-value-{}>", i));
  canonical = without_uuids(canonical);
  sha256 h;
  h.update(method).update("\n").update(without_query_key(target)).update("\n").update(canonical);
  return h.hex_digest();
}

std::string request_shape(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  json shape = json::object();
  if (j.is_object()) {
    if (auto m = j.find("model"); m != j.end() && m->is_string()) shape["model"] = *m;
    for (const char* k : {"messages", "input", "contents"})
      if (auto it = j.find(k); it != j.end() && it->is_array()) shape[k] = it->size();
  }
  return canonical_json(shape);
}

model_cache::model_cache(fs::path dir, cache_mode mode) : dir_(std::move(dir)), mode_(mode) {}

result<std::optional<cached_response>> model_cache::read_entry(const std::string& name) const {
  const fs::path meta = dir_ / (name + ".json");
  std::error_code ec;
  if (!fs::exists(meta, ec)) return std::optional<cached_response>{};
  const json j = EB_TRY(read_json_file(meta));
  const auto status = json_find<int64_t>(j, "status");
  if (!status || *status < 100 || *status > 599)
    return make_error(error_kind::invalid_argument, "{}: no HTTP status", meta.string());
  cached_response r;
  r.status = static_cast<int>(*status);
  if (auto h = j.find("headers"); h != j.end() && h->is_array())
    for (const auto& pair : *h)
      if (pair.is_array() && pair.size() == 2 && pair.front().is_string() &&
          pair.back().is_string())
        r.headers.emplace_back(pair.front().get<std::string>(), pair.back().get<std::string>());
  r.body = EB_TRY(read_file(dir_ / (name + ".body"), max_entry_body));
  return std::optional<cached_response>(std::move(r));
}

result<model_cache::lookup_result> model_cache::lookup(const std::string& key,
                                                       std::string_view path,
                                                       const std::string& shape) {
  lookup_result out;
  {
    std::lock_guard lock(m_);
    out.occurrence = asked_[key]++;
    out.position = path_asked_[std::string(path)]++;
  }
  if (mode_ == cache_mode::record) return out;
  out.response = EB_TRY(read_entry(fmt::format("{}-{}", key, out.occurrence)));
  if (out.response) {
    out.match = "exact";
    return out;
  }
  // The request recorded at the same position on this path, when it had this shape.
  const fs::path index =
      dir_ / "positions" / fmt::format("{}-{}.json", sha256_hex(path).substr(0, 16), out.position);
  std::error_code ec;
  if (!fs::exists(index, ec)) return out;
  const json at = EB_TRY(read_json_file(index));
  const auto entry = json_find<std::string>(at, "entry");
  if (!entry || json_find<std::string>(at, "shape").value_or("") != shape) return out;
  if (entry->find('/') != std::string::npos || entry->starts_with("."))
    return make_error(error_kind::invalid_argument, "{}: not an entry name", index.string());
  out.response = EB_TRY(read_entry(*entry));
  if (out.response) out.match = "position";
  return out;
}

status model_cache::store(const std::string& key, int occurrence, std::string_view path,
                          int position, const std::string& shape, const cached_response& response) {
  EB_TRY(make_dirs(dir_ / "positions"));
  const std::string name = fmt::format("{}-{}", key, occurrence);
  EB_TRY(write_file_atomic(dir_ / (name + ".body"), response.body));
  json headers = json::array();
  for (const auto& [k, v] : response.headers) headers.push_back({k, v});
  const json meta = {{"schema", "evalbox.model-cache.v1"},
                     {"status", response.status},
                     {"headers", std::move(headers)},
                     {"path", std::string(path)},
                     {"position", position},
                     {"shape", shape}};
  EB_TRY(write_file_atomic(dir_ / (name + ".json"), pretty_json(meta)));
  const json index = {{"entry", name}, {"shape", shape}};
  return write_file_atomic(
      dir_ / "positions" / fmt::format("{}-{}.json", sha256_hex(path).substr(0, 16), position),
      pretty_json(index));
}

}  // namespace evalbox::harness::gateway
