# Warnings and hardening for every evalbox target (evalbox_options is linked by each library).
add_library(evalbox_options INTERFACE)
target_include_directories(evalbox_options INTERFACE ${PROJECT_SOURCE_DIR})
target_compile_options(evalbox_options INTERFACE
  -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wno-missing-field-initializers
  -fstack-protector-strong -fstack-clash-protection -fcf-protection
  $<$<BOOL:${EVALBOX_WERROR}>:-Werror>)
target_compile_definitions(evalbox_options INTERFACE
  $<$<NOT:$<CONFIG:Debug>>:_FORTIFY_SOURCE=2> _GLIBCXX_ASSERTIONS)
target_link_options(evalbox_options INTERFACE -Wl,-z,relro,-z,now)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
