/* Unit tests of engine/cpu_act.h: the fast path's SwiGLU on every path this CPU runs, against
 * silu(g) * u in double: random values over [-30, 30] and the edges of exp's range (|g| near 88,
 * past it, tiny, zero), lengths that leave a tail of every size; within 1e-6 relative (the
 * AVX-512 exp ~2 ulp, then a division and a product; 1e-30 absolute where exp(-g) overflows); the same bits whether the array is done in
 * one call or in pieces (results must not depend on the threads' split); NaN stays NaN. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "engine/cpu_act.h"
#include "test.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static double unit(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

int main(void) {
    enum { N = 1000 };
    static const float edge[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 89.0f, -89.0f, 104.0f, -104.0f, 200.0f,
                                 -200.0f, 1e-7f, 0.5f, -0.5f, 30.0f, -30.0f};
    const int n_edge = (int)(sizeof edge / sizeof edge[0]);
    float g[N], u[N], a[N], b[N];
    for (int i = 0; i < N; i++) {
        g[i] = i < n_edge ? edge[i] : (float)(unit() * 60 - 30);
        u[i] = (float)(unit() * 4 - 2);
    }
    for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
        if (!quant_isa_supported((quant_isa)isa)) continue;
        const char *nm = quant_isa_name((quant_isa)isa);
        char name[160], why[200] = "";
        double worst = 0;
        int bad = 0;
        for (int len = N - 16; len <= N; len++) { /* every tail size */
            memcpy(a, g, sizeof a);
            cpu_silu_mul((quant_isa)isa, a, u, len);
            for (int i = 0; i < len; i++) {
                const double want = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
                const double err = fabs(a[i] - want), tol = 1e-6 * fabs(want) + 1e-30; /* past exp's range: 0 */
                if (fabs(want) > 1e-30) worst = fmax(worst, err / fabs(want));
                if (!(err <= tol) && !bad++)
                    snprintf(why, sizeof why, "g %.9g u %.9g: %.9g vs %.9g", g[i], u[i], a[i], want);
            }
            for (int i = len; i < N; i++)
                if (a[i] != g[i] && !bad++) snprintf(why, sizeof why, "wrote past the end at %d of %d", i, len);
        }
        snprintf(name, sizeof name, "cpu_silu_mul %s: within 1e-6 of double over [-30, 30] and exp's edges, every tail",
                 nm);
        CHECK(!bad, name, "%s (%d bad)", why, bad);
        printf("  info: %s worst relative error %.3g\n", nm, worst);
        memcpy(a, g, sizeof a);
        memcpy(b, g, sizeof b);
        cpu_silu_mul((quant_isa)isa, a, u, N);
        cpu_silu_mul((quant_isa)isa, b, u, 13);
        cpu_silu_mul((quant_isa)isa, b + 13, u + 13, 500);
        cpu_silu_mul((quant_isa)isa, b + 513, u + 513, N - 513);
        snprintf(name, sizeof name, "cpu_silu_mul %s: the same bits in one call and in pieces of 13, 500, 487", nm);
        CHECK(!memcmp(a, b, sizeof a), name, "results depend on the split");
        float x[17] = {NAN}, y[17];
        for (int i = 0; i < 17; i++) y[i] = 1.0f, x[i] = i ? 1.0f : NAN;
        cpu_silu_mul((quant_isa)isa, x, y, 17);
        snprintf(name, sizeof name, "cpu_silu_mul %s: NaN stays NaN", nm);
        CHECK(isnan(x[0]) && x[1] > 0.73f && x[1] < 0.74f, name, "%g %g", x[0], x[1]);
    }
    return test_done();
}
