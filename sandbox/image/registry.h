// Pulling from an image registry: the OCI distribution protocol (what Docker Hub, ghcr.io,
// quay.io and distribution's own registry speak), natively over sandbox/http — no daemon, no
// podman, no skopeo.
//
//   GET /v2/NAME/manifests/REF  Accept: OCI index/manifest, Docker list/v2 manifest
//     401 + WWW-Authenticate: Bearer realm=…,service=…,scope=…  → GET realm (Basic with the
//       user's credentials, or anonymous) → {"token"} → retried with Authorization: Bearer
//     401 + WWW-Authenticate: Basic  → retried with the credentials
//   GET /v2/NAME/blobs/DIGEST   (a redirect to blob storage is followed without the token)
//
// Everything a registry says is untrusted: a manifest is read up to max_json_bytes and must
// hash to the digest it was asked by (or that the registry announced), a blob is streamed
// through its digest check by the layer unpacker and cut when it runs past its declared size,
// every wait is bounded (registry_settings timeouts), 429 and 5xx are retried with backoff
// (Retry-After honoured), a broken blob download resumes with Range, redirects go at most 5
// deep and never from https to http. Credentials go only into Authorization headers, never
// into a log, a record or an error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "sandbox/image/layer.h"
#include "sandbox/image/oci.h"
#include "sandbox/image/reference.h"

namespace evalbox::sandbox::image {

struct credential {
  std::string username;
  std::string secret;    // a password or a token; never printed
  std::string identity;  // an OAuth2 refresh token (docker login with a token helper)
  std::string from;      // where it came from: a file or "docker-credential-NAME"
};

// Runs `docker-credential-NAME get` with `server` on stdin and returns its stdout (the caller
// above the image layer starts the process: sandbox/launch owns process spawning).
using credential_helper_fn =
    std::function<result<std::string>(const std::string& helper, const std::string& server)>;

// How pulls are made on this host: read once (registry_settings_from_host) and passed down.
struct registry_settings {
  std::vector<std::string> ca_files;  // PEM bundles trusted besides the host's (TLS)
  // host[:port] reached over plain HTTP (registries.conf `insecure = true`,
  // EVALBOX_REGISTRY_INSECURE); loopback hosts always may be.
  std::vector<std::string> insecure;
  // Domain -> mirror endpoints tried first, in order (registries.conf `[[registry.mirror]]`;
  // EVALBOX_REGISTRY_MIRROR for docker.io). "host[:port]" or "https://host[:port]".
  std::map<std::string, std::vector<std::string>> mirrors;
  // Registries pulls must not use (registries.conf `blocked = true`): "host[:port]" or
  // "host[:port]/path" prefixes; a pull from one is refused naming the file that blocked it.
  std::vector<std::pair<std::string, std::string>> blocked;  // prefix, where it was declared
  // registries.conf [aliases] (short name -> full name), for names given to `image pull`.
  // unqualified-search-registries is deliberately not read: a short name means docker.io, as
  // Docker and the benchmarks that name images mean it, on every machine (a search list would
  // let the first registry that has a name of that spelling answer for it).
  std::vector<std::pair<std::string, std::string>> aliases;
  // Credential files, most preferred first (REGISTRY_AUTH_FILE, containers auth.json, Docker's
  // config.json); those that do not exist are skipped but named in a 401's message.
  std::vector<std::filesystem::path> auth_files;
  credential_helper_fn credential_helper;    // unset: credHelpers/credsStore are reported, unused
  bool use_proxy = true;                     // HTTPS_PROXY / NO_PROXY (sandbox/http proxy_for)
  std::chrono::milliseconds timeout{30000};  // connect/head, and the longest silence in a body
  uint64_t min_rate = 1024;                  // bytes/s a body must average over `timeout`
  int retries = 4;                           // attempts after a 429/5xx or a dropped blob
  std::chrono::milliseconds max_backoff{30000};
  int parallel = 3;              // blobs downloaded at once
  std::optional<platform> want;  // --platform; unset: the host's
  const std::atomic<bool>* cancel = nullptr;
};

// The settings from the environment and the host's files: EVALBOX_REGISTRY_CA,
// EVALBOX_REGISTRY_INSECURE, EVALBOX_REGISTRY_MIRROR, EVALBOX_REGISTRY_TIMEOUT,
// EVALBOX_REGISTRIES_CONF (else /etc/containers/registries.conf and
// ~/.config/containers/registries.conf), REGISTRY_AUTH_FILE, XDG_RUNTIME_DIR, DOCKER_CONFIG,
// HOME. A malformed value or file is an error naming it.
result<registry_settings> registry_settings_from_host();

// registries.conf (TOML, v2 format) applied onto `into`: [aliases], and each [[registry]]'s
// location, insecure, blocked and mirrors. `what` names the file.
status apply_registries_conf(std::string_view toml_text, std::string_view what,
                             registry_settings& into);

// The credential for `name` ("DOMAIN/PATH"): the most specific key of the first auth file that
// has one (DOMAIN/PATH, DOMAIN/PARENT…, DOMAIN; docker.io also as index.docker.io and
// https://index.docker.io/v1/), through credHelpers/credsStore when the file says so.
// nullopt when none has one.
result<std::optional<credential>> find_credential(const registry_settings& settings,
                                                  const std::string& domain,
                                                  const std::string& repository);

// A parsed WWW-Authenticate challenge: scheme ("bearer" or "basic", lowercased) and its
// parameters (realm, service, scope, error…). Malformed headers are an error.
struct challenge {
  std::string scheme;
  std::map<std::string, std::string> params;
};
result<challenge> parse_challenge(std::string_view header);

struct fetched_manifest {
  std::string digest;      // "sha256:<hex>" of `bytes`
  std::string media_type;  // as the document (or the Content-Type) says
  media_kind kind = media_kind::unknown;
  std::string bytes;
};

// One repository of one registry, with its authentication state (tokens are cached and
// refreshed when they expire). Thread-safe: blobs are fetched from several threads at once.
class registry_client {
 public:
  registry_client(const registry_settings& settings, reference ref);
  ~registry_client();
  registry_client(const registry_client&) = delete;
  registry_client& operator=(const registry_client&) = delete;

  // GET (or HEAD when `head_only`: bytes stay empty) the manifest named by `tag_or_digest`.
  // Verified: against the digest when named by one, else against Docker-Content-Digest when
  // the registry sends it.
  result<fetched_manifest> manifest(const std::string& tag_or_digest, bool head_only = false);
  // A small blob (a config), whole, verified against `digest`.
  result<std::string> small_blob(const std::string& digest, size_t max);
  // A blob as a stream of at most `size` bytes (more is an error), resumed with Range when the
  // connection breaks. Its digest is checked by whoever reads it (unpack_layer). `stop`, when
  // given, ends a read that waits (cancelled) instead of the settings' cancel flag.
  result<std::unique_ptr<byte_source>> open_blob(const std::string& digest, int64_t size,
                                                 const std::atomic<bool>* stop = nullptr);

  // The endpoint manifests came from ("https://registry-1.docker.io", a mirror's).
  [[nodiscard]] std::string endpoint() const;
  [[nodiscard]] const reference& ref() const noexcept;

  struct state;

 private:
  std::unique_ptr<state> state_;
};

}  // namespace evalbox::sandbox::image
