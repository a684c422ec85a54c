/* SPDX-License-Identifier: MIT */
/* What convgrad's tools (convgrad-bench, examples/train_cnn) say about the
 * build and the machine, and where they write: one implementation, so that
 * every tool's header, metadata.csv and output directory follow one rule.
 *
 *   convgrad-bench: convgrad 0.2.0, commit ffcf177-dirty
 *   CPU: Intel(R) Xeon(R) Processor (GenuineIntel, family 6 model 207 stepping 2);
 *        AVX-512F yes, the library's kernels 512-bit (AVX-512F); 2 online CPUs
 *   kernels: CONVGRAD_ISA unset, running avx512
 *
 * The commit is the source tree's `git describe --always` (+ "-dirty" when
 * tracked files differ from it), regenerated at every build (tool_commit.cmake),
 * "unknown" without git or .git. */
#ifndef CG_TOOL_INFO_H
#define CG_TOOL_INFO_H

#include <stddef.h>
#include <stdio.h>

/* The default --out of a tool: under the current directory, named after it. */
#define TOOL_DEFAULT_OUT(program) "./" program "-out"

/* The exit statuses every tool's --help states. */
enum { TOOL_EXIT_OK = 0, TOOL_EXIT_FAILURE = 1, TOOL_EXIT_USAGE = 2 };

/* The commit the tool was built from, e.g. "ffcf177-dirty", or "unknown". */
extern const char tool_commit[];

/* "convgrad 0.2.0, commit ffcf177-dirty" (the library's run-time version). */
const char *tool_build_text(void);

/* The CPU: "Intel(R) Xeon(R) Processor (GenuineIntel, family 6 model 207
 * stepping 2); AVX-512F yes, the library's kernels 512-bit (AVX-512F); 2 online
 * CPUs". Print it after "CPU: ". */
const char *tool_cpu_text(void);

int tool_online_cpus(void); /* at least 1 */

/* The library's kernel set: CONVGRAD_ISA (ref, avx2 or avx512) as the library
 * reads it, once, at its first kernel use, capped by the CPU's features (the
 * library does not export its choice: this is its rule). Read on the first
 * call of any tool_* function: set CONVGRAD_ISA before. */
typedef struct tool_isa {
    const char *requested; /* CONVGRAD_ISA's value; NULL when unset */
    const char *running;   /* "avx512", "avx2" or "ref" */
    int bits;              /* the running kernels' vector width: 512, 256; 0 for ref */
} tool_isa;
const tool_isa *tool_isa_info(void);
/* "requested avx2, running avx2" or "CONVGRAD_ISA unset, running avx512" */
const char *tool_isa_text(void);
/* 0 when name is a kernel set CONVGRAD_ISA takes */
int tool_isa_check(const char *name);

/* Makes the output directory (with its parents), puts its absolute path in
 * abs and writes metadata.csv there (the tool, the build, the CPU, the start
 * time and the command line), which also proves the directory writable.
 * 0 on success; otherwise -1 after a message on stderr naming dir. */
int tool_open_out(const char *program, const char *dir, int argc, char **argv, char *abs,
                  size_t abslen);

/* Writes s as one CSV field, quoted. */
void tool_csv_field(FILE *f, const char *s);

#endif
