#!/bin/sh
# Fails if a binary that starts on every sandbox needs any shared library: both are linked
# -static-pie (cmake/warnings.cmake, evalbox_static_executable), since each shared library
# costs its mapping, relocation and symbol lookups at every start (evalbox-sandbox --help:
# 1.5 ms of CPU with libstdc++, fmt, OpenSSL and libseccomp loaded, 0.55 ms with libc only,
# 0.05 ms static; evalbox --version 3.5 ms with libc and libm, 2.6 ms static).
status=0
for bin in "$@"; do
  readelf -h "$bin" >/dev/null || { echo "FAIL: $bin: not an ELF file"; status=1; continue; }
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  interp=$(readelf -l "$bin" | grep -c 'Requesting program interpreter')
  if [ -z "$needed" ] && [ "$interp" -eq 0 ]; then echo "ok: $bin is static"; continue; fi
  echo "FAIL: $bin needs a loader or shared libraries: $(echo $needed) (link it with evalbox_static_executable)"
  status=1
done
exit $status
