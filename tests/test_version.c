/* SPDX-License-Identifier: MIT */
/* The version, written once in include/convgrad.h, is the same everywhere:
 * cg_version() of the shared library, the header's macros, and CMake's
 * PROJECT_VERSION (CONVGRAD_PROJECT_VERSION, from tests/CMakeLists.txt),
 * which the CMake and pkg-config packages carry. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include <convgrad.h>

Test(version, matches_the_macros)
{
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", CONVGRAD_VERSION_MAJOR, CONVGRAD_VERSION_MINOR,
             CONVGRAD_VERSION_PATCH);
    cr_assert_not_null(cg_version());
    cr_assert(strcmp(cg_version(), expect) == 0, "cg_version() is \"%s\", the macros say \"%s\"",
              cg_version(), expect);
}

Test(version, matches_cmake_project_version)
{
    cr_assert(strcmp(cg_version(), CONVGRAD_PROJECT_VERSION) == 0,
              "cg_version() is \"%s\", CMake's PROJECT_VERSION \"%s\"", cg_version(),
              CONVGRAD_PROJECT_VERSION);
}

Test(version, one_number)
{
    /* MINOR and PATCH under 100, or CONVGRAD_VERSION would not order versions. */
    cr_assert_lt(CONVGRAD_VERSION_MINOR, 100);
    cr_assert_lt(CONVGRAD_VERSION_PATCH, 100);
    int major, minor, patch;
    cr_assert_eq(sscanf(cg_version(), "%d.%d.%d", &major, &minor, &patch), 3);
    cr_assert_eq(CONVGRAD_VERSION, major * 10000 + minor * 100 + patch,
                 "CONVGRAD_VERSION is %d, cg_version() \"%s\"", CONVGRAD_VERSION, cg_version());
}
