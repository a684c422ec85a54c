/* SPDX-License-Identifier: MIT */
/* --shapes FILE: layers in oneDNN benchdnn's convolution descriptor syntax,
 * one a line, so that users time their own networks' layers:
 *
 *   mb8ic64ih56oc64oh56kh3ph1n"res2a"   # a comment
 *   g32mb8_ic128ih56_oc128_kh3ph1 n"resnext"
 *
 * Keys (each once, a non-negative integer after it; '_' and spaces between
 * them are ignored): g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw, and
 * n"name" (or n followed by the name up to the end of the line or a '#').
 * As benchdnn: ic, oc, ih (or iw) and kh (or kw) are needed; mb defaults to
 * 2, g and sh to 1, ph and dh to 0; iw, ow, kw, sw, pw, dw default to the h
 * ones; only iw (no ih) is a 1-D convolution (ih = kh = 1); dilation counts
 * from 0 (dh0 = none); ph is the top (and pw the left) pad, the bottom (right)
 * one is whatever makes oh come out: oh given, that is
 * (oh-1)*sh + (kh-1)*(dh+1) + 1 - ih - ph; oh absent, it is
 * (ih + 2*ph - (kh-1)*(dh+1) - 1) / sh + 1; oh given and ph absent, ph is
 * ((oh-1)*sh - ih + (kh-1)*(dh+1) + 1) / 2 (0 at least). 3-D keys (id, kd,
 * ...) are refused: the library is 2-D. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum {
    K_G,
    K_MB,
    K_IC,
    K_IH,
    K_IW,
    K_OC,
    K_OH,
    K_OW,
    K_KH,
    K_KW,
    K_SH,
    K_SW,
    K_PH,
    K_PW,
    K_DH,
    K_DW,
    NKEYS
};
static const char *const key_names[NKEYS] = {"g",  "mb", "ic", "ih", "iw", "oc", "oh", "ow",
                                             "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw"};
static const long VALUE_MAX = 1L << 20; /* keeps every size product within int64 */

typedef struct desc {
    long v[NKEYS];
    int set[NKEYS];
    char name[128];
} desc;

/* Parses one descriptor (comment stripped, not blank). 0, or -1 and why in err. */
static int parse_desc(const char *s, desc *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    while (*s) {
        if (*s == '_' || isspace((unsigned char)*s)) {
            ++s;
            continue;
        }
        if (*s == 'n') { /* no key starts with n */
            if (d->name[0]) {
                snprintf(err, errlen, "a second name");
                return -1;
            }
            ++s;
            const char *end;
            if (*s == '"') {
                end = strchr(++s, '"');
                if (!end) {
                    snprintf(err, errlen, "the name's closing quote is missing");
                    return -1;
                }
            } else {
                for (end = s; *end && !isspace((unsigned char)*end); ++end) {
                }
            }
            size_t len = (size_t)(end - s);
            if (len == 0 || len >= sizeof d->name) {
                snprintf(err, errlen, "a name of 1 to %zu characters is wanted after n",
                         sizeof d->name - 1);
                return -1;
            }
            memcpy(d->name, s, len);
            d->name[len] = 0;
            s = *end == '"' ? end + 1 : end;
            continue;
        }
        int k = -1;
        for (int i = 0; i < NKEYS && k < 0; ++i) {
            size_t kl = strlen(key_names[i]);
            if (!strncmp(s, key_names[i], kl) && isdigit((unsigned char)s[kl]))
                k = i;
        }
        if (k < 0) {
            int len = 0;
            while (s[len] && !isdigit((unsigned char)s[len]) && !isspace((unsigned char)s[len]) &&
                   len < 16)
                ++len;
            if (strchr("iokspd", s[0]) && s[1] == 'd')
                snprintf(err, errlen, "'%.*s': 3-D convolutions are not measured (2-D only)", len,
                         s);
            else
                snprintf(err, errlen,
                         "'%.*s' is not a key (g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw n, "
                         "each with a number after it)",
                         len ? len : 1, s);
            return -1;
        }
        if (d->set[k]) {
            snprintf(err, errlen, "'%s' given twice", key_names[k]);
            return -1;
        }
        s += strlen(key_names[k]);
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || v > VALUE_MAX) {
            snprintf(err, errlen, "'%s' is out of range (at most %ld)", key_names[k], VALUE_MAX);
            return -1;
        }
        d->v[k] = v;
        d->set[k] = 1;
        s = end;
    }
    return 0;
}

/* benchdnn's defaults and deductions, and the checks; fills L. */
static int complete(desc *d, bench_layer *L, char *err, size_t errlen)
{
    long *v = d->v;
    int *set = d->set;
    if (!set[K_IC] || !set[K_OC]) {
        snprintf(err, errlen, "ic and oc are needed");
        return -1;
    }
    if (!set[K_IH] && !set[K_IW]) {
        snprintf(err, errlen, "ih (or iw) is needed");
        return -1;
    }
    const int oned = !set[K_IH]; /* only w given: the h values are 1 (pads, dilation 0) */
    if (oned) {
        if (!set[K_KW]) {
            snprintf(err, errlen, "kw is needed (a 1-D convolution: iw without ih)");
            return -1;
        }
        v[K_IH] = v[K_KH] = v[K_SH] = v[K_OH] = 1;
        v[K_PH] = v[K_DH] = 0;
        set[K_IH] = set[K_KH] = set[K_SH] = set[K_OH] = set[K_PH] = set[K_DH] = 1;
        if (!set[K_SW])
            v[K_SW] = 1;
    }
    if (!set[K_KH] && !set[K_KW]) {
        snprintf(err, errlen, "kh (or kw) is needed");
        return -1;
    }
    if (!set[K_MB])
        v[K_MB] = 2;
    if (!set[K_G])
        v[K_G] = 1;
    if (!set[K_SH])
        v[K_SH] = 1;
    if (!set[K_KH])
        v[K_KH] = v[K_KW];
    /* the w values default to the h ones */
    static const int hw[][2] = {{K_IH, K_IW}, {K_OH, K_OW}, {K_KH, K_KW},
                                {K_SH, K_SW}, {K_PH, K_PW}, {K_DH, K_DW}};
    for (size_t i = 0; i < sizeof hw / sizeof *hw; ++i)
        if (!set[hw[i][1]] && !oned) {
            v[hw[i][1]] = v[hw[i][0]];
            set[hw[i][1]] = set[hw[i][0]];
        }
    static const int positive[] = {K_G, K_MB, K_IC, K_IH, K_IW, K_OC, K_KH, K_KW, K_SH, K_SW};
    for (size_t i = 0; i < sizeof positive / sizeof *positive; ++i)
        if (v[positive[i]] < 1) {
            snprintf(err, errlen, "%s must be at least 1", key_names[positive[i]]);
            return -1;
        }
    if (v[K_IC] % v[K_G] || v[K_OC] % v[K_G]) {
        snprintf(err, errlen, "ic %ld and oc %ld must be multiples of g %ld", v[K_IC], v[K_OC],
                 v[K_G]);
        return -1;
    }
    /* per direction: the output size, or the pad, as benchdnn deduces them */
    for (int dir = 0; dir < 2; ++dir) {
        const int I = dir ? K_IW : K_IH, O = dir ? K_OW : K_OH, KK = dir ? K_KW : K_KH;
        const int S = dir ? K_SW : K_SH, P = dir ? K_PW : K_PH, D = dir ? K_DW : K_DH;
        const long ext = (v[KK] - 1) * (v[D] + 1) + 1; /* the dilated kernel's extent */
        if (set[O] && !set[P]) {
            long p = ((v[O] - 1) * v[S] - v[I] + ext) / 2;
            v[P] = p > 0 ? p : 0;
        }
        if (!set[O])
            v[O] = (v[I] + 2 * v[P] - ext) / v[S] + 1;
        const char *o = key_names[O];
        if (v[O] < 1 || v[I] + 2 * v[P] < ext) {
            snprintf(err, errlen,
                     "the kernel (%s %ld, dilated to %ld) does not fit the input (%s %ld"
                     " + pads %ld)",
                     key_names[KK], v[KK], ext, key_names[I], v[I], 2 * v[P]);
            return -1;
        }
        const long far = (v[O] - 1) * v[S] + ext - v[I] - v[P];
        if (far < 0 || far >= ext) {
            snprintf(err, errlen,
                     "%s %ld does not match the input: with %s %ld it needs a %s pad of %ld "
                     "(0 to %ld)",
                     o, v[O], key_names[P], v[P], dir ? "right" : "bottom", far, ext - 1);
            return -1;
        }
    }
    memset(L, 0, sizeof *L);
    L->n = (int)v[K_MB];
    L->h = (int)v[K_IH];
    L->w = (int)v[K_IW];
    L->cin = (int)v[K_IC];
    L->cout = (int)v[K_OC];
    L->kh = (int)v[K_KH];
    L->kw = (int)v[K_KW];
    L->sh = (int)v[K_SH];
    L->sw = (int)v[K_SW];
    L->ph = (int)v[K_PH];
    L->pw = (int)v[K_PW];
    L->dil_h = (int)v[K_DH] + 1;
    L->dil_w = (int)v[K_DW] + 1;
    L->group = (int)v[K_G];
    L->oh = (int)v[K_OH];
    L->ow = (int)v[K_OW];
    return 0;
}

int bench_read_shapes(const char *path, bench_layer **layers, int *n, char *err, size_t errlen)
{
    *layers = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read --shapes %s: %s", path, strerror(errno));
        return -1;
    }
    bench_layer *out = NULL;
    int count = 0, lineno = 0, rc = 0;
    char line[1024];
    while (rc == 0 && fgets(line, sizeof line, f)) {
        ++lineno;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf(err, errlen, "%s:%d: the line is longer than %zu characters", path, lineno,
                     sizeof line - 2);
            rc = -1;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        line[strcspn(line, "\r\n")] = 0;
        char *p = line;
        while (isspace((unsigned char)*p))
            ++p;
        if (!*p)
            continue;
        desc d;
        char why[256];
        bench_layer L;
        if (parse_desc(p, &d, why, sizeof why) != 0 || complete(&d, &L, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s:%d: %s, in '%s'", path, lineno, why, p);
            rc = -1;
            break;
        }
        if (count == BENCH_MAX_LAYERS) {
            snprintf(err, errlen, "%s:%d: more than %d layers", path, lineno, BENCH_MAX_LAYERS);
            rc = -1;
            break;
        }
        /* unnamed: the descriptor itself, as benchdnn shows it */
        L.name = strdup(d.name[0] ? d.name : p);
        bench_layer *grown = realloc(out, sizeof *out * (size_t)(count + 1));
        if (!L.name || !grown) {
            snprintf(err, errlen, "%s:%d: out of memory", path, lineno);
            free(grown ? grown : out);
            out = NULL;
            rc = -1;
            break;
        }
        out = grown;
        out[count++] = L;
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "cannot read --shapes %s: %s", path, strerror(errno));
        rc = -1;
    }
    fclose(f);
    if (rc == 0 && count == 0) {
        snprintf(err, errlen, "--shapes %s holds no layer (only comments and blank lines)", path);
        rc = -1;
    }
    if (rc != 0) {
        for (int i = 0; i < count && out; ++i)
            free((char *)out[i].name);
        free(out);
        return -1;
    }
    *layers = out;
    *n = count;
    return 0;
}
