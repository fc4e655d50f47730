// Candidate settings the agent adapters share: reading them, checking them into config_error
// values at the setting's file:line:col, and resolving the `binary` and `api_key_env` settings.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "harness/config/validate.h"  // is_env_name, for the adapters' checks
#include "sandbox/spec/request.h"

namespace evalbox::harness {
inline namespace agent {

// "a, b, c": a list of choices in a hint.
std::string comma_list(const std::vector<std::string>& items);
bool one_of(std::string_view s, const std::vector<std::string>& items);
// The value of setting `key` when it is a string, else `fallback`.
std::string string_setting(const candidate_spec& c, std::string_view key,
                           std::string fallback = {});

// ${EVALBOX_AGENT_CACHE:-/var/cache/evalbox/agents}: where scripts/install-agents puts clients.
std::filesystem::path agent_cache_dir();
// The agent executable: the `binary` setting (absolute, or relative to the suite file's
// directory), else `default_binary`.
std::filesystem::path resolve_binary(const candidate_spec& c,
                                     const std::filesystem::path& default_binary);
// resolve_binary() when it is an executable file, else not_found naming the `agent` binary and
// `install_command`, the way to get the default one.
result<std::filesystem::path> installed_binary(const candidate_spec& c,
                                               const std::filesystem::path& default_binary,
                                               std::string_view agent,
                                               std::string_view install_command);
// The npm install prefix holding `binary` (<prefix>/bin/<name>), mounted read-only: the
// launcher only adds argv[0]'s own directory, and the script needs its package beside it.
std::filesystem::path install_prefix(const std::filesystem::path& binary);
// install_prefix(), and the directory of the file `binary` links to when that lies outside it.
std::vector<std::filesystem::path> install_paths(const std::filesystem::path& binary);

// The credential handle to lease: the setting `key`, else the candidate's only credential
// when no api_key_env says how to authenticate instead (and no gateway holds it on the host).
std::optional<std::string> credential_handle(const candidate_spec& c, std::string_view key);
// The lease of `handle`'s source file at `target` (relative to the home).
result<sandbox::secret_mount> credential_mount(const run_context& ctx, const std::string& handle,
                                               const std::filesystem::path& target);

// The value of the host variable named by `api_key_env`, registered with the log's redaction
// (it is a secret); nullopt when the setting is absent. An error when the variable is unset.
result<std::optional<std::string>> api_key_from_host(const candidate_spec& c);

// What a gateway candidate's gateway authenticates its upstream requests with, read on the
// host: the variable gateway.key_env names, else the candidate's only credential — a file
// holding the key on one line, or a login file (a JSON object: the gateway tells which login,
// login.h) — else the variable api_key_env names. A key is registered with the log's redaction.
struct gateway_secret {
  std::string value;  // the key, or the login file's content when `login_file`
  bool login_file = false;
  std::string handle;  // the credential it was read from ("" for a variable)
  std::filesystem::path source;
};
result<gateway_secret> gateway_key(const candidate_spec& c,
                                   const std::map<std::string, std::filesystem::path>& credentials);

// Collects the problems in one candidate's settings; validate() returns take(). Each check
// looks at one optional setting and does nothing when it is absent, so checks compose in the
// order the errors should be reported.
class settings_checker {
 public:
  explicit settings_checker(const candidate_spec& c) : c_(c) {}

  // Every key that is not in `known` (unknown_setting()).
  void known_keys(const std::vector<std::string>& known);
  // The setting `key` when present and a non-empty string; nullptr when absent or when it is
  // not (then an error with `hint` is recorded).
  const setting* non_empty_string(std::string_view key, std::string_view hint);
  // A string that must be one of `choices`.
  const setting* choice(std::string_view key, const std::vector<std::string>& choices);
  // `binary`: an executable file; `executable` names it in the hints ("the codex executable"),
  // `install_command` is how to get the default one.
  void binary(std::string_view executable, std::string_view install_command);
  // A host environment variable name; `example` is a typical one (OPENAI_API_KEY).
  void env_name(std::string_view key, std::string_view example);
  // A handle from this candidate's credentials.
  void credential(std::string_view key);
  // An http:// or https:// URL; `example` is shown when the value is not a string.
  void url(std::string_view key, std::string_view example);
  // With a gateway, the setting `key` (where the client's API is) is the gateway's to set.
  void set_by_gateway(std::string_view key);

  void add(config_error e) { errors_.push_back(std::move(e)); }
  [[nodiscard]] std::vector<config_error> take() { return std::move(errors_); }

 private:
  const candidate_spec& c_;
  std::vector<config_error> errors_;
};

}  // namespace agent
}  // namespace evalbox::harness
