# SPDX-License-Identifier: MIT
# Fails unless README.md's C example is examples/quickstart.c (less its first
# two comment lines), so the README's example is code that builds and runs.
#   cmake -DREADME=README.md -DEXAMPLE=examples/quickstart.c -P readme_example.cmake
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "```c\n" start)
if(start LESS 0)
  message(FATAL_ERROR "${README}: no ```c block")
endif()
math(EXPR start "${start} + 5")
string(SUBSTRING "${readme}" ${start} -1 rest)
string(FIND "${rest}" "```" stop)
string(SUBSTRING "${rest}" 0 ${stop} block)
# the example file less its SPDX line and its one-line comment (REGEX REPLACE
# would apply a ^ anchor again after each match)
foreach(line 1 2)
  string(FIND "${example}" "\n" eol)
  math(EXPR eol "${eol} + 1")
  string(SUBSTRING "${example}" ${eol} -1 example)
endforeach()
set(code "${example}")
if(NOT block STREQUAL code)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/readme_block.c" "${block}")
  message(FATAL_ERROR "README.md's example differs from ${EXAMPLE}: compare "
                      "${CMAKE_CURRENT_BINARY_DIR}/readme_block.c with it")
endif()
message(STATUS "README.md's example is ${EXAMPLE}")
