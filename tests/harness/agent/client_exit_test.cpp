// How a client's launches end up in the run's transcript, the same for every CLI adapter: the
// exit explained (stderr tail, status, killed, unfinished), launches merged in order, and no
// final answer beside an error.
#include "harness/agent/client_exit.h"

#include <gtest/gtest.h>

#include "base/fs.h"
#include "base/log.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

transcript part(std::string session, std::string model, int steps, uint64_t in,
                std::optional<std::string> final_message, bool completed) {
  transcript t;
  t.session_id = std::move(session);
  t.model = std::move(model);
  for (int i = 0; i < steps; ++i) t.steps.push_back(step{.index = i, .message = "m"});
  t.total.input_tokens = in;
  t.final_message = std::move(final_message);
  t.completed = completed;
  t.malformed_lines = 1;
  t.unknown_events["x"] = 2;
  t.duration_ms = 10;
  return t;
}

class ClientExit : public ::testing::Test {
 protected:
  // A launch whose stderr holds `err`.
  agent_output launch(int exit_code, bool exited, std::string_view err = "") {
    EXPECT_TRUE(write_file(dir_.path() / "err", err));
    return {dir_.path() / "out", dir_.path() / "err", dir_.path(), dir_.path(), exit_code, exited};
  }
  // An unfinished stream as every parser leaves it.
  static transcript interrupted() {
    transcript t;
    t.error = "interrupted: no final event";
    return t;
  }
  temp_dir dir_;
  agent_client client_{"tool", [](std::string_view line) { return line != "chatter"; }};
};

TEST_F(ClientExit, ANonZeroExitBeforeTheFirstEventQuotesTheLastStderrLines) {
  auto t = interrupted();
  explain_client_exit(t, launch(3, true, "chatter\none\n\ntwo\nthree\nfour\nfive\nsix\nchatter\n"),
                      client_);
  EXPECT_EQ(t.error, "tool exited with status 3: two | three | four | five | six");
  EXPECT_FALSE(t.completed);
}

TEST_F(ClientExit, ANonZeroExitWithNothingOnStderrSaysTheStatus) {
  transcript t;  // a parser that leaves no error of its own
  explain_client_exit(t, launch(2, true, "chatter\n\n"), client_);
  EXPECT_EQ(t.error, "tool exited with status 2");
}

TEST_F(ClientExit, ANonZeroExitKeepsTheInterruptionWhenStderrIsSilent) {
  auto t = interrupted();
  explain_client_exit(t, launch(2, true, ""), client_);
  EXPECT_EQ(t.error, "interrupted: no final event");
}

TEST_F(ClientExit, TheClientsOwnErrorBeatsItsStderr) {
  transcript t;
  t.error = "API Error: 500 upstream";
  explain_client_exit(t, launch(1, true, "Error: something\n"), client_);
  EXPECT_EQ(t.error, "API Error: 500 upstream");
}

TEST_F(ClientExit, AKilledClientSaysSoWithWhatTheStreamShowed) {
  auto t = interrupted();
  explain_client_exit(t, launch(0, false, "Error: ignored\n"), client_);
  EXPECT_EQ(t.error, "tool was killed before it finished (interrupted: no final event)");
  transcript bare;
  explain_client_exit(bare, launch(0, false), client_);
  EXPECT_EQ(bare.error, "tool was killed before it finished (no final event)");
}

TEST_F(ClientExit, AnUnfinishedStreamWithoutAnErrorIsStillAnError) {
  transcript t;
  explain_client_exit(t, launch(0, true), client_);
  EXPECT_EQ(t.error, "tool stopped without a final event");
}

TEST_F(ClientExit, ACompletedTranscriptIsLeftAlone) {
  transcript t;
  t.completed = true;
  t.final_message = "done";
  explain_client_exit(t, launch(1, true, "Error: late\n"), client_);
  EXPECT_FALSE(t.error);
  EXPECT_EQ(t.final_message, "done");
  explain_client_exit(t, launch(0, false), client_);
  EXPECT_FALSE(t.error);
}

TEST_F(ClientExit, StderrIsScrubbedOfSecrets) {
  log::redact_secret("sk-client-exit-31337");
  auto t = interrupted();
  explain_client_exit(t, launch(1, true, "bad key sk-client-exit-31337\n"), client_);
  ASSERT_TRUE(t.error);
  EXPECT_EQ(t.error->find("sk-client-exit-31337"), std::string::npos) << *t.error;
  EXPECT_NE(t.error->find("<redacted>"), std::string::npos) << *t.error;
}

// A client with no filter keeps every non-empty line.
TEST_F(ClientExit, WithoutAFilterEveryNonEmptyLineCounts) {
  auto t = interrupted();
  explain_client_exit(t, launch(1, true, "chatter\n\nreal\n"), agent_client{"plain", {}});
  EXPECT_EQ(t.error, "plain exited with status 1: chatter | real");
}

TEST(MergeLaunch, AddsUpAndKeepsTheFirstSessionAndTheLatestAnswer) {
  transcript run;
  merge_launch(run, part("s-1", "m-1", 2, 20, "first", true));
  merge_launch(run, part("s-2", "m-2", 1, 5, std::nullopt, true));
  finish_run_transcript(run);
  EXPECT_EQ(run.session_id, "s-1");
  EXPECT_EQ(run.model, "m-2");
  ASSERT_EQ(run.steps.size(), 3u);
  EXPECT_EQ(run.steps[2].index, 2);
  EXPECT_EQ(run.total.input_tokens, 25u);
  EXPECT_EQ(run.malformed_lines, 2);
  EXPECT_EQ(run.unknown_events["x"], 4);
  EXPECT_EQ(run.duration_ms, 20u);
  // The follow-up gave no answer of its own: the last answer given stands.
  EXPECT_EQ(run.final_message, "first");
  EXPECT_TRUE(run.completed);
  EXPECT_FALSE(run.error);
}

TEST(MergeLaunch, TheFirstErrorWinsAndNoAnswerStandsBesideIt) {
  transcript run;
  auto a = part("s", "m", 1, 1, "answer", true);
  auto b = part("s", "m", 1, 1, std::nullopt, false);
  b.error = "tool was killed before it finished (interrupted: no final event)";
  merge_launch(run, a);
  merge_launch(run, b);
  auto c = part("s", "m", 0, 1, "late", true);
  c.error = "second error";
  merge_launch(run, c);
  finish_run_transcript(run);
  EXPECT_EQ(run.error, "tool was killed before it finished (interrupted: no final event)");
  EXPECT_FALSE(run.final_message);
  EXPECT_TRUE(run.completed);  // the latest launch's
}

TEST_F(ClientExit, MergeLaunchesExplainsEachLaunchThenMergesInOrder) {
  std::vector<agent_output> outputs = {launch(0, true), launch(0, false)};
  int calls = 0;
  auto run =
      merge_launches("tool", outputs, client_, [&](const agent_output&) -> result<transcript> {
        // The first launch finishes its turn; the follow-up is cut off.
        if (calls++ == 0) return part("s-1", "m", 1, 10, "first answer", true);
        return interrupted();
      });
  ASSERT_TRUE(run) << run.error().message;
  finish_run_transcript(*run);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(run->agent, "tool");
  EXPECT_EQ(run->error, "tool was killed before it finished (interrupted: no final event)");
  EXPECT_FALSE(run->final_message);
  EXPECT_FALSE(run->completed);
  EXPECT_EQ(run->session_id, "s-1");
}

TEST_F(ClientExit, MergeLaunchesStopsAtAnOutputThatCannotBeParsed) {
  std::vector<agent_output> outputs = {launch(0, true), launch(0, true)};
  int calls = 0;
  auto run =
      merge_launches("tool", outputs, client_, [&](const agent_output&) -> result<transcript> {
        ++calls;
        return make_error(error_kind::invalid_argument, "header names another schema");
      });
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().message, "header names another schema");
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace evalbox::harness
