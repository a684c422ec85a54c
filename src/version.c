/* SPDX-License-Identifier: MIT */
#include "status.h"

#define CG_STRINGIFY(x) #x
#define CG_VERSION_TEXT(a, b, c) CG_STRINGIFY(a) "." CG_STRINGIFY(b) "." CG_STRINGIFY(c)

CG_API const char *cg_version(void)
{
    return CG_VERSION_TEXT(CONVGRAD_VERSION_MAJOR, CONVGRAD_VERSION_MINOR, CONVGRAD_VERSION_PATCH);
}
