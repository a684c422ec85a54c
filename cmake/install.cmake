# SPDX-License-Identifier: MIT
# `cmake --install` puts the library, its one public header, a CMake package,
# a pkg-config file and the licence in the prefix, so that a consumer writes
#     find_package(convgrad REQUIRED)
#     target_link_libraries(app PRIVATE convgrad::convgrad)
# or compiles with `pkg-config --cflags --libs convgrad`.
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

# convgrad.pc is relocatable like the CMake package: its prefix is the path
# from its own directory up to the install prefix, as `cmake --install
# --prefix` may put the tree elsewhere than CMAKE_INSTALL_PREFIX.
set(CONVGRAD_PKGCONFIG_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where the installed convgrad.pc goes, relative to the prefix")
file(RELATIVE_PATH CONVGRAD_PC_TO_PREFIX
     "${CMAKE_INSTALL_PREFIX}/${CONVGRAD_PKGCONFIG_INSTALL_DIR}" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" CONVGRAD_PC_TO_PREFIX "${CONVGRAD_PC_TO_PREFIX}")
file(RELATIVE_PATH CONVGRAD_PC_LIBDIR "${CMAKE_INSTALL_PREFIX}" "${CMAKE_INSTALL_FULL_LIBDIR}")
file(RELATIVE_PATH CONVGRAD_PC_INCLUDEDIR "${CMAKE_INSTALL_PREFIX}" "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
# A static libconvgrad.a also needs the threads flag the build used (none
# where libc has pthreads) and libm; OpenBLAS comes from Requires.private.
string(STRIP "${CMAKE_THREAD_LIBS_INIT} -lm" CONVGRAD_PC_LIBS_PRIVATE)
configure_file(${CMAKE_CURRENT_LIST_DIR}/convgrad.pc.in ${CMAKE_CURRENT_BINARY_DIR}/convgrad.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/convgrad.pc DESTINATION ${CONVGRAD_PKGCONFIG_INSTALL_DIR})

# The licence travels with the library.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
