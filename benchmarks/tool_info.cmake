# SPDX-License-Identifier: MIT
# convgrad_tool_info: what the tools (convgrad-bench, examples/train_cnn) say
# about the build and the machine, and where they write (tool_info.h).
# Included by each directory whose tool links it; the first one defines it.
include_guard(GLOBAL)
find_package(Git QUIET)
# The commit: a target that runs at every build, so that it cannot go stale
# after a commit or an edit without a reconfigure.
set(_cg_tool_commit_c ${CMAKE_CURRENT_BINARY_DIR}/tool_commit.c)
add_custom_target(convgrad_tool_commit
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DGIT=${GIT_EXECUTABLE}
          -DOUT=${_cg_tool_commit_c} -P ${CMAKE_CURRENT_LIST_DIR}/tool_commit.cmake
  BYPRODUCTS ${_cg_tool_commit_c}
  COMMENT "The source tree's commit for the tools"
  VERBATIM)
add_library(convgrad_tool_info STATIC ${CMAKE_CURRENT_LIST_DIR}/tool_info.c ${_cg_tool_commit_c})
add_dependencies(convgrad_tool_info convgrad_tool_commit)
target_include_directories(convgrad_tool_info PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(convgrad_tool_info PUBLIC convgrad::convgrad)
target_compile_options(convgrad_tool_info PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes)
