// http_post over evalbox's HTTP client (sandbox/http/client.h): one bounded POST, no proxy.
#include "harness/judge/http.h"

#include "sandbox/http/client.h"

namespace evalbox::harness {
inline namespace judge {

result<http_reply> http_post(const std::string& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body, std::chrono::milliseconds timeout,
                             size_t max_body) {
  namespace http = sandbox::http;
  http::request req;
  req.method = "POST";
  req.to = EB_TRY(http::parse_url(url));
  req.headers = headers;
  req.body = body;
  http::options opts;
  opts.head_timeout = timeout;
  opts.idle_timeout = timeout;
  opts.total_timeout = timeout;
  opts.user_agent = "evalbox-judge";
  auto reply = http::fetch_all(req, opts, max_body);
  if (!reply) {
    if (reply.error().kind == error_kind::expired)
      return make_error(error_kind::expired, "POST {}: no answer within {} ms", req.to.str(),
                        timeout.count());
    return std::unexpected(std::move(reply).error());
  }
  return http_reply{reply->status, std::move(reply->body)};
}

}  // namespace judge
}  // namespace evalbox::harness
