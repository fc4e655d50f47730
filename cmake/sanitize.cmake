# Sanitizer and fuzzer builds. Both are off by default, and then nothing here changes a flag:
# the normal build (and its static/lean link modes, cmake/warnings.cmake) stays as it is.
#
#   -DEVALBOX_SANITIZE=address,undefined   every evalbox target instrumented (scripts/sanitize)
#   -DEVALBOX_FUZZ=ON                      the libFuzzer targets of tests/fuzz (scripts/fuzz);
#                                          needs Clang (CMAKE_CXX_COMPILER=clang++-19)
#
# The flags are added globally (add_compile_options) rather than to evalbox_options so that
# every translation unit of the project is instrumented, tests and their support code included.
set(EVALBOX_SANITIZE "" CACHE STRING
    "Comma-separated sanitizers for every evalbox target, e.g. address,undefined (empty: none)")
option(EVALBOX_FUZZ "Build the libFuzzer targets of tests/fuzz (needs Clang)" OFF)

if(EVALBOX_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "EVALBOX_FUZZ needs Clang for -fsanitize=fuzzer: configure with "
                      "-DCMAKE_CXX_COMPILER=clang++-19 (scripts/fuzz does)")
endif()
if(EVALBOX_FUZZ AND NOT EVALBOX_SANITIZE)
  # A fuzzer without ASan/UBSan only finds crashes; with them it finds the overflows and UB.
  set(EVALBOX_SANITIZE "address,undefined" CACHE STRING "" FORCE)
endif()

if(EVALBOX_SANITIZE)
  string(REPLACE "," ";" evalbox_sanitizers "${EVALBOX_SANITIZE}")
  foreach(s IN LISTS evalbox_sanitizers)
    if(NOT s MATCHES "^(address|undefined|leak)$")
      message(FATAL_ERROR "EVALBOX_SANITIZE: unknown sanitizer '${s}' "
                          "(use a comma-separated list of address, undefined, leak)")
    endif()
  endforeach()
  set(evalbox_sanitize_flags "-fsanitize=${EVALBOX_SANITIZE}")
  if("undefined" IN_LIST evalbox_sanitizers)
    # A UB finding must fail the test that hit it, not scroll by in its log.
    list(APPEND evalbox_sanitize_flags -fno-sanitize-recover=all)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # Clang's `undefined` includes it; GCC's does not. A double too large for the integer it
      # is converted to (a token count of 1e300 in a transcript) is exactly what hostile
      # input produces.
      list(APPEND evalbox_sanitize_flags -fsanitize=float-cast-overflow)
    endif()
  endif()
  add_compile_options(${evalbox_sanitize_flags} -fno-omit-frame-pointer)
  add_link_options(${evalbox_sanitize_flags})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # Clang links UBSan's C++ part (vptr checks) only when asked to.
    add_link_options(-fsanitize-link-c++-runtime)
  endif()
endif()

if(EVALBOX_FUZZ)
  # Coverage feedback for every library a fuzz target links; the targets add -fsanitize=fuzzer
  # (which brings libFuzzer's main) themselves (tests/fuzz/CMakeLists.txt).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
