/* SPDX-License-Identifier: MIT */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local cg_status last_status = CG_OK;
static _Thread_local char last_detail[CG_DETAIL_MAX];

cg_status cg_fail(cg_error *err, cg_status s, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->detail, sizeof err->detail, fmt, ap);
        va_end(ap);
    }
    return s;
}

cg_status cg_require(const void *const *ptrs, const char *const *names, int n, cg_error *err)
{
    for (int i = 0; i < n; i++)
        if (names[i] && !ptrs[i])
            return cg_fail(err, CG_ERR_NULL_POINTER, "%s is NULL", names[i]);
    return CG_OK;
}

cg_status cg_record(cg_status s, const cg_error *err)
{
    last_status = s;
    if (s == CG_OK)
        last_detail[0] = '\0';
    else
        snprintf(last_detail, sizeof last_detail, "%s", err->detail);
    return s;
}

CG_API const char *cg_last_error_detail(void)
{
    return last_detail;
}

CG_API cg_status cg_last_status(void)
{
    return last_status;
}

CG_API const char *cg_status_message(cg_status s)
{
    switch (s) {
    case CG_OK:
        return "success";
    case CG_ERR_NULL_POINTER:
        return "a required pointer is NULL (a tensor, the parameters or the workspace)";
    case CG_ERR_BAD_SIZE:
        return "a size is not positive (batch, input/output height or width, channels or kernel "
               "size)";
    case CG_ERR_BAD_GROUP:
        return "the group count must be >= 1 and divide both channel counts";
    case CG_ERR_BAD_STRIDE:
        return "a stride is below 1";
    case CG_ERR_BAD_DILATION:
        return "a dilation is below 1";
    case CG_ERR_BAD_PAD:
        return "a pad is negative";
    case CG_ERR_BATCH_MISMATCH:
        return "input_batch_ must equal output_batch_";
    case CG_ERR_BUFFER_TOO_SMALL:
        return "buffer_size_ (bytes) is under its lower bound 2*(Kh*Kw*Cin/G)*sizeof(dtype); "
               "see cg_grad_filter_min_buffer_size";
    case CG_ERR_CORE_MASK:
        return "core_mask is 0, names a core outside the calling launch, or the entry is NULL";
    case CG_ERR_OVERFLOW:
        return "an element or byte count of these sizes overflows (a size_t, or an int where "
               "the API holds it in one)";
    case CG_ERR_CORE_BUSY:
        return "a core of core_mask is busy in another launch";
    case CG_ERR_NO_MEMORY:
        return "the library could not allocate its per-core scratch";
    case CG_ERR_THREAD:
        return "the thread of an emulated core could not be started";
    case CG_ERR_BAD_LAYOUT:
        return "cg_conv2d.layout must be CG_LAYOUT_NHWC or CG_LAYOUT_NCHW";
    case CG_ERR_INSIDE_LAUNCH:
        return "called on an emulated core: call cg_conv2d_* from an ordinary thread";
    }
    return "unknown convgrad status";
}
