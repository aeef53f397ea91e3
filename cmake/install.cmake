# Installation layout (`cmake --install`) and the Debian package
# (`cpack -G DEB`). Included from the top-level CMakeLists.txt once the
# programs exist.
#
#   bin/                                  vault, vproxy, vrun
#   share/vrun/profiles/                  sandbox profiles (runner/profile.cmake)
#   share/man/man1, man5/                 vault(1), vproxy(1), vrun(1), vrun-profile(5),
#                                         gzip -9n compressed (Debian policy 12.1)
#   share/bash-completion/completions/    vault, vproxy, vrun
#   lib/systemd/user/vproxy.service       the user service
#   share/doc/vrun/                       README.md, copyright (machine-readable)
#
# Installing writes nothing into the build tree but CMake's own
# install_manifest.txt: whatever is installed is made by the build (as the
# user who builds), so `sudo cmake --install build` leaves no root-owned file
# behind that a later `cpack` as that user would have to overwrite.
include(GNUInstallDirs)

# vrun looks for its profiles next to its own binary first (bin/../share/
# vrun/profiles), then in the directory configured here: a package built
# with another prefix (.deb: /usr), or unpacked with dpkg -x, still works.
if(TARGET vrun)
  file(RELATIVE_PATH VRUN_PROFILE_REL_DIR ${CMAKE_INSTALL_FULL_BINDIR}
       ${CMAKE_INSTALL_FULL_DATADIR}/vrun/profiles)
  target_compile_definitions(vrun PRIVATE VRUN_PROFILE_REL_DIR="${VRUN_PROFILE_REL_DIR}")
endif()

# CMake writes install_manifest.txt at the end of every install, cpack's
# included. After `sudo cmake --install build` it belongs to root, and the
# user's next `cpack` would fail to overwrite it; removed first (the directory
# is the user's), it is simply written anew.
install(CODE "
  if(CMAKE_INSTALL_COMPONENT)
    file(REMOVE \"${CMAKE_BINARY_DIR}/install_manifest_\${CMAKE_INSTALL_COMPONENT}.txt\")
  else()
    file(REMOVE \"${CMAKE_BINARY_DIR}/install_manifest.txt\")
  endif()
")

# Man pages, compressed at build time: gzip -n leaves out the name and time,
# so the same page always gives the same bytes.
find_program(VRUN_GZIP gzip REQUIRED)
set(VRUN_MAN_GZ "")
foreach(page vault.1 vproxy.1 vrun.1 vrun-profile.5)
  set(gz ${CMAKE_BINARY_DIR}/man/${page}.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_SOURCE_DIR}/man/${page} ${CMAKE_BINARY_DIR}/man/${page}
    COMMAND ${VRUN_GZIP} -9nf ${CMAKE_BINARY_DIR}/man/${page}
    DEPENDS ${CMAKE_SOURCE_DIR}/man/${page}
    COMMENT "Compressing man page ${page}"
    VERBATIM)
  list(APPEND VRUN_MAN_GZ ${gz})
endforeach()
add_custom_target(vrun_man ALL DEPENDS ${VRUN_MAN_GZ})
install(FILES ${CMAKE_BINARY_DIR}/man/vault.1.gz ${CMAKE_BINARY_DIR}/man/vproxy.1.gz
              ${CMAKE_BINARY_DIR}/man/vrun.1.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_BINARY_DIR}/man/vrun-profile.5.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)

# One completion script for the three programs, installed under each name so
# bash-completion's on-demand loader finds it whichever is typed first.
foreach(prog vault vproxy vrun)
  install(FILES ${CMAKE_SOURCE_DIR}/contrib/bash-completion/vrun RENAME ${prog}
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
endforeach()

# The unit names vproxy by its installed path, known only at install time
# (cpack installs into /usr whatever CMAKE_INSTALL_PREFIX says), so it is
# written straight into the destination (DESTDIR respected), never into the
# build tree, and recorded in the install manifest like any other file.
install(CODE "
  set(VRUN_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  set(unit \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/user/vproxy.service\")
  message(STATUS \"Installing: \${unit}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/contrib/systemd/vproxy.service.in\" \"\${unit}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${unit}\")
")

set(VRUN_PACKAGE_MAINTAINER "vrun maintainers <vrun@localhost>"
    CACHE STRING "Maintainer field of the Debian package")

# /usr/share/doc/vrun/copyright, in Debian's machine-readable format. The
# licence text comes from VRUN_LICENSE_FILE when that exists.
set(VRUN_COPYRIGHT "the vrun authors" CACHE STRING "Copyright holders, for share/doc/vrun/copyright")
set(VRUN_LICENSE "not-yet-chosen" CACHE STRING "License short name, for share/doc/vrun/copyright")
set(VRUN_LICENSE_FILE ${CMAKE_SOURCE_DIR}/LICENSE CACHE FILEPATH "The licence text")
if(EXISTS "${VRUN_LICENSE_FILE}")
  file(READ ${VRUN_LICENSE_FILE} VRUN_LICENSE_TEXT)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${VRUN_LICENSE_FILE})
else()
  set(VRUN_LICENSE_TEXT "No licence has been chosen for vrun yet: this package grants no rights
beyond those that copyright law gives anyone.")
endif()
# Continuation lines start with a space; an empty line is " ." (copyright-format 1.0).
string(STRIP "${VRUN_LICENSE_TEXT}" VRUN_LICENSE_TEXT)
string(REGEX REPLACE "\n([ \t]*\n)+" "\n.\n" VRUN_LICENSE_TEXT "${VRUN_LICENSE_TEXT}")
string(REGEX REPLACE "\n" "\n " VRUN_LICENSE_TEXT " ${VRUN_LICENSE_TEXT}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/copyright.in ${CMAKE_BINARY_DIR}/copyright @ONLY)

install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_BINARY_DIR}/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- cpack -G DEB ----
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
