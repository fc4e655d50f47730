// The adapter registry and helpers shared by adapters.
#include "harness/agent/adapter.h"

#include <unistd.h>

#include "base/fs.h"

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

std::optional<std::filesystem::path> resolve_program(const std::string& name,
                                                     const std::filesystem::path& suite_file) {
  if (name.empty()) return std::nullopt;
  if (name.front() == '/') return std::filesystem::path(name);
  if (name.find('/') != std::string::npos)
    return normalize(std::filesystem::path(suite_file).parent_path() / name);
  return std::filesystem::path(name);
}

std::vector<config_error> validate_argv(const candidate_spec& c, std::string_view example) {
  std::vector<config_error> errors;
  const setting* argv = c.find("argv");
  if (!argv) {
    errors.push_back({c.where,
                      fmt::format("candidate '{}' (adapter {}) has no argv", c.id, c.adapter),
                      fmt::format("add argv: {}", example)});
    return errors;
  }
  if (!argv->value.is_array() || argv->value.empty()) {
    errors.push_back({argv->where, "argv must be a non-empty list of strings",
                      fmt::format("e.g. argv: {}", example)});
    return errors;
  }
  for (const auto& a : argv->value)
    if (!a.is_string()) {
      errors.push_back({argv->where, "argv must be a list of strings", "quote numbers"});
      return errors;
    }
  // A bare name is found in the sandbox when the program starts; a path must be a host file.
  auto prog = resolve_program(argv->value.at(0).get<std::string>(), c.where.file);
  if (!prog || (prog->is_absolute() && ::access(prog->c_str(), X_OK) != 0))
    errors.push_back({argv->where,
                      fmt::format("program '{}' is not an executable file",
                                  argv->value.at(0).get<std::string>()),
                      "give an absolute path, a path relative to the suite file, or a bare name "
                      "to find on the sandbox's PATH; check chmod +x"});
  return errors;
}

result<std::vector<std::string>> planned_argv(const candidate_spec& c, std::string_view prompt) {
  const setting* argv = c.find("argv");
  if (!argv || !argv->value.is_array() || argv->value.empty())
    return make_error(error_kind::invalid_argument, "candidate {} has no argv", c.id);
  std::vector<std::string> args;
  for (const auto& a : argv->value) {
    if (!a.is_string())
      return make_error(error_kind::invalid_argument,
                        "candidate {}: argv must be a list of strings", c.id);
    args.push_back(a.get<std::string>());
  }
  auto prog = resolve_program(args[0], c.where.file);
  if (!prog)
    return make_error(error_kind::not_found, "candidate {}: program '{}' not found", c.id, args[0]);
  args[0] = prog->string();
  return substitute_prompt(args, prompt);
}

}  // namespace agent
}  // namespace evalbox::harness
