// Where the transcript tests find their captures and golden files; the comparison itself is
// tests/support/golden.h.
#pragma once

#include <filesystem>

#include "tests/support/golden.h"

namespace evalbox::testing {

inline std::filesystem::path transcript_data_dir() {
  return std::filesystem::path(EVALBOX_SOURCE_DIR) / "tests/data/transcripts";
}

}  // namespace evalbox::testing
