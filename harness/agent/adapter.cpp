// The adapter registry and helpers shared by adapters.
#include "harness/agent/adapter.h"

#include <algorithm>

namespace evalbox::harness {
inline namespace agent {

void adapter_registry::add(std::unique_ptr<adapter> a) { adapters_.push_back(std::move(a)); }

const adapter* adapter_registry::find(std::string_view id) const {
  for (const auto& a : adapters_)
    if (a->id() == id) return a.get();
  return nullptr;
}

std::vector<std::string> adapter_registry::ids() const {
  std::vector<std::string> out;
  for (const auto& a : adapters_) out.emplace_back(a->id());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> substitute_prompt(const std::vector<std::string>& argv,
                                           std::string_view prompt) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (std::string arg : argv) {
    for (size_t pos = arg.find("{prompt}"); pos != std::string::npos;
         pos = arg.find("{prompt}", pos + prompt.size()))
      arg.replace(pos, 8, prompt);
    out.push_back(std::move(arg));
  }
  return out;
}

config_error unknown_setting(const candidate_spec& c, const std::string& key,
                             const std::vector<std::string>& known) {
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  const setting* s = c.find(key);
  return config_error{
      s ? s->where : c.where, fmt::format("unknown setting '{}' for adapter '{}'", key, c.adapter),
      known.empty() ? "this adapter takes no settings" : fmt::format("known settings: {}", list)};
}

}  // namespace agent
}  // namespace evalbox::harness
