/* SPDX-License-Identifier: MIT */
#include "thread_scratch.h"

#include <pthread.h>
#include <stdlib.h>

/* A pthread key frees a thread's space when it exits; a static
 * _Thread_local array instead would be charged, and zeroed, in every thread
 * of the host process at its start. */
static pthread_key_t g_key;
static int g_key_ok;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static _Thread_local float *tls_space;
static _Thread_local size_t tls_floats;

static void make_key(void)
{
    g_key_ok = pthread_key_create(&g_key, free) == 0;
}

float *cg_thread_floats(size_t floats)
{
    if (tls_space != NULL && floats <= tls_floats)
        return tls_space;
    pthread_once(&g_key_once, make_key);
    if (!g_key_ok || floats > ((size_t)-1 - 63) / sizeof(float))
        return NULL;
    float *p = aligned_alloc(64, (floats * sizeof(float) + 63) & ~(size_t)63);
    if (p == NULL || pthread_setspecific(g_key, p) != 0) {
        free(p);
        return NULL;
    }
    free(tls_space);
    tls_space = p;
    tls_floats = floats;
    return p;
}
