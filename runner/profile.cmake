# Sandbox profiles and the Seatbelt (SBPL) generator: plain text processing,
# portable, so it builds and is tested on every platform. Included from the
# top-level CMakeLists.txt (absolute paths: the including directory varies);
# vrun links vrunprofile.
add_library(vrunprofile STATIC ${CMAKE_SOURCE_DIR}/runner/profile.c
                               ${CMAKE_SOURCE_DIR}/runner/sbpl.c)
target_link_libraries(vrunprofile PUBLIC vrunvault)
# Where `vrun --profile NAME` looks by default; VRUN_PROFILE_DIR overrides it,
# and vrun tries bin/../share/vrun/profiles next to itself first
# (cmake/install.cmake).
include(GNUInstallDirs)
set(VRUN_PROFILE_INSTALL_DIR ${CMAKE_INSTALL_FULL_DATADIR}/vrun/profiles)
target_compile_definitions(vrunprofile
                           PUBLIC VRUN_PROFILE_INSTALL_DIR="${VRUN_PROFILE_INSTALL_DIR}")
install(FILES ${CMAKE_SOURCE_DIR}/profiles/agent ${CMAKE_SOURCE_DIR}/profiles/strict
        DESTINATION ${CMAKE_INSTALL_DATADIR}/vrun/profiles)
