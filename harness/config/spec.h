// The typed specs that fixture.yaml and suite.yaml become (evalbox.fixture.v1, evalbox.suite.v1),
// and the configuration error that points at FILE:LINE:COL. Plain data: built once by
// harness/config (parsing) and harness/fixture (directories), read by everything after.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "harness/config/pattern.h"

namespace evalbox::harness {
inline namespace config {

inline constexpr std::string_view fixture_schema = "evalbox.fixture.v1";
inline constexpr std::string_view suite_schema = "evalbox.suite.v1";

// Where a value came from. line and column are 1-based; 0 means "the whole file".
struct source_location {
  std::string file;
  int line = 0;
  int column = 0;

  // "FILE:LINE:COL", or "FILE" when line is 0.
  [[nodiscard]] std::string to_string() const;
};

// One problem in a configuration file. Several are collected and all reported.
struct config_error {
  source_location where;
  std::string what;  // what is wrong
  std::string hint;  // what to do about it; may be empty

  // "FILE:LINE:COL: what is wrong (hint: what to do)".
  [[nodiscard]] std::string message() const;
};

// Every message, one per line (no trailing newline).
std::string join_messages(const std::vector<config_error>& errors);
// An invalid_argument error carrying join_messages(errors) (what load_* return on bad input).
std::unexpected<error> config_failure(const std::vector<config_error>& errors);

// Per-run resource limits; unset means "the default of the layer below".
struct limits_spec {
  std::optional<uint64_t> wall_ms;
  std::optional<uint64_t> cpu_ms;
  std::optional<uint64_t> memory_bytes;
  std::optional<uint64_t> pids;
  std::optional<uint64_t> disk_bytes;
  std::optional<uint64_t> output_bytes;

  // Each value of `over` that is set replaces the one here (fixture limits over suite defaults).
  [[nodiscard]] limits_spec merged_with(const limits_spec& over) const;
  [[nodiscard]] json to_json() const;  // set fields only, in ms / bytes / count
};

// `budget:` (suite, candidate or fixture): what one run may spend through its model gateway
// (docs/suite-format.md, "budget"). Unset: no limit. A request is refused once a limit is
// reached; the one that crosses it completes (a budget bounds spending to one call past it).
struct budget_spec {
  std::optional<double> cost;  // USD, priced with the suite's prices
  std::optional<uint64_t> input_tokens;
  std::optional<uint64_t> output_tokens;
  std::optional<uint64_t> tokens;  // input and output together
  std::optional<uint64_t> requests;
  source_location where;

  [[nodiscard]] bool empty() const;
  // The limit that this spending reaches, in words ("cost: $2.01 of $2.00"), or nullopt.
  [[nodiscard]] std::optional<std::string> reached(double cost_usd, uint64_t input, uint64_t output,
                                                   uint64_t requests) const;
  // Each value of `over` that is set replaces the one here (fixture over candidate over suite).
  [[nodiscard]] budget_spec merged_with(const budget_spec& over) const;
  [[nodiscard]] json to_json() const;  // set fields only
};

// A candidate's `gateway:` (docs/agents.md, "The model gateway"): its agent talks to a gateway
// evalbox serves for the run, which forwards to `upstream` with the real key; the key never
// enters the sandbox.
struct gateway_spec {
  std::string upstream;  // http(s)://host[:port][/prefix]; http only to a loopback address
  // PEM files trusted besides the host's store for the upstream's TLS (absolute).
  std::vector<std::filesystem::path> ca_files;
  // Where the real key is read on the host: this variable of evalbox's environment; else the
  // candidate's one credential (a file holding the key), else the adapter's api_key_env.
  std::string key_env;
  // Where a login's tokens are refreshed (a login credential only); empty: the login's own
  // issuer (harness/gateway/login.h).
  std::string token_url;
  source_location where;

  [[nodiscard]] json to_json() const;  // what defines it (never the key)
};

// YAML `none`, or `{allow: [host:port, ...]}`. `host` (the host's network, recorded as unsafe)
// is never written in YAML: a Harbor task whose internet is allowed asks for it (harbor.h).
struct network_spec {
  enum class mode_kind { none, allow, host };
  mode_kind mode = mode_kind::none;
  std::vector<std::string> allow;  // "host:port", port 1..65535

  [[nodiscard]] json to_json() const;
};

// environment: {image: REF, workdir: /dir} — the image a fixture's runs see as their root
// (docs/environments.md). Written in a fixture, or as a suite's default for its fixtures.
struct environment_spec {
  std::string image;  // as written: oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:...
  // `image` with its path made absolute against the directory of the file that named it (set
  // by harness/fixture when it loads the file): what the store is asked for.
  std::string image_ref;
  std::optional<std::string> workdir;  // absolute, inside the image; fixtures without workspace/
  source_location where;               // of `environment:`
  // Harbor tasks (harness/fixture/harbor.h): the image as task.toml names it — a registry
  // reference (`docker_image`) or an environment/ directory with a Dockerfile — which becomes
  // `image_ref` only when resolved (the suite's `images:`, --image, a local podman store, a
  // build) before anything runs; `image` then says what was resolved.
  std::string registry_ref;
  std::filesystem::path build_context;
  source_location image_where;
  source_location workdir_where;

  [[nodiscard]] json to_json() const;  // {image (resolved), workdir}
};

// mounts: [{source, target, access, max_bytes}] — a host directory (or, read-only, a file) a
// run sees at `target` (docs/fixture-format.md, "mounts"). Written in a fixture, or in a suite
// for all of its fixtures (a fixture's own replaces the suite's of the same target).
struct mount_spec {
  enum class access_kind { read_only, ephemeral_write };
  std::string source;  // as written: relative to the file, no ".."
  // `source` made absolute against the directory of the file that named it (set when the file
  // is loaded), and the tree digest of what is there: part of the runs' identity.
  std::filesystem::path source_path;
  std::string source_digest;
  std::string target;  // absolute, normalized, not over what the sandbox makes itself
  access_kind access = access_kind::read_only;
  std::optional<uint64_t> max_bytes;  // ephemeral-write: the cap of its own disk (required)
  bool from_suite = false;
  source_location where, source_where, target_where;

  [[nodiscard]] json to_json() const;  // {source, target, access, max_bytes?, digest}
};
std::string_view to_string(mount_spec::access_kind access) noexcept;

// bundles: [{digest, source, target}] — a directory or tar verified against its tree digest
// when it first enters the bundle store, then bound read-only at `target` in every run that
// names it (docs/fixture-format.md, "bundles").
struct bundle_spec {
  std::string digest;                 // "sha256:<64 hex>"
  std::string source;                 // as written: relative to the file, no ".."
  std::filesystem::path source_path;  // absolute (set when the file is loaded)
  std::string target;
  bool from_suite = false;
  source_location where, digest_where, source_where, target_where;

  [[nodiscard]] json to_json() const;  // {source, target, digest}
};

// caches: {NAME: {target, warm, network, context, max_bytes}} — a directory filled once by its
// warm commands (in a sandbox of the fixture's environment, by `evalbox cache warm` or the
// first run that needs it), kept in the state directory under the key of what filled it, and
// seen by every run at `target` as a read-only lower under a writable upper of its own: a run's
// writes stay in the run (docs/fixture-format.md, "caches"). Written in a fixture, or in a
// suite for all of its fixtures (a fixture's own replaces the suite's of the same name).
struct cache_spec {
  std::string name;               // [A-Za-z0-9_.-]{1,64}
  std::string target;             // absolute; may lie below /home/agent
  std::vector<std::string> warm;  // shell commands, run in /workspace with the cache at target
  network_spec network;           // while warming; runs keep their own
  // The directory warm commands see at /workspace, as written (relative to the file) and made
  // absolute when the file is loaded, with its tree digest; unset: a fixture's workspace/
  // for a fixture's cache, an empty directory for a suite's.
  std::string context;
  std::filesystem::path context_path;
  std::string context_digest;
  uint64_t max_bytes = 1ull << 30;  // the most it may hold, and a run may write over it
  bool from_suite = false;
  source_location where, target_where, warm_where, context_where;

  [[nodiscard]] json to_json() const;  // {name, target, warm, network, context?, max_bytes}
};

// `verifier`: a Harbor task's tests/test.sh and its reward (never written in fixture.yaml);
// `tests`: a command whose test report is graded FAIL_TO_PASS / PASS_TO_PASS (docs/swebench.md);
// `judge`: propositions a model grades from chosen evidence (docs/fixture-format.md).
enum class check_kind { shell, file, git, transcript, verifier, tests, judge };
std::string_view to_string(check_kind kind) noexcept;

// file: {path, exists | absent | equals | contains | matches | json: {pointer, equals}}
struct file_check {
  enum class predicate_kind { exists, absent, equals, contains, matches, json };
  std::string path;  // relative to /workspace, no ".."
  predicate_kind predicate = predicate_kind::exists;
  std::string text;     // equals / contains: the text
  pattern regex;        // matches: compiled when the fixture loads (pattern.h)
  std::string pointer;  // json: an RFC 6901 JSON pointer ("" is the whole document)
  json expected;        // json: the value found at `pointer` must equal this
};
std::string_view to_string(file_check::predicate_kind kind) noexcept;

// git: {paths: [...], state: changed | unchanged}, against the workspace as it was after setup.
struct git_check {
  enum class state_kind { changed, unchanged };
  std::vector<std::string> paths;  // relative, no ".."; a directory covers what is below it
  state_kind state = state_kind::unchanged;
};

// transcript: exactly one of the predicates below, over the normalized transcript.
struct transcript_check {
  enum class predicate_kind {
    command_matches,        // some shell tool call's command matches `pattern`
    final_message_matches,  // the last assistant message matches `pattern`
    tool_used,              // some tool call used the tool named `pattern`
    forbid_command,         // no shell tool call's command matches `pattern`
    max_steps,              // at most `max_steps` steps
  };
  predicate_kind predicate = predicate_kind::command_matches;
  pattern regex;     // *_matches, forbid_command: compiled when the fixture loads (pattern.h)
  std::string tool;  // tool_used: the normalized tool name
  uint64_t max_steps = 0;
};
std::string_view to_string(transcript_check::predicate_kind kind) noexcept;

// tests: {command, patch?, report?, fail_to_pass, pass_to_pass} — a test suite run in the
// grading sandbox after `patch` (a file of grader/) is applied to the final workspace, its
// report parsed and the listed tests graded as SWE-bench does (docs/swebench.md).
inline constexpr std::string_view test_log_formats[] = {
    "pytest", "pytest-v2", "pytest-options", "matplotlib", "seaborn", "django", "sympy"};
struct tests_check {
  enum class report_kind { pytest, junit };
  std::string command;  // run by /bin/sh -c in /workspace
  std::string patch;    // "" or a path relative to grader/ (mounted at /grader)
  report_kind report = report_kind::pytest;  // pytest: the command's output, read as log_format
  std::string junit_path;                    // report junit: relative to /workspace
  // report `pytest` or `{format: NAME}`: the log parser that reads the command's output, a name
  // of test_log_formats (harness/grading/test_report.h has a parser for each).
  std::string log_format = "pytest";
  std::vector<std::string> fail_to_pass;  // must pass after the change (and failed before)
  std::vector<std::string> pass_to_pass;  // must still pass
};

// judge: {propositions: [...], evidence: [...], judge: NAME} — each proposition graded pass or
// fail by the suite's judge NAME (a model) from the evidence; the propositions' ids are p1, p2,
// ... in order (what the judge's answer must name).
struct judge_check {
  enum class evidence_kind { final_message, diff, file, commands };
  struct evidence_spec {
    evidence_kind kind = evidence_kind::final_message;
    std::string path;                         // file: relative to /workspace, no ".."
    [[nodiscard]] std::string label() const;  // "final_message", "file:NOTES.md", ...
  };
  std::vector<std::string> propositions;  // at least one
  std::vector<evidence_spec> evidence;    // may be empty: the propositions alone
  std::string judge = "default";          // a key of the suite's `judges:`
  source_location judge_where;            // of `judge:` (or of the check when not written)
};
// Bounds of a judge check and a judge (what one prompt and one answer may hold).
inline constexpr size_t max_judge_propositions = 32;
inline constexpr size_t max_judge_proposition_bytes = 2000;
inline constexpr uint64_t max_judge_votes = 9;
// "p1", "p2", ...: the id of proposition `index` (0-based).
std::string proposition_id(size_t index);

struct check_spec {
  std::string id;  // unique within its fixture
  double weight = 1;
  check_kind kind = check_kind::shell;
  std::string shell;  // shell: the command, run by /bin/sh -c in /workspace
  file_check file;
  git_check git;
  transcript_check transcript;
  tests_check tests;
  judge_check judge;
  source_location where;

  [[nodiscard]] json to_json() const;
};

// `skills:` entry of a candidate: a directory holding SKILL.md, which the candidate's client
// sees read-only where it reads skills, under the directory's name (docs/agents.md, "Skills,
// MCP servers and hooks").
struct skill_spec {
  std::string name;           // the directory's name
  std::filesystem::path dir;  // absolute
  source_location where;
};

// `mcp_servers: {NAME: {command: [...], env: {...}}}` entry: a stdio MCP server the client
// starts inside the sandbox. Each element of `command` that names a host file by a path
// (absolute outside the system directories, or relative to the suite file with a '/') is
// mounted read-only at /evalbox/mcp/NAME/<its file name>, and the command names it there.
struct mcp_server_spec {
  std::string name;                  // [A-Za-z0-9_-]+
  std::vector<std::string> command;  // as written
  std::map<std::string, std::string> env;
  std::map<size_t, std::filesystem::path> files;  // index into `command` -> host file (absolute)
  source_location where;

  // `command` as the sandbox sees it: each of `files` at its mounted path.
  [[nodiscard]] std::vector<std::string> sandbox_command() const;
  // Where file `index` is mounted inside the sandbox.
  [[nodiscard]] std::filesystem::path sandbox_file(size_t index) const;
};

// `hooks: {EVENT: [{matcher, command}]}` entry: an executable the client runs on EVENT,
// mounted read-only at /evalbox/hooks/<index>/<its file name>.
struct hook_spec {
  std::string event;             // as the client names it (PreToolUse, ...)
  std::string matcher;           // "" when not written
  std::string command;           // as written
  std::filesystem::path script;  // absolute host file
  source_location where;
};

// What a Harbor task directory (task.toml + instruction.md) adds to its fixture: the verifier's
// contract (docs/harbor.md). Set only for Harbor tasks.
struct harbor_spec {
  std::string name;                                 // [task] name, else the directory's name
  std::filesystem::path tests_dir;                  // tests/: at /tests while grading only
  std::optional<uint64_t> verifier_wall_ms;         // [verifier] timeout_sec
  std::map<std::string, std::string> verifier_env;  // [verifier] env
  std::optional<uint64_t> agent_wall_ms;            // [agent] timeout_sec
  bool internet = true;                             // allow_internet / network_mode (default: on)
  std::optional<double> cpus;                       // [environment] cpus
  json metadata = json::object();                   // [metadata], kept for records
  // [environment] mcp_servers with transport "stdio": given to every candidate whose adapter
  // writes MCP servers (a candidate's own server of the same name wins).
  std::vector<mcp_server_spec> mcp_servers;
  // [environment] skills_dir: a directory in the task's image whose subdirectories are skills,
  // copied into the skills directory of every candidate whose client takes skills (a
  // candidate's own skill of the same name wins). Relative: to the image's working directory.
  std::string skills_dir;
};

// workspace: {git: URL-or-PATH, commit: SHA} — the workspace is that commit of a repository,
// checked out once into a content-addressed tree (harness/fixture/git_source.h).
struct git_workspace_spec {
  std::string source;  // as written: a URL (https, http, ssh, git, file) or a local path
  std::string commit;  // 7 to 64 hex digits as written
  source_location where, source_where, commit_where;
};

struct fixture_spec {
  std::filesystem::path dir;  // the fixture directory (absolute)
  std::string id;             // [a-z0-9][a-z0-9._-]*
  std::string description;    // optional, for people
  std::string prompt;
  std::optional<std::string> follow_up;
  std::vector<std::string> setup;  // shell commands run in /workspace before the agent
  limits_spec limits;
  std::optional<budget_spec> budget;  // over the candidate's (model gateway candidates only)
  network_spec network;
  // The fixture's own environment, or its suite's default (set by load_suite); unset: the
  // host's allow-listed root.
  std::optional<environment_spec> environment;
  bool environment_from_suite = false;
  // Its own mounts and bundles, then (set by load_suite) the suite's of the other targets.
  std::vector<mount_spec> mounts;
  std::vector<bundle_spec> bundles;
  std::vector<cache_spec> caches;  // its own, then (set by load_suite) the suite's of other names
  std::vector<check_spec> checks;  // at least one
  double threshold = 1.0;          // passed when the weighted share of passing checks >= this
  bool has_grader = false;         // grader/ exists
  bool has_solution = false;       // solution/solve.sh exists
  bool has_bin = false;            // bin/ exists
  bool has_workspace = false;      // workspace/ exists (required unless an environment is set)
  // A workspace from git instead of workspace/ (then has_workspace is true and git_tree is
  // the checked-out tree, set when the fixture is loaded).
  std::optional<git_workspace_spec> git_workspace;
  std::filesystem::path git_tree;
  std::string git_commit;  // the full commit id git_tree holds
  std::string digest;      // tree_digest of the whole fixture directory
  // The same without what grades the run (grader/, a Harbor task's tests/, fixture.yaml's
  // checks and threshold): what the agent's run depends on, so what its run id is made from —
  // a fixed check regrades runs (docs/results.md), it does not re-run agents.
  std::string task_digest;
  // What grades it, apart from the suite's judges (grading_digest in harness/plan/plan.h):
  // fixture.yaml's checks and threshold as written (emitted again, comments gone), and the
  // tree digest of grader/ (a Harbor task's tests/), "" without one.
  std::string grading_text;
  std::string grader_digest;
  std::optional<harbor_spec> harbor;  // a Harbor task directory (harness/fixture/harbor.h)

  [[nodiscard]] std::filesystem::path workspace_dir() const {
    return git_workspace ? git_tree : dir / "workspace";
  }
  [[nodiscard]] std::filesystem::path grader_dir() const { return dir / "grader"; }
  // What its run ids are made from: the task digest (the whole digest for a fixture made in
  // memory without one).
  [[nodiscard]] const std::string& task_identity() const {
    return task_digest.empty() ? digest : task_digest;
  }
  [[nodiscard]] std::filesystem::path solution_script() const {
    return dir / "solution" / "solve.sh";
  }
  [[nodiscard]] std::filesystem::path bin_dir() const { return dir / "bin"; }
};

// An adapter setting: the YAML value as JSON, with where it was written so that an adapter can
// reject it as "FILE:LINE:COL: ...".
struct setting {
  json value;
  source_location where;
};

// The settings by which an adapter mounts a credential as its client's login file, which the
// client rewrites as its tokens rotate (Codex's auth_file, Claude Code's credentials_file).
inline constexpr std::string_view login_setting_keys[] = {"auth_file", "credentials_file"};

struct candidate_spec {
  std::string id;
  std::string adapter;
  std::map<std::string, setting> settings;  // every key that is not one of the common ones
  // Target path inside the home (relative) -> source file (absolute; must exist).
  std::map<std::string, std::filesystem::path> home_files;
  std::map<std::string, std::string> env;
  std::optional<network_spec> network;  // unset: the fixture's network
  // Credential handles this candidate uses (from its `credential` / `credentials` setting);
  // each exists in suite_spec::credentials.
  std::vector<std::string> credentials;
  std::optional<gateway_spec> gateway;
  // The suite's `budget` with the candidate's over it (a fixture's goes over both at run time).
  std::optional<budget_spec> budget;
  std::vector<skill_spec> skills;
  std::vector<mcp_server_spec> mcp_servers;  // sorted by name
  std::vector<hook_spec> hooks;              // in the order written, event by event
  // Where `skills:`, `mcp_servers:` and `hooks:` were written (an adapter refuses them there).
  source_location skills_where, mcp_servers_where, hooks_where;
  source_location where;

  // The hook at `index` of `hooks`, where the sandbox sees it.
  [[nodiscard]] std::filesystem::path sandbox_hook(size_t index) const;
  // The setting `key`, or nullptr.
  [[nodiscard]] const setting* find(std::string_view key) const;
  // The credential this candidate's gateway reads its key from: none when gateway.key_env is
  // set; else its one credential; else the login file its `credentials_file` / `auth_file`
  // setting names; else none (the key is the variable api_key_env names). "" without a gateway.
  [[nodiscard]] std::string gateway_key_handle() const;
  // Whether it uses credential `handle`: as `credential(s):`, or as a login setting.
  [[nodiscard]] bool uses_credential(std::string_view handle) const;
  // Stable JSON of everything that defines the candidate (without `where`), for its digest.
  [[nodiscard]] json to_json() const;
};

// A suite's `judges: {NAME: ...}` entry: the model that grades judge checks, and how to reach
// it. The judge runs from the host process (it executes nothing the agent wrote); its API key
// is read from `api_key_env` on the host when a request is made and is never recorded.
struct judge_spec {
  enum class adapter_kind { openai_responses, anthropic_messages, command };
  std::string name;
  adapter_kind adapter = adapter_kind::openai_responses;
  std::string model;        // required for the HTTP adapters; told to a command in its request
  std::string base_url;     // HTTP: scheme://host[:port][/prefix]; default the vendor's API
  std::string api_key_env;  // HTTP: default OPENAI_API_KEY / ANTHROPIC_API_KEY
  std::vector<std::string> argv;  // command: the program (relative to the suite file) and args
  int votes = 1;                  // independent answers; each proposition's majority wins
  uint64_t timeout_ms = 120'000;  // per request
  int retries = 2;                // after a transport error, a timeout, HTTP 429 or 5xx
  uint64_t max_evidence_bytes = 32u << 10;  // per evidence item, the rest cut with a note
  uint64_t max_output_tokens = 2048;        // asked of the model
  source_location where;

  [[nodiscard]] json to_json() const;  // what defines the judge (never the key's value)
};
std::string_view to_string(judge_spec::adapter_kind kind) noexcept;

struct price_spec {
  double input_per_mtok = 0;   // currency units per million input tokens
  double output_per_mtok = 0;  // per million output tokens
  // Input tokens read from a cache, and written to one (Anthropic), when priced otherwise.
  std::optional<double> cached_input_per_mtok;
  std::optional<double> cache_write_per_mtok;

  // The cost of one call or run: `input` counts every input token, of which `cached` were read
  // from a cache and `cache_write` written to one.
  [[nodiscard]] double cost(uint64_t input, uint64_t cached, uint64_t cache_write,
                            uint64_t output) const;
};

// One entry of a suite's `fixtures:` list as written: a directory or a glob, relative to the
// suite file (harness/fixture resolves it).
struct fixture_entry {
  std::string pattern;
  source_location where;
};

// A credential written `{path, max_concurrent}`: up to max_concurrent runs lease it at once.
struct shared_credential {
  int max_concurrent = 1;
  source_location where;  // of max_concurrent
  // At most this many requests upstream in any minute, by every model gateway in front of the
  // credential in one evalbox process (harness/gateway/rate_limit.h); 0: no limit.
  uint32_t requests_per_minute = 0;
  source_location rate_where;  // of requests_per_minute
};
// The largest requests_per_minute.
inline constexpr uint32_t max_requests_per_minute = 1'000'000;
// The largest max_concurrent (sandbox/spec/validate.h, max_credential_holders).
inline constexpr int max_credential_holders = 256;

struct suite_spec {
  std::filesystem::path file;  // the suite file (absolute)
  std::string name;
  std::string description;
  std::vector<fixture_entry> fixture_entries;       // as written
  std::vector<std::filesystem::path> fixture_dirs;  // resolved, absolute, sorted, unique
  std::vector<fixture_spec> fixtures;               // loaded by load_suite, same order
  std::vector<candidate_spec> candidates;
  int trials = 1;
  int concurrency = 1;
  std::map<std::string, std::filesystem::path> credentials;  // handle -> source (~ expanded)
  // handle -> how many runs may lease it at once, for each handle written as `{path,
  // max_concurrent}`; absent: 1, a login file's one run at a time.
  std::map<std::string, shared_credential> shared_credentials;
  limits_spec default_limits;
  std::optional<environment_spec> default_environment;  // for fixtures without their own
  std::vector<mount_spec> default_mounts;    // for every fixture, under its own (by target)
  std::vector<bundle_spec> default_bundles;  // the same
  std::vector<cache_spec> default_caches;    // for every fixture, under its own (by name)
  std::optional<std::string> baseline;       // a candidate id
  std::map<std::string, price_spec> prices;  // model or candidate id -> price
  std::optional<budget_spec> budget;         // per run, under each candidate's
  std::optional<budget_spec> suite_budget;  // the whole run's spending: stops scheduling when spent
  std::filesystem::path results_dir;        // default "results/<name>" (relative to cwd)
  // Harbor tasks: `images: {REF: SOURCE}` — a registry reference a task.toml names → an image
  // evalbox reads (oci:, oci-archive:, docker-archive:, rootfs:; paths made absolute against
  // the suite file); and the reward a run must reach (`harbor: {threshold:}`, default 1.0).
  std::map<std::string, std::string> images;
  std::optional<double> harbor_threshold;
  std::map<std::string, judge_spec> judges;  // `judges: {NAME: ...}` (judge checks)

  [[nodiscard]] const candidate_spec* find_candidate(std::string_view id) const;
  // shared_credentials' max_concurrent for `handle`, else 1.
  [[nodiscard]] int max_concurrent(const std::string& handle) const;
  // The price of `model` (as a call or transcript names it) for `candidate`: `prices` keyed by
  // that model, else by the candidate's id, else by its `model` setting; nullptr when none.
  [[nodiscard]] const price_spec* price_for(const candidate_spec& candidate,
                                            std::string_view model) const;
};

}  // namespace config
}  // namespace evalbox::harness
