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

# For the two binaries that start on every sandbox (evalbox and evalbox-sandbox): start-up is
# mostly the dynamic loader resolving C++ symbols across libstdc++, fmt, yaml-cpp and OpenSSL.
# Linked against the static C++ libraries (and fmt's compiled part, which Debian ships only
# shared), only libc is left to load: evalbox-sandbox --help went from 1.5 to 0.55 ms of CPU.
# --as-needed drops the shared libraries nothing references any more.
function(evalbox_lean_executable target)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:evalbox_fmt_runtime>)
  if(EVALBOX_SANITIZE)
    return()  # the sanitizer runtimes are shared libraries; a static libstdc++ hides new/delete
  endif()
  target_link_options(${target} PRIVATE -Wl,--as-needed -static-libstdc++ -static-libgcc)
endfunction()

# The helper goes further: no dynamic loader at all (-static-pie). Its one NSS call,
# getaddrinfo for allow-listed host names, loads libnss_* at run time from this same glibc.
# evalbox-sandbox --help: 0.55 ms of CPU with libc loaded, 0.05 ms static. (-static-pie
# links libstdc++ and libgcc statically by itself; adding -static-libstdc++/-static-libgcc
# to it yields a binary that crashes at start.)
function(evalbox_static_executable target)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:evalbox_fmt_runtime>)
  set_target_properties(${target} PROPERTIES EVALBOX_STATIC ON)
  if(EVALBOX_SANITIZE)
    return()  # ASan and UBSan do not support -static-pie: linked dynamically under them
  endif()
  target_link_options(${target} PRIVATE -static-pie)
endfunction()
