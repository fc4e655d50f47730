// Skills, MCP servers and hooks as bundles, and their refusals (see extensions.h).
#include "harness/agent/extensions.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/digest.h"
#include "base/json.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::harness {
inline namespace agent {

namespace fs = std::filesystem;

std::vector<config_error> unsupported_extensions(const candidate_spec& c,
                                                 const extension_support& why_not) {
  std::vector<config_error> errors;
  auto refuse = [&](bool written, const source_location& where, std::string_view key,
                    const std::string& why) {
    if (!written || why.empty()) return;
    errors.push_back({where, fmt::format("adapter {} cannot take {}: {}", c.adapter, key, why),
                      fmt::format("remove {} from candidate {}", key, c.id)});
  };
  refuse(!c.skills.empty(), c.skills_where, "skills", why_not.skills);
  refuse(!c.mcp_servers.empty(), c.mcp_servers_where, "mcp_servers", why_not.mcp_servers);
  refuse(!c.hooks.empty(), c.hooks_where, "hooks", why_not.hooks);
  return errors;
}

std::vector<mcp_server_spec> run_mcp_servers(const run_context& ctx) {
  std::vector<mcp_server_spec> out = ctx.candidate.mcp_servers;
  if (ctx.fixture.harbor)
    for (const auto& m : ctx.fixture.harbor->mcp_servers)
      if (std::none_of(out.begin(), out.end(), [&](const auto& o) { return o.name == m.name; }))
        out.push_back(m);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

status add_skills(const candidate_spec& c, const fs::path& skills_dir, agent_plan& plan) {
  plan.skills_dir = skills_dir;
  for (const auto& s : c.skills)
    plan.bundles.push_back({s.dir, EB_TRY_CTX(tree_digest(s.dir), fmt::format("skill {}", s.name)),
                            fs::path(sandbox::sandbox_home) / skills_dir / s.name});
  return {};
}

result<std::vector<sandbox::bundle>> mcp_bundles(const candidate_spec& c) {
  std::vector<sandbox::bundle> out;
  for (const auto& m : c.mcp_servers)
    for (const auto& [index, file] : m.files)
      out.push_back({file, EB_TRY_CTX(tree_digest(file), fmt::format("MCP server {}", m.name)),
                     m.sandbox_file(index)});
  return out;
}

result<std::vector<sandbox::bundle>> hook_bundles(const candidate_spec& c) {
  std::vector<sandbox::bundle> out;
  for (size_t i = 0; i < c.hooks.size(); ++i)
    out.push_back({c.hooks[i].script,
                   EB_TRY_CTX(tree_digest(c.hooks[i].script),
                              fmt::format("hook {} ({})", c.hooks[i].event, c.hooks[i].command)),
                   c.sandbox_hook(i)});
  return out;
}

std::vector<std::pair<std::string, std::vector<hook_group>>> hooks_by_event(
    const candidate_spec& c) {
  std::vector<std::pair<std::string, std::vector<hook_group>>> out;
  for (size_t i = 0; i < c.hooks.size(); ++i) {
    const auto& h = c.hooks[i];
    auto ev =
        std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == h.event; });
    if (ev == out.end()) ev = out.insert(out.end(), {h.event, {}});
    auto g = std::find_if(ev->second.begin(), ev->second.end(),
                          [&](const hook_group& x) { return x.matcher == h.matcher; });
    if (g == ev->second.end()) g = ev->second.insert(ev->second.end(), {h.matcher, {}});
    g->hooks.push_back(i);
  }
  return out;
}

json command_hooks(const candidate_spec& c) {
  json hooks = json::object();
  for (const auto& [event, groups] : hooks_by_event(c)) {
    json list = json::array();
    for (const auto& g : groups) {
      json commands = json::array();
      for (size_t i : g.hooks)
        commands.push_back({{"type", "command"}, {"command", c.sandbox_hook(i).string()}});
      json entry = {{"hooks", commands}};
      if (!g.matcher.empty()) entry["matcher"] = g.matcher;
      list.push_back(std::move(entry));
    }
    hooks[event] = std::move(list);
  }
  return hooks;
}

}  // namespace agent
}  // namespace evalbox::harness
