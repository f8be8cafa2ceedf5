/* The staged-pair panel kernel (quant/dot.h: quant_panel_dot_pair_x), included by dot_simd.h on
 * the 512-bit panel paths that take 8 activation rows a pass. The work of panel_body512_p with
 * pairs, in its operation order (so the products are the same, bit for bit), reading a staged
 * group: each step's 8 rows' 4 bytes lie side by side behind one pointer, and the sub-block sums
 * and scales are loaded, not rebuilt from bsums by scalar code for every panel. Zen 4, one core,
 * a 16 x 2048 Q4_K panel against 4 pairs, outside the engine: the row form's per-token pointers
 * and scalar sums keep ~79% of vpdpbusd's peak, this layout ~84%. */
#ifndef MGI_QUANT_DOT_SIMD_H_BODY
#error "include dot_simd.h"
#endif

AI void panel_x_body(quant_panel_kind k, int64_t n, const void *panel, int nr, const void *px, int n_tok, float *out,
                     size_t os) {
    enum { XR = 2 * QUANT_PANEL_XTOK };
    const int L = k == QUANT_PANEL_16_Q8K ? 16 : 32;
    const uint8_t *codes = panel;
    const float *scale = quant_panel_scale(panel, n), *bias = scale + (n / L) * 16;
    const int32_t *xq = px;
    const float *dxs = quant_panel_x_dx(px, n), *sums = quant_panel_x_sums(k, px, n);
    __m512 acc[QUANT_PANEL_XTOK], blk[XR];
    UNROLL for (int t = 0; t < XR; t++) blk[t] = _mm512_setzero_ps();
    UNROLL for (int p = 0; p < QUANT_PANEL_XTOK; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t s = 0; s < n / L; s++) {
        __m512i isum[XR];
        UNROLL for (int t = 0; t < XR; t++) isum[t] = _mm512_setzero_si512();
        const uint8_t *cs = codes + (size_t)s * (size_t)L * 16;
        const int32_t *xs = xq + (size_t)s * (size_t)(L / 4) * XR;
        UNROLL for (int g = 0; g < L / 4; g++) {
            __m512i w = _mm512_loadu_si512((const void *)(cs + 64 * g));
            UNROLL for (int t = 0; t < XR; t++)
                isum[t] = _mm512_dpbusd_epi32(isum[t], w, _mm512_set1_epi32(xs[XR * g + t]));
        }
        __m512 sc = _mm512_loadu_ps(scale + 16 * s), bi = _mm512_loadu_ps(bias + 16 * s);
        const float *sm = sums + s * QUANT_PANEL_XTOK;
        if (k == QUANT_PANEL_32_Q8) {
            const float *dx = dxs + s * XR;
            UNROLL for (int t = 0; t < XR; t++)
                acc[t / 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(sc, _mm512_set1_ps(dx[t])),
                                             acc[t / 2]);
            UNROLL for (int p = 0; p < QUANT_PANEL_XTOK; p++)
                acc[p] = _mm512_fmadd_ps(bi, _mm512_set1_ps(sm[p]), acc[p]);
            continue;
        }
        UNROLL for (int t = 0; t < XR; t++) blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), sc, blk[t]);
        UNROLL for (int p = 0; p < QUANT_PANEL_XTOK; p++) acc[p] = _mm512_fmadd_ps(bi, _mm512_set1_ps(sm[p]), acc[p]);
        if ((s + 1) % (QK_K / L) == 0) {
            const float *dx = dxs + (s * L / QK_K) * XR;
            UNROLL for (int t = 0; t < XR; t++) {
                acc[t / 2] = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(dx[t]), acc[t / 2]);
                blk[t] = _mm512_setzero_ps();
            }
        }
    }
    for (int p = 0; p < n_tok; p++) {
        float tmp[16];
        _mm512_storeu_ps(tmp, acc[p]);
        memcpy(out + (size_t)p * os, tmp, (size_t)nr * sizeof(float));
    }
}

#define PANEL_X_KERN(kind, name)                                                                        \
    static void name(int64_t n, const void *p, int nr, const void *px, int nt, float *o, size_t os) {   \
        panel_x_body(kind, n, p, nr, px, nt, o, os);                                                    \
    }
PANEL_X_KERN(QUANT_PANEL_32_Q8, panel_x_32_q8)
PANEL_X_KERN(QUANT_PANEL_32_Q8K, panel_x_32_q8k)
PANEL_X_KERN(QUANT_PANEL_16_Q8K, panel_x_16_q8k)
#define PANEL_X_TABLE {panel_x_32_q8, panel_x_32_q8k, panel_x_16_q8k}
