# Installation layout (`cmake --install`) and the Debian package
# (`cpack -G DEB`). Included from the top-level CMakeLists.txt once the
# programs exist.
#
#   bin/                                  vault, vproxy, vrun
#   share/vrun/profiles/                  sandbox profiles (runner/profile.cmake)
#   share/man/man1, man5/                 vault(1), vproxy(1), vrun(1), vrun-profile(5)
#   share/bash-completion/completions/    vault, vproxy, vrun
#   lib/systemd/user/vproxy.service       the user service
#   share/doc/vrun/                       README.md
include(GNUInstallDirs)

# vrun looks for its profiles next to its own binary first (bin/../share/
# vrun/profiles), then in the directory configured here: a package built
# with another prefix (.deb: /usr), or unpacked with dpkg -x, still works.
if(TARGET vrun)
  file(RELATIVE_PATH VRUN_PROFILE_REL_DIR ${CMAKE_INSTALL_FULL_BINDIR}
       ${CMAKE_INSTALL_FULL_DATADIR}/vrun/profiles)
  target_compile_definitions(vrun PRIVATE VRUN_PROFILE_REL_DIR="${VRUN_PROFILE_REL_DIR}")
endif()

install(FILES ${CMAKE_SOURCE_DIR}/man/vault.1 ${CMAKE_SOURCE_DIR}/man/vproxy.1
              ${CMAKE_SOURCE_DIR}/man/vrun.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_SOURCE_DIR}/man/vrun-profile.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)

# One completion script for the three programs, installed under each name so
# bash-completion's on-demand loader finds it whichever is typed first.
foreach(prog vault vproxy vrun)
  install(FILES ${CMAKE_SOURCE_DIR}/contrib/bash-completion/vrun RENAME ${prog}
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
endforeach()

# The unit names vproxy by its installed path, known only at install time:
# cpack installs into /usr whatever CMAKE_INSTALL_PREFIX says.
install(CODE "
  set(VRUN_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/contrib/systemd/vproxy.service.in\"
                 \"${CMAKE_BINARY_DIR}/contrib/vproxy.service\" @ONLY)
")
install(FILES ${CMAKE_BINARY_DIR}/contrib/vproxy.service DESTINATION lib/systemd/user)

install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- cpack -G DEB ----
set(VRUN_PACKAGE_MAINTAINER "vrun maintainers <vrun@localhost>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME vrun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${VRUN_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "run commands that need API keys without giving them the keys")
# The extended description; CPack puts the summary above it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "vault keeps API keys in an encrypted local store, each bound to the hosts
that may receive it. vproxy, a background proxy, alone holds the real keys,
swaps them into requests to the bound hosts only and audits every request.
vrun starts a command in a sandbox (user, pid, network and mount namespaces,
seccomp, Landlock) whose only reachable endpoint is the proxy: the command
sees a placeholder, never the key.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies from the binaries where dpkg-shlibdeps (dpkg-dev) is
# available; otherwise the Debian 12 names. `vrun --check` loads libssl3 with
# dlopen, which shlibdeps cannot see; vproxy links it, so it is listed anyway.
find_program(VRUN_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(VRUN_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "libc6 (>= 2.34), libsodium23, libssl3, libevent-core-2.1-7, libevent-extra-2.1-7, libevent-openssl-2.1-7, libjansson4, libseccomp2")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ca-certificates")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bash-completion, systemd")
include(CPack)
