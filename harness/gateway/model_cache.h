// The model cache of `evalbox run --model-cache DIR` (docs/agents.md, "Record and replay"):
// each response a gateway forwards is stored under the canonical key of its request, and a
// later run of the same fixture, candidate and trial is answered from the store instead of
// the upstream — free, and the same answers in the same order, so the agent does the same
// thing again (a fixture author re-runs a recorded agent against changed checks, say).
//
// A request's key hashes its method, its path (a `key=` query value left out) and its body
// with what differs from run to run taken out: the run's placeholder key and gateway address
// wherever they appear (an agent that prints its environment sends them back), and the
// top-level fields clients fill with session ids (`metadata`, `user`, `prompt_cache_key`,
// `safety_identifier`, `client_metadata`), and every UUID (clients mint them per session, turn
// and message). The same request asked twice in a run is two
// entries: the n-th asking gets the n-th answer.
//
// What a command printed is in the requests that follow it, and may differ from run to run
// (Codex's "Wall time: 0.0012 seconds", a `date`, a temporary name): when a request has no
// exact entry, the answer recorded at the same position among the run's requests to the same
// path is taken — if that request had the same shape (model, and how many messages, input items
// or contents it carried). The call's record says which match it was (`replay_match`: `exact`,
// `position`); anything else is a miss.
//
// Layout: DIR/<fixture>/<candidate>/<trial>/<key>-<n>.json (status, headers, and the request's
// path position and shape) and <key>-<n>.body (the response's bytes as they came, an SSE stream
// included), and positions/<path digest>-<p>.json naming the entry asked p-th on that path;
// each .json is written after what it names, so a crash mid-store leaves no entry.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace evalbox::harness::gateway {

enum class cache_mode {
  record,            // every request goes upstream; its response is stored (replacing any)
  replay,            // every request is answered from the store; a miss is an error
  replay_or_record,  // answered from the store when it has the request, else as record
};
std::string_view to_string(cache_mode m) noexcept;
std::optional<cache_mode> parse_cache_mode(std::string_view text);

// The key of a request (64 hex digits). `run_values`: strings of this run to take out of the
// body (its placeholder and gateway address).
std::string request_key(std::string_view method, std::string_view target, std::string_view body,
                        const std::vector<std::string>& run_values);
// The shape of a request body: its model and how many messages, input items and contents it
// carries (what must match for an answer to be taken by position).
std::string request_shape(std::string_view body);

struct cached_response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

class model_cache {
 public:
  // `dir`: the run's own directory of the cache (DIR/<fixture>/<candidate>/<trial>).
  model_cache(std::filesystem::path dir, cache_mode mode);

  [[nodiscard]] cache_mode mode() const noexcept { return mode_; }
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }

  struct lookup_result {
    int occurrence = 0;  // how many times this run asked `key` before
    int position = 0;    // how many requests this run sent to the same path before
    std::optional<cached_response> response;
    std::string match;  // "exact" or "position" when there is a response
  };
  // The answer stored for the next asking of `key` (to `path`, of `shape`) in this run: none in
  // record mode, or when the store has none. An entry that cannot be read is an error.
  // Thread-safe.
  result<lookup_result> lookup(const std::string& key, std::string_view path,
                               const std::string& shape);
  // Stores the answer to the `occurrence`-th asking of `key`, the `position`-th request to
  // `path`. Thread-safe.
  status store(const std::string& key, int occurrence, std::string_view path, int position,
               const std::string& shape, const cached_response& response);

 private:
  std::filesystem::path dir_;
  cache_mode mode_;
  std::mutex m_;
  std::map<std::string, int> asked_;       // by key
  std::map<std::string, int> path_asked_;  // by path
  result<std::optional<cached_response>> read_entry(const std::string& name) const;
};

}  // namespace evalbox::harness::gateway
