// Fuzzes the strict reader of a judge's answer (harness/judge/answer.h): the answer comes from a
// model that read what the agent wrote. Any bytes yield verdicts or an error; what is accepted
// has exactly one verdict per declared id, in order, each with a non-empty bounded reason, and
// the majority over it is well-formed.
#include "harness/judge/answer.h"
#include "harness/judge/prompt.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  std::string_view text = fuzz::as_text(data, size);
  const std::vector<std::string> ids = {"p1", "p2", "p3"};
  auto v = harness::parse_judge_answer(text, ids);
  if (!v) {
    fuzz::check(!v.error().message.empty(), "an error says what is wrong");
    return 0;
  }
  fuzz::check(v->size() == ids.size(), "one verdict per id");
  for (size_t i = 0; i < ids.size(); ++i) {
    fuzz::check((*v)[i].id == ids[i], "verdicts in the declared order");
    fuzz::check(!(*v)[i].reason.empty(), "a reason");
    fuzz::check((*v)[i].reason.size() <= harness::max_judge_reason_bytes, "a bounded reason");
  }
  const std::vector<std::vector<harness::judge_verdict>> votes{*v, *v, *v};
  auto t = harness::judge_majority(votes, ids);
  fuzz::check(t.size() == ids.size(), "one tally per id");
  for (size_t i = 0; i < t.size(); ++i)
    fuzz::check(t[i].pass + t[i].fail == 3 && t[i].passed == (*v)[i].pass,
                "three agreeing votes decide");
  return 0;
}
