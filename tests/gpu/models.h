/* What the GPU tests share: synthetic models written by mkmodel, and seeded token ids. */
#ifndef MGI_TESTS_GPU_MODELS_H
#define MGI_TESTS_GPU_MODELS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/unit/test.h"

/* A synthetic model from $BUILD/scripts/mkmodel in $TMPDIR with a training context of ctx; the
 * path (one of 8 static buffers), or NULL with a FAIL printed. */
static inline const char *gpu_make_model(const char *shape, const char *quant, int ctx) {
    static char path[8][512];
    static int k;
    char *p = path[k++ & 7], cmd[1400];
    const char *tmp = getenv("TMPDIR");
    const char *build = getenv("BUILD");
    snprintf(p, sizeof path[0], "%s/mgi-test-%s-%s-%d.gguf", tmp && *tmp ? tmp : "/tmp", shape, quant, (int)getpid());
    snprintf(cmd, sizeof cmd, "%s/scripts/mkmodel --shape %s --quant %s --ctx %d -o %s >/dev/null",
             build && *build ? build : "build", shape, quant, ctx, p);
    char name[128];
    snprintf(name, sizeof name, "mkmodel %s %s", shape, quant);
    return CHECK(system(cmd) == 0, name, "failed: %s", cmd) ? p : NULL;
}

/* A synthetic model from mkmodel with these arguments (e.g. "--shape qwen2-s --quant f32"), named
 * by label in $TMPDIR; the path (one of 8 static buffers), or NULL with a FAIL printed. */
static inline const char *gpu_make_model_args(const char *label, const char *args) {
    static char path[8][512];
    static int k;
    char *p = path[k++ & 7], cmd[1400];
    const char *tmp = getenv("TMPDIR");
    const char *build = getenv("BUILD");
    snprintf(p, sizeof path[0], "%s/mgi-test-%s-%d.gguf", tmp && *tmp ? tmp : "/tmp", label, (int)getpid());
    snprintf(cmd, sizeof cmd, "%s/scripts/mkmodel %s -o %s >/dev/null", build && *build ? build : "build", args, p);
    char name[1100];
    snprintf(name, sizeof name, "mkmodel %.1000s", args);
    return CHECK(system(cmd) == 0, name, "failed: %s", cmd) ? p : NULL;
}

/* BOS then n - 1 ids in [3, 31003) from a 64-bit LCG seeded with seed. */
static inline void gpu_random_tokens(int32_t *tokens, int n, uint64_t seed) {
    tokens[0] = 1;
    for (int i = 1; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = 3 + (int32_t)((seed >> 33) % 31000);
    }
}

#endif
