# SPDX-License-Identifier: MIT
# The parts of the build beyond the library (tests, examples, benchmarks, the
# API reference) each have an option that is AUTO, ON or OFF:
#   AUTO  build the part when its dependency is found, else say so and go on,
#         so that a plain `cmake` build needs only the library's own
#         dependencies (a C compiler, pthreads, OpenBLAS);
#   ON    the dependency is required: configuring fails without it (what
#         scripts/common.sh's cg_configure asks for, so that the test command
#         never passes by quietly testing less);
#   OFF   leave the part out.

# convgrad_optional(OPTION WHAT FOUND_VAR DEPENDENCY)
# Decides OPTION from its value and FOUND_VAR (the name of a variable, true
# when DEPENDENCY is there), says the decision in one line, and sets OPTION to
# ON or OFF in the caller's scope: that normal variable hides the cache entry,
# so every later `if(OPTION)` reads the decision, never "AUTO".
function(convgrad_optional option what found_var dependency)
  set(value "${${option}}")
  if(value STREQUAL "AUTO")
    set(required FALSE)
  elseif(value)
    set(required TRUE)
  else()
    message(STATUS "convgrad: ${what}: off (${option}=${value})")
    set(${option} OFF PARENT_SCOPE)
    return()
  endif()
  if(${found_var})
    message(STATUS "convgrad: ${what}: on")
    set(${option} ON PARENT_SCOPE)
  elseif(required)
    message(FATAL_ERROR "convgrad: ${option}=${value}, but ${dependency} was not found: "
                        "install it, or configure with -D${option}=AUTO or OFF")
  else()
    message(STATUS "convgrad: ${what}: skipped, ${dependency} not found "
                   "(-D${option}=ON makes this an error)")
    set(${option} OFF PARENT_SCOPE)
  endif()
endfunction()
