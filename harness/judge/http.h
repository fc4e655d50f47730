// One HTTP(S) POST from the host, with a deadline: how a judge reaches its model API (through
// sandbox/http/client.h). TLS verifies the server's certificate against the host's
// CA store and its name; no proxy is used (HTTP(S)_PROXY are not read): the judge connects to
// the base_url the suite declares, and only there.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace evalbox::harness {
inline namespace judge {

struct http_reply {
  int status = 0;
  std::string body;  // at most the max_body asked for
};

// POSTs `body` to `url` (http:// or https://host[:port]/path) with `headers` and waits at most
// `timeout` for the whole exchange (name lookup, connect, TLS, request, response). An error for
// what prevented a reply (a bad URL, a refused connection, a timeout: error_kind::expired, a
// response past `max_body`); any HTTP status is a reply. Messages never include the headers.
result<http_reply> http_post(const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, std::chrono::milliseconds timeout,
                             size_t max_body = 4u << 20);

}  // namespace judge
}  // namespace evalbox::harness
