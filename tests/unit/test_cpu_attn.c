/* Unit tests of engine/cpu_attn.h: one head's attention over a paged f32 cache (positions in
 * shuffled cells, cells wider than the head) on every path, against f64. Budget: each score
 * carries an f32 dot error of at most delta = head_dim * 2^-23 * scale * sum_d |q_d k_d|; a
 * softmax weight then moves by at most a factor e^(2 delta_max), about 1 + 2 delta_max, plus
 * a few f32 roundings (exp, the sum, the product, n_pos axpy additions); so
 * |out - exact| <= (4 delta_max + (n_pos + 8) 2^-23) max |V|. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "engine/cpu_attn.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double unit(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

static void test_heads(void) {
    static const int dims[] = {7, 64, 80, 96, 128, 256}; /* 7: no AVX-512 form */
    static const int lens[] = {1, 5, 17, 300};
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_supported((quant_isa)isa)) continue;
        int bad = 0;
        double worst = 0;
        char why[256] = "";
        for (int di = 0; di < 6; di++)
            for (int li = 0; li < 4; li++) {
                int hd = dims[di], n = lens[li], n_cells = n + 17;
                size_t stride = (size_t)hd * 3 + 5;
                float *k = malloc(stride * (size_t)n_cells * sizeof *k), *v = malloc(stride * (size_t)n_cells * sizeof *v);
                float *q = malloc((size_t)hd * sizeof *q), *out = malloc((size_t)hd * sizeof *out);
                float *sc = malloc((size_t)n * sizeof *sc);
                int32_t *cells = malloc((size_t)n_cells * sizeof *cells);
                for (size_t i = 0; i < stride * (size_t)n_cells; i++) k[i] = (float)(unit() * 4 - 2), v[i] = (float)(unit() * 2 - 1);
                for (int d = 0; d < hd; d++) q[d] = (float)(unit() * 4 - 2);
                for (int i = 0; i < n_cells; i++) cells[i] = i;
                for (int i = n_cells - 1; i > 0; i--) {  /* shuffle: pages out of order */
                    int j = (int)(unit() * (i + 1));
                    int32_t t = cells[i];
                    cells[i] = cells[j], cells[j] = t;
                }
                float scale = 1.0f / sqrtf((float)hd);
                const size_t off = 2;  /* the head's slice starts inside the cell */
                cpu_attn_head((quant_isa)isa, out, q, k + off, v + off, stride, cells, n, hd, scale, sc);
                double *s = malloc((size_t)n * sizeof *s), mx = -1e300, sum = 0, dmax = 0, vmax = 0;
                for (int j = 0; j < n; j++) {
                    const float *kj = k + off + (size_t)cells[j] * stride;
                    double dot = 0, mag = 0;
                    for (int d = 0; d < hd; d++) dot += (double)q[d] * kj[d], mag += fabs((double)q[d] * kj[d]);
                    s[j] = dot * scale;
                    mx = fmax(mx, s[j]);
                    dmax = fmax(dmax, hd * 0x1p-23 * scale * mag);
                    for (int d = 0; d < hd; d++) vmax = fmax(vmax, fabs(v[off + (size_t)cells[j] * stride + d]));
                }
                for (int j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
                double tol = (4 * dmax + (n + 8) * 0x1p-23) * vmax;
                for (int d = 0; d < hd; d++) {
                    double want = 0;
                    for (int j = 0; j < n; j++) want += s[j] / sum * v[off + (size_t)cells[j] * stride + d];
                    double err = fabs(out[d] - want);
                    worst = fmax(worst, err / tol);
                    if (!(err <= tol) && !bad++)
                        snprintf(why, sizeof why, "head_dim %d, %d positions, d %d: %.9g vs %.9g (tol %.3g)", hd, n, d,
                                 out[d], want, tol);
                }
                free(k), free(v), free(q), free(out), free(sc), free(cells), free(s);
            }
        char name[128];
        snprintf(name, sizeof name, "cpu_attn_head %s: paged heads of 7..256 dims, 1..300 positions, equal f64",
                 quant_isa_name((quant_isa)isa));
        CHECK(!bad, name, "%s (%d bad)", why, bad);
        printf("  info: %s worst error / budget %.3f\n", quant_isa_name((quant_isa)isa), worst);
    }
}

/* cpu_attn_heads: g heads of one group give, head by head, the same bits as cpu_attn_head alone,
 * for every g the grouped form takes and head sizes on each path (the single head is checked
 * against f64 above). */
static void test_groups(void) {
    static const int dims[] = {7, 16, 48, 64, 128, 144, 256};
    static const int lens[] = {1, 3, 17, 300, 1100}; /* 1100: past L2 for heads of 128+ (rows requested ahead) */
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_supported((quant_isa)isa)) continue;
        int bad = 0, cases = 0;
        char why[256] = "";
        for (int di = 0; di < 7; di++)
            for (int li = 0; li < 5; li++)
                for (int g = 1; g <= CPU_ATTN_GROUP; g++) {
                    int hd = dims[di], n = lens[li], n_cells = n + 9;
                    size_t stride = (size_t)hd * 2 + 3;
                    float *k = malloc(stride * (size_t)n_cells * sizeof *k), *v = malloc(stride * (size_t)n_cells * sizeof *v);
                    float *q = malloc((size_t)g * hd * sizeof *q), *out = malloc((size_t)g * hd * sizeof *out);
                    float *one = malloc((size_t)hd * sizeof *one), *sc = malloc((size_t)g * n * sizeof *sc);
                    int32_t *cells = malloc((size_t)n_cells * sizeof *cells);
                    for (size_t i = 0; i < stride * (size_t)n_cells; i++)
                        k[i] = (float)(unit() * 6 - 3), v[i] = (float)(unit() * 2 - 1);
                    for (int d = 0; d < g * hd; d++) q[d] = (float)(unit() * 4 - 2);
                    for (int i = 0; i < n_cells; i++) cells[i] = (int32_t)((i * 7 + 3) % n_cells);
                    float scale = 1.0f / sqrtf((float)hd);
                    cpu_attn_heads((quant_isa)isa, g, out, q, k + 1, v + 1, stride, cells, n, hd, scale, sc);
                    for (int h = 0; h < g; h++) {
                        cpu_attn_head((quant_isa)isa, one, q + (size_t)h * hd, k + 1, v + 1, stride, cells, n, hd, scale, sc);
                        cases++;
                        if (memcmp(one, out + (size_t)h * hd, (size_t)hd * sizeof *one) && !bad++)
                            snprintf(why, sizeof why, "head_dim %d, %d positions, head %d of %d: %.9g vs %.9g alone", hd, n,
                                     h, g, out[(size_t)h * hd], one[0]);
                    }
                    free(k), free(v), free(q), free(out), free(one), free(sc), free(cells);
                }
        char name[160];
        snprintf(name, sizeof name, "cpu_attn_heads %s: 1..%d heads of a group, each bit for bit as alone (%d heads)",
                 quant_isa_name((quant_isa)isa), CPU_ATTN_GROUP, cases);
        CHECK(!bad, name, "%s (%d differ)", why, bad);
    }
}

int main(void) {
    test_heads();
    test_groups();
    return test_done();
}
