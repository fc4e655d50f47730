// Fixture patterns: RE2 syntax and its refusals with a place and a hint, grep-like anchors, any
// bytes as input, and hostile input that neither crashes nor stalls.
#include "harness/config/pattern.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace evalbox::harness {
namespace {

pattern compiled(std::string_view source) {
  auto p = pattern::compile(source);
  EXPECT_TRUE(p) << source << ": " << (p ? "" : p.error().what);
  return p ? std::move(*p) : pattern();
}

bool matches(std::string_view source, std::string_view text) {
  auto found = compiled(source).search(text);
  EXPECT_TRUE(found) << found.error().message;
  return found.value_or(false);
}

TEST(Pattern, SearchesAnywhereUnlessAnchored) {
  EXPECT_TRUE(matches("b+", "aaabbbccc"));
  EXPECT_FALSE(matches("^b", "abc"));
  EXPECT_TRUE(matches("(?i)HELLO", "well, hello"));
  EXPECT_EQ(compiled("a.c").source(), "a.c") << "the source is kept as written";
}

// `^` and `$` are line anchors, as in grep: a file holding "hello, world\n" matches
// `^hello, world$`, and so does a line in the middle of a file. \A and \z anchor the text.
TEST(Pattern, CaretAndDollarMatchAtLineBoundaries) {
  EXPECT_TRUE(matches("^hello, world$", "hello, world\n"));
  EXPECT_TRUE(matches("^hello, world$", "first\nhello, world\nlast"));
  EXPECT_TRUE(matches("^42$", "42"));
  EXPECT_FALSE(matches("^world", "hello, world\n"));
  EXPECT_TRUE(matches("\\Ahello", "hello\nx"));
  EXPECT_FALSE(matches("\\Ahello", "x\nhello"));
  EXPECT_TRUE(matches("done\\n\\z", "all\ndone\n"));
  EXPECT_FALSE(matches("(?-m)^b$", "a\nb\nc")) << "(?-m) turns line anchors off";
  // `.` stays within a line; (?s) lets it cross.
  EXPECT_FALSE(matches("a.b", "a\nb"));
  EXPECT_TRUE(matches("(?s)a.b", "a\nb"));
}

TEST(Pattern, InputIsBytesInvalidUtf8Included) {
  const std::string bad = "name: bad-\xff-name.txt\n";
  EXPECT_TRUE(matches("^name: bad-", bad));
  EXPECT_TRUE(matches("name\\.txt$", bad));
  EXPECT_FALSE(matches("bad-.-name", bad)) << "'.' is one UTF-8 character, not a stray byte";
  EXPECT_TRUE(matches("bad-\\C-name", bad)) << "\\C is any byte";
  EXPECT_TRUE(matches("caf\xc3\xa9", "un caf\xc3\xa9"));
}

TEST(Pattern, AnUncompiledPatternCannotSearch) {
  pattern p;
  EXPECT_FALSE(p.compiled());
  auto found = p.search("x");
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, error_kind::internal);
}

struct refusal {
  const char* source;
  const char* what;          // RE2's message, without evalbox's (?m)
  std::optional<size_t> at;  // where in the source
  const char* hint_contains;
};

TEST(Pattern, RefusalsSayWhatWhereAndWhatToDo) {
  const refusal cases[] = {
      {"(a|b", "missing ): (a|b", std::nullopt, "RE2"},
      {"ab)", "unexpected ): ab)", std::nullopt, "RE2"},
      {"x{1001}", "invalid repetition size: {1001}", 1, "RE2"},
      {"(\\w+) \\1", "invalid escape sequence: \\1", 6, "no backreferences"},
      {"foo(?=bar)", "invalid perl operator: (?=", 3, "no lookahead or lookbehind"},
      {"(?<!x)y", "invalid perl operator: (?<", 0, "no lookahead or lookbehind"},
      {"[z-a]", "invalid character class range: z-a", 1, "RE2"},
      {"a**", "bad repetition operator: **", 1, "RE2"},
      {"ab\\", "trailing \\", 2, "RE2"},
  };
  for (const auto& c : cases) {
    auto p = pattern::compile(c.source);
    ASSERT_FALSE(p) << c.source;
    EXPECT_EQ(p.error().what, c.what) << c.source;
    EXPECT_EQ(p.error().offset, c.at) << c.source;
    EXPECT_NE(p.error().hint().find(c.hint_contains), std::string::npos)
        << c.source << ": " << p.error().hint();
  }
}

TEST(Pattern, APatternNeedingMoreThanItsMemoryDoesNotCompile) {
  // 1000 repetitions of a 200-way alternation: a program far beyond 32 MiB.
  std::string big = "(?:";
  for (int i = 0; i < 200; ++i) big += "[a-z]{5}q" + std::to_string(i) + "|";
  big += "x){1000}";
  auto p = pattern::compile(big);
  ASSERT_FALSE(p);
  EXPECT_FALSE(p.error().what.empty());
}

// What crashed std::regex (a recursion per character: SIGSEGV on a megabyte of "abab...c")
// and the classic catastrophic-backtracking shapes, on multi-megabyte agent-written text. The
// results are asserted; bench/ has the timing (harness_bench).
TEST(Pattern, AdversarialInputNeitherCrashesNorStalls) {
  std::string abab;
  abab.reserve(4u << 20);
  for (size_t i = 0; i < (4u << 20); ++i) abab += (i % 2) ? 'b' : 'a';
  EXPECT_TRUE(matches("(a|b)*c", abab + "c"));
  EXPECT_FALSE(matches("(a|b)*c", abab));
  EXPECT_TRUE(matches("^(a|b)*c$", abab + "c\n"));
  EXPECT_FALSE(matches("(a*)*c", std::string(4u << 20, 'a')));
  EXPECT_FALSE(matches("(x+x+)+y", std::string(4u << 20, 'x')));
  EXPECT_FALSE(matches("(.*){40}zzz", abab));
  EXPECT_TRUE(matches("[a-q][^u-z]{13}x", abab + "aaaaaaaaaaaaaax"));
  std::string lines;
  for (int i = 0; i < 200000; ++i) lines += "line " + std::to_string(i) + "\n";
  EXPECT_TRUE(matches("^line 199999$", lines));
  EXPECT_FALSE(matches("^line 200000$", lines));
}

}  // namespace
}  // namespace evalbox::harness
