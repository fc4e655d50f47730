#!/bin/sh
# Fails if a binary that starts on every sandbox needs a shared library other than the C
# library's (libc, libm, the loader; evalbox-sandbox is fully static): each shared C++
# library costs its symbol lookups at every start (evalbox-sandbox --help: 1.5 ms of CPU
# with libstdc++, fmt, OpenSSL and libseccomp loaded, 0.55 ms with libc only, 0.4 static).
status=0
for bin in "$@"; do
  readelf -h "$bin" >/dev/null || { echo "FAIL: $bin: not an ELF file"; status=1; continue; }
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if [ -z "$needed" ]; then echo "ok: $bin is static"; continue; fi
  for lib in $needed; do
    case "$lib" in
      libc.so.*|libm.so.*|ld-linux*) ;;
      *) echo "FAIL: $bin needs $lib (link it statically: evalbox_lean_executable)"; status=1 ;;
    esac
  done
  [ $status -eq 0 ] && echo "ok: $bin needs only: $(echo $needed)"
done
exit $status
