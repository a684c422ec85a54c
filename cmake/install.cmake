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

# ---- convgrad_mpi (when built): convgrad::mpi, convgrad_mpi.h, convgrad-mpi.pc ----
# A consumer writes find_package(convgrad REQUIRED COMPONENTS mpi) and links
# convgrad::mpi, or compiles with `pkg-config --cflags --libs convgrad-mpi`.
# Its own export set, loaded by convgradConfig.cmake only when the component
# is asked for, so that a consumer of convgrad alone never needs MPI.
if(CONVGRAD_MPI)
  install(TARGETS convgrad_mpi
    EXPORT convgradMpiTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/mpi/include/convgrad_mpi.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT convgradMpiTargets
    FILE convgradMpiTargets.cmake
    NAMESPACE convgrad::
    DESTINATION ${CONVGRAD_CMAKE_INSTALL_DIR})
  # MPI's own flags: through its pkg-config module where it has one (Open
  # MPI: ompi-c, MPICH: mpich), else the flags CMake's FindMPI found.
  pkg_search_module(CONVGRAD_MPI_PC QUIET ompi-c mpich mpi-c)
  set(CONVGRAD_MPI_PC_REQUIRES "")
  set(CONVGRAD_MPI_PC_CFLAGS "")
  set(CONVGRAD_MPI_PC_LIBS "")
  if(CONVGRAD_MPI_PC_FOUND)
    set(CONVGRAD_MPI_PC_REQUIRES " ${CONVGRAD_MPI_PC_MODULE_NAME}")
  else()
    foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
      string(APPEND CONVGRAD_MPI_PC_CFLAGS " -I${dir}")
    endforeach()
    foreach(lib IN LISTS MPI_C_LIBRARIES)
      string(APPEND CONVGRAD_MPI_PC_LIBS " ${lib}")
    endforeach()
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/mpi/convgrad-mpi.pc.in
                 ${CMAKE_CURRENT_BINARY_DIR}/convgrad-mpi.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/convgrad-mpi.pc
          DESTINATION ${CONVGRAD_PKGCONFIG_INSTALL_DIR})
endif()
