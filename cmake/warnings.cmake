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

# For the two binaries that start on every sandbox (evalbox and evalbox-sandbox): no dynamic
# loader at all (-static-pie). Start-up was mostly the loader resolving C++ symbols across
# libstdc++, fmt, yaml-cpp and OpenSSL (evalbox-sandbox --help: 1.5 ms of CPU), then, with
# only libc left shared, relocating and binding against libc and libm (0.55 ms; static
# 0.05 ms; `evalbox --version` 3.5 -> 2.6 ms). The NSS calls, getaddrinfo for allow-listed
# host names in the helper and for a judge's URL in evalbox, and OpenSSL's dlopen of an
# engine, load their modules at run time from this same glibc. (-static-pie links libstdc++
# and libgcc statically by itself; adding -static-libstdc++/-static-libgcc to it yields a
# binary that crashes at start.) fmt's compiled part comes in as objects, since Debian ships
# fmt only as a shared library.
function(evalbox_static_executable target)
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:evalbox_fmt_runtime>)
  set_target_properties(${target} PROPERTIES EVALBOX_STATIC ON)
  if(EVALBOX_SANITIZE)
    return()  # ASan and UBSan do not support -static-pie: linked dynamically under them
  endif()
  target_link_options(${target} PRIVATE -static-pie)
endfunction()
