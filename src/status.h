/* SPDX-License-Identifier: MIT */
/* The calling thread's last status. */
#ifndef CG_STATUS_H
#define CG_STATUS_H
#include "convgrad.h"

/* Records s as the calling thread's last status and returns it. */
cg_status cg_record_status(cg_status s);

/* Public symbols are the only ones exported from the shared library. */
#define CG_API __attribute__((visibility("default")))
#endif
