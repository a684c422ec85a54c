# SPDX-License-Identifier: MIT
# The shared library exports exactly the functions the public header
# declares: nothing internal (the library is built with hidden visibility and
# marks its public functions CG_API, src/status.h), and nothing declared left
# out. Run by ctest (tests/CMakeLists.txt, symbols_exported):
#
#   cmake -DNM=nm -DLIBRARY=libconvgrad.so -DHEADER=include/convgrad.h -P check_symbols.cmake
cmake_minimum_required(VERSION 3.18)
foreach(var NM LIBRARY HEADER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_symbols: -D${var}=... is required")
  endif()
endforeach()

# ---- the header's functions ----------------------------------------------
# Read as text: comments, preprocessor lines and braced bodies (struct and
# enum members) dropped, what is left split into declarations at ';'. The
# name of a declaration that is not a typedef is the identifier before its
# first '('.
file(READ "${HEADER}" text)
set(code "")
while(TRUE)
  string(FIND "${text}" "/*" open)
  if(open EQUAL -1)
    string(APPEND code "${text}")
    break()
  endif()
  string(SUBSTRING "${text}" 0 ${open} before)
  string(APPEND code "${before} ")
  string(SUBSTRING "${text}" ${open} -1 text)
  string(FIND "${text}" "*/" close)
  if(close EQUAL -1)
    message(FATAL_ERROR "check_symbols: ${HEADER}: a comment is not closed")
  endif()
  math(EXPR close "${close} + 2")
  string(SUBSTRING "${text}" ${close} -1 text)
endwhile()
string(REGEX REPLACE "//[^\n]*" "" code "${code}")
string(REPLACE "\\\n" " " code "${code}")
string(REGEX REPLACE "\n[ \t]*#[^\n]*" "\n" code "\n${code}")
string(REGEX REPLACE "extern[ \t\n]+\"C\"[ \t\n]*{" "" code "${code}")
# Innermost braces first; brackets out too, as they would hide a list's ';'.
while(code MATCHES "{[^{}]*}")
  string(REGEX REPLACE "{[^{}]*}" " " code "${code}")
endwhile()
string(REGEX REPLACE "[][]" " " code "${code}")
string(REGEX MATCHALL "[^;]+" declarations "${code}")
set(declared "")
foreach(declaration IN LISTS declarations)
  if(declaration MATCHES "^[ \t\n]*typedef[ \t\n]")
    continue()
  endif()
  if(declaration MATCHES "([A-Za-z_][A-Za-z0-9_]*)[ \t\n]*\\(")
    list(APPEND declared "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES declared)
if(NOT declared)
  message(FATAL_ERROR "check_symbols: no function found in ${HEADER}")
endif()

# ---- the library's exported symbols --------------------------------------
# `nm -D --defined-only`: one "ADDRESS TYPE NAME" a line; a versioned name
# reads NAME@VERSION.
execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
                OUTPUT_VARIABLE nm_out RESULT_VARIABLE nm_rc)
if(NOT nm_rc EQUAL 0)
  message(FATAL_ERROR "check_symbols: ${NM} -D --defined-only ${LIBRARY} failed (${nm_rc})")
endif()
string(REGEX MATCHALL "[^\n]+" nm_lines "${nm_out}")
set(exported "")
foreach(line IN LISTS nm_lines)
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^@ ]+)")
    list(APPEND exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES exported)

# ---- both ways ------------------------------------------------------------
set(not_declared ${exported})
set(not_exported ${declared})
if(declared)
  list(REMOVE_ITEM not_declared ${declared})
endif()
if(exported)
  list(REMOVE_ITEM not_exported ${exported})
endif()
list(LENGTH declared n_declared)
list(LENGTH exported n_exported)
if(not_declared OR not_exported)
  list(JOIN not_declared " " not_declared)
  list(JOIN not_exported " " not_exported)
  message(FATAL_ERROR
    "check_symbols: FAIL: ${LIBRARY} exports ${n_exported} symbols, ${HEADER} declares "
    "${n_declared} functions\n"
    "  exported but not declared (internal names: give them hidden visibility): ${not_declared}\n"
    "  declared but not exported (mark their definitions CG_API): ${not_exported}")
endif()
message(STATUS "check_symbols: PASS: the ${n_exported} exported symbols are the header's "
               "${n_declared} functions")
