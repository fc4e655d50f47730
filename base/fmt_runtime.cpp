// fmt's compiled part (the functions its headers only declare), built into evalbox and
// evalbox-sandbox so that they need no libfmt.so: with libstdc++ and the other C++ libraries
// linked statically, the dynamic loader then maps only libc (see evalbox_lean_executable in
// cmake/warnings.cmake). Debian ships fmt as a shared library only.
#include <fmt/format-inl.h>

// The two function templates evalbox uses that fmt instantiates only inside its library.
template fmt::detail::thousands_sep_result<char> fmt::detail::thousands_sep_impl<char>(
    fmt::detail::locale_ref);
template char fmt::detail::decimal_point_impl<char>(fmt::detail::locale_ref);
