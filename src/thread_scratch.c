/* SPDX-License-Identifier: MIT */
#include "thread_scratch.h"

#include <pthread.h>
#include <stdlib.h>

/* A pthread key frees a thread's space when it exits; a static
 * _Thread_local array instead would be charged, and zeroed, in every thread
 * of the host process at its start. */
typedef struct space {
    float *at;
    size_t floats;
} space;

static pthread_key_t g_key;
static int g_key_ok;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static _Thread_local space tls_own;
static _Thread_local space *tls_used; /* NULL: tls_own */
/* the spaces of cores whose share a caller ran (one a core_mask bit), kept
 * as the pool's threads are */
static space g_core_space[32];

static void make_key(void)
{
    g_key_ok = pthread_key_create(&g_key, free) == 0;
}

float *cg_thread_floats(size_t floats)
{
    space *s = tls_used ? tls_used : &tls_own;
    if (s->at != NULL && floats <= s->floats)
        return s->at;
    pthread_once(&g_key_once, make_key);
    if (!g_key_ok || floats > ((size_t)-1 - 63) / sizeof(float))
        return NULL;
    float *p = aligned_alloc(64, (floats * sizeof(float) + 63) & ~(size_t)63);
    if (p == NULL || (s == &tls_own && pthread_setspecific(g_key, p) != 0)) {
        free(p);
        return NULL;
    }
    free(s->at);
    s->at = p;
    s->floats = floats;
    return p;
}

void cg_thread_floats_as_core(int core)
{
    tls_used = core >= 0 ? &g_core_space[core] : NULL;
}
