// Shared by the libFuzzer targets of tests/fuzz: the input as text, a check that turns a broken
// invariant into a crash libFuzzer keeps, the round trip every normalized transcript must
// survive, and a per-process scratch directory for the loaders that read files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "harness/transcripts/transcript.h"

namespace evalbox::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Aborts with `what` when `ok` is false: libFuzzer records the input as a crash.
void check(bool ok, std::string_view what);

// What the harness does with every transcript a parser returns: writes transcript.jsonl,
// which grading and report.html read back. The text must read back to the same transcript,
// and the grading queries must answer on it.
void check_transcript(const harness::transcript& t);

// A directory private to this process (created on first use under $TMPDIR, removed at exit).
const std::filesystem::path& scratch_dir();

}  // namespace evalbox::fuzz
