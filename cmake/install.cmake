# SPDX-License-Identifier: MIT
# `cmake --install` puts the library, its one public header and a CMake package
# in the prefix, so that a consumer writes
#     find_package(convgrad REQUIRED)
#     target_link_libraries(app PRIVATE convgrad::convgrad)
# Included from the top-level CMakeLists.txt after the `convgrad` target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CONVGRAD_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/convgrad"
    CACHE STRING "Where the installed convgradConfig.cmake goes, relative to the prefix")

# Only `convgrad` is exported. It is built from $<TARGET_OBJECTS:convgrad_objects>
# (not by linking that OBJECT library), so convgrad_objects is not part of its
# interface and needs no export set. Its own link dependencies (OpenBLAS,
# Threads, m) are PRIVATE: for the shared library they stay out of the exported
# interface; for a static build they appear as $<LINK_ONLY:...> and the config
# file recreates PkgConfig::OPENBLAS and Threads::Threads before loading targets.
install(TARGETS convgrad
  EXPORT convgradTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The public header (and any header it may come to include), from include/.
# No INCLUDES DESTINATION above: convgrad's own $<INSTALL_INTERFACE:include>
# already puts the installed include/ on the consumer's path.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT convgradTargets
  FILE convgradTargets.cmake
  NAMESPACE convgrad::
  DESTINATION ${CONVGRAD_CMAKE_INSTALL_DIR})

# Read by the config template: a static convgrad needs its link dependencies
# found again on the consumer's side.
get_target_property(CONVGRAD_LIBRARY_TYPE convgrad TYPE)

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/convgradConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/convgradConfig.cmake
  INSTALL_DESTINATION ${CONVGRAD_CMAKE_INSTALL_DIR})
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/convgradConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/convgradConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/convgradConfigVersion.cmake
  DESTINATION ${CONVGRAD_CMAKE_INSTALL_DIR})
