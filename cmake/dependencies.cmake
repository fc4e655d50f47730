# Every library evalbox's build uses, found here and nowhere else, each REQUIRED: a missing one
# stops the configure with its name (scripts/bootstrap installs them all) instead of dropping a
# target. The tests' and benchmarks' own are found only when those are built
# (EVALBOX_BUILD_TESTS, EVALBOX_BUILD_BENCH). Libraries linked statically into the lean
# binaries (the evalbox binary loads no shared library but libc's: lean_binaries.sh) are
# wrapped in evalbox_* targets.
find_package(PkgConfig REQUIRED)
# Static C++ and crypto libraries: see evalbox_static_executable (cmake/warnings.cmake).
set(OPENSSL_USE_STATIC_LIBS TRUE)
find_package(OpenSSL 3 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
find_package(yaml-cpp REQUIRED)
find_library(EVALBOX_YAML_CPP_STATIC NAMES libyaml-cpp.a)
if(EVALBOX_YAML_CPP_STATIC)
  add_library(evalbox_yaml_cpp STATIC IMPORTED)
  set_target_properties(evalbox_yaml_cpp PROPERTIES
    IMPORTED_LOCATION ${EVALBOX_YAML_CPP_STATIC}
    INTERFACE_INCLUDE_DIRECTORIES "$<TARGET_PROPERTY:yaml-cpp,INTERFACE_INCLUDE_DIRECTORIES>")
else()
  add_library(evalbox_yaml_cpp ALIAS yaml-cpp)
endif()
# RE2 (every regular expression of a fixture): static, like yaml-cpp, for the lean binaries.
find_path(EVALBOX_RE2_INCLUDE NAMES re2/re2.h REQUIRED)
find_library(EVALBOX_RE2_LIBRARY NAMES libre2.a re2 REQUIRED)
add_library(evalbox_re2 UNKNOWN IMPORTED)
set_target_properties(evalbox_re2 PROPERTIES
  IMPORTED_LOCATION ${EVALBOX_RE2_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${EVALBOX_RE2_INCLUDE}
  INTERFACE_LINK_LIBRARIES Threads::Threads)
# toml++ (a Harbor task's task.toml, registries.conf), header-only. Every file that includes it
# must agree on its configuration (its inline functions differ with TOML_EXCEPTIONS: two
# settings in one binary break the one-definition rule), so it is set here, for all: errors as
# values, a parse_result, never an exception.
find_path(EVALBOX_TOMLPP_INCLUDE NAMES toml++/toml.h REQUIRED)
add_library(evalbox_tomlplusplus INTERFACE)
target_include_directories(evalbox_tomlplusplus SYSTEM INTERFACE ${EVALBOX_TOMLPP_INCLUDE})
target_compile_definitions(evalbox_tomlplusplus INTERFACE TOML_HEADER_ONLY=1 TOML_EXCEPTIONS=0)
# RapidJSON (the lexer of results.jsonl's lines, harness/results/fast_json.cpp), header-only.
find_path(EVALBOX_RAPIDJSON_INCLUDE NAMES rapidjson/reader.h REQUIRED)
add_library(evalbox_rapidjson INTERFACE)
target_include_directories(evalbox_rapidjson SYSTEM INTERFACE ${EVALBOX_RAPIDJSON_INCLUDE})
# Boost: Beast and Asio (a judge's HTTP(S) request, harness/judge/http.cpp), header-only.
find_package(Boost 1.74 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)

# libarchive (sandbox/image only), linked statically with the two compression libraries it
# needs for what evalbox reads (gzip: zlib, zstd: libzstd); only the reader, tar, raw and the
# two filters are pulled from libarchive.a (its disk writer, xar/xml, ACL and crypto parts are
# not).
pkg_check_modules(LIBARCHIVE REQUIRED libarchive)
find_library(EVALBOX_LIBARCHIVE_STATIC NAMES libarchive.a REQUIRED)
find_library(EVALBOX_ZSTD_STATIC NAMES libzstd.a REQUIRED)  # libzstd-dev
find_library(EVALBOX_Z_STATIC NAMES libz.a REQUIRED)         # zlib1g-dev
add_library(evalbox_libarchive INTERFACE)
target_include_directories(evalbox_libarchive SYSTEM INTERFACE ${LIBARCHIVE_INCLUDE_DIRS})
target_link_libraries(evalbox_libarchive INTERFACE ${EVALBOX_LIBARCHIVE_STATIC}
                      ${EVALBOX_ZSTD_STATIC} ${EVALBOX_Z_STATIC})

# expat (harness/grading: JUnit XML reports of tests: checks), linked statically.
find_path(EVALBOX_EXPAT_INCLUDE NAMES expat.h REQUIRED)
find_library(EVALBOX_EXPAT_STATIC NAMES libexpat.a REQUIRED)
add_library(evalbox_expat INTERFACE)
target_include_directories(evalbox_expat SYSTEM INTERFACE ${EVALBOX_EXPAT_INCLUDE})
target_link_libraries(evalbox_expat INTERFACE ${EVALBOX_EXPAT_STATIC})

if(EVALBOX_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)  # tests/harness/fixture/example_logic.py
endif()
if(EVALBOX_BUILD_BENCH)
  find_package(benchmark REQUIRED)  # libbenchmark-dev; -DEVALBOX_BUILD_BENCH=OFF builds without
endif()
