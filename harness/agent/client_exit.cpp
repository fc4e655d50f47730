// Explaining and merging the launches of an agent CLI client (see client_exit.h).
#include "harness/agent/client_exit.h"

#include <fmt/format.h>

#include <utility>

#include "harness/agent/native.h"

namespace evalbox::harness {
inline namespace agent {

void explain_client_exit(transcript& t, const agent_output& launch, const agent_client& client) {
  if (t.completed) return;
  const bool only_interrupted = !t.error || t.error->starts_with("interrupted");
  if (launch.exited && launch.exit_code != 0 && only_interrupted) {
    // The reason is on stderr only: it beats the parser's "no final event".
    std::string why =
        tail_lines(launch.stderr_path, client_stderr_lines, [&](std::string_view line) {
          return !line.empty() && (!client.keep_stderr_line || client.keep_stderr_line(line));
        });
    if (!why.empty())
      t.error = fmt::format("{} exited with status {}: {}", client.name, launch.exit_code, why);
    else if (!t.error)
      t.error = fmt::format("{} exited with status {}", client.name, launch.exit_code);
  }
  if (!launch.exited) {
    // Killed by a limit or a signal: say so, the parser only sees a stream that stops.
    t.error = fmt::format("{} was killed before it finished ({})", client.name,
                          t.error.value_or("no final event"));
  } else if (!t.error) {
    t.error = fmt::format("{} stopped without a final event", client.name);
  }
}

void merge_launch(transcript& run, transcript launch) {
  for (auto& s : launch.steps) run.steps.push_back(std::move(s));
  run.total += launch.total;
  if (launch.final_message) run.final_message = std::move(launch.final_message);
  if (!run.error && launch.error) run.error = std::move(launch.error);
  for (const auto& [type, n] : launch.unknown_events) run.unknown_events[type] += n;
  run.malformed_lines += launch.malformed_lines;
  if (run.session_id.empty()) run.session_id = std::move(launch.session_id);
  if (!launch.model.empty()) run.model = std::move(launch.model);
  if (launch.duration_ms) run.duration_ms = run.duration_ms.value_or(0) + *launch.duration_ms;
  if (launch.num_turns) run.num_turns = run.num_turns.value_or(0) + *launch.num_turns;
  run.completed = launch.completed;
}

result<transcript> merge_launches(
    std::string_view agent, const std::vector<agent_output>& outputs, const agent_client& client,
    const std::function<result<transcript>(const agent_output& launch)>& parse) {
  transcript run;
  run.agent = std::string(agent);
  for (const auto& launch : outputs) {
    auto part = EB_TRY(parse(launch));
    explain_client_exit(part, launch, client);
    merge_launch(run, std::move(part));
  }
  return run;
}

void finish_run_transcript(transcript& run) {
  if (run.error) run.final_message.reset();
  renumber_steps(run);
}

}  // namespace agent
}  // namespace evalbox::harness
