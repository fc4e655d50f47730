# Installing evalbox (`cmake --install`) and packaging it (CPack: a Debian package; the OCI
# image is built from that package by scripts/package). evalbox finds its helper beside itself
# (sandbox/launch/launcher.cpp), so both binaries go to the same directory.
include(GNUInstallDirs)
install(TARGETS evalbox evalbox-sandbox RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/fixtures/examples
        DESTINATION ${CMAKE_INSTALL_DATADIR}/evalbox
        USE_SOURCE_PERMISSIONS)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME evalbox)
set(CPACK_PACKAGE_VENDOR evalbox)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "evaluate coding agents on fixtures, each run in an isolated rootless sandbox")
set(CPACK_PACKAGE_DESCRIPTION
    "evalbox runs coding agents (Codex CLI, Claude Code, Gemini CLI, any command) on fixtures, \
each run in its own Linux sandbox (user, mount, pid and net namespaces, Landlock, seccomp, \
limits) without a daemon and, where user namespaces are allowed, without root; it grades what \
the agent left and reports with honest statistics. Includes the example fixtures.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "evalbox maintainers <evalbox@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# libc6 (and libm) from dpkg-shlibdeps: libstdc++, OpenSSL, yaml-cpp and Boost are linked in.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# What the example fixtures' setup and graders run; agents and fixtures bring their own needs.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "git, python3, ca-certificates")
include(CPack)
