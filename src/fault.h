/* SPDX-License-Identifier: MIT */
/* Fault injection, for tests only. The library's allocation and thread-start
 * sites ask cg_fault_should_fail(point) first and fail as if the real call
 * had failed when it says so.
 *
 * Only the test copy of the library is compiled with CONVGRAD_FAULT_INJECTION
 * (tests/CMakeLists.txt, target convgrad_fault_for_tests); everywhere else
 * cg_fault_should_fail is a constant 0 that the compiler folds away, and
 * fault.c, the only definition of the control functions, is not built: the
 * installed library has neither a cost nor a symbol of it. */
#ifndef CG_FAULT_H
#define CG_FAULT_H

typedef enum cg_fault_point {
    CG_FAULT_THREAD_START,  /* pthread_create of an emulated core's thread */
    CG_FAULT_SCRATCH_ALLOC, /* allocation of a core's scratch: first use or growth */
    CG_FAULT_NCHW_STAGING,  /* the NCHW training step's NHWC copies (then NCHW's own path) */
    CG_FAULT_POINTS
} cg_fault_point;

#ifdef CONVGRAD_FAULT_INJECTION
/* Counts one call at p; nonzero when the armed fault says this call fails.
 * Thread-safe (emulated cores call it concurrently). */
int cg_fault_should_fail(cg_fault_point p);

/* Test control. Calls at p are counted from 1 starting at this moment; calls
 * nth .. nth+times-1 fail (times < 0: every call from the nth on). nth <= 0
 * disarms p. Arm while no call is in flight. */
void cg_fault_arm(cg_fault_point p, long nth, long times);
/* Disarms every point and resets every count. */
void cg_fault_disarm_all(void);
/* Calls made / calls failed at p since it was last armed or reset. */
long cg_fault_calls(cg_fault_point p);
long cg_fault_failures(cg_fault_point p);
#else
static inline int cg_fault_should_fail(cg_fault_point p)
{
    (void)p;
    return 0;
}
#endif
#endif
