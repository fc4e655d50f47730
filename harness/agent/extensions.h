// A candidate's skills, MCP servers and hooks (harness/config/spec.h) as an adapter places
// them: the read-only bundles that carry their files into the sandbox, and the refusal of an
// adapter whose client has no place for one (docs/agents.md, "Skills, MCP servers and hooks").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "harness/agent/adapter.h"
#include "harness/config/spec.h"
#include "sandbox/spec/request.h"

namespace evalbox::harness {
inline namespace agent {

// Why an adapter's client cannot take each of the three; empty: it can.
struct extension_support {
  std::string skills;
  std::string mcp_servers;
  std::string hooks;
};

// One error at each of `skills:`, `mcp_servers:`, `hooks:` the candidate wrote and its adapter
// cannot place, saying why.
std::vector<config_error> unsupported_extensions(const candidate_spec& c,
                                                 const extension_support& why_not);

// The MCP servers a run's client gets: the candidate's, and a Harbor task's (docs/harbor.md)
// whose names the candidate's do not take; sorted by name.
std::vector<mcp_server_spec> run_mcp_servers(const run_context& ctx);

// Where the client reads user skills: `skills_dir` relative to the managed home (e.g.
// ".claude/skills"). Each of the candidate's skills becomes a read-only bundle at
// <home>/<skills_dir>/<name>, and the plan names the directory, where the runner copies a
// Harbor task's skills (docs/harbor.md, "skills_dir").
status add_skills(const candidate_spec& c, const std::filesystem::path& skills_dir,
                  agent_plan& plan);
// The host files the MCP servers' commands name, each read-only at its sandbox_file().
result<std::vector<sandbox::bundle>> mcp_bundles(const candidate_spec& c);
// Each hook's executable, read-only at candidate_spec::sandbox_hook().
result<std::vector<sandbox::bundle>> hook_bundles(const candidate_spec& c);

// The hooks written for `event`, grouped by matcher in the order first written: each group's
// indexes into candidate_spec::hooks.
struct hook_group {
  std::string matcher;
  std::vector<size_t> hooks;
};
std::vector<std::pair<std::string, std::vector<hook_group>>> hooks_by_event(
    const candidate_spec& c);

// The hooks as Claude Code's and Gemini CLI's settings take them:
// {EVENT: [{matcher (when given), hooks: [{type: command, command: <sandbox path>}]}]}.
json command_hooks(const candidate_spec& c);

}  // namespace agent
}  // namespace evalbox::harness
