/* The CPU forward pass against llama.cpp's reference runs in ../shared/golden/llama (the checks
 * and budgets are in tests/golden.h, shared with the GPU test). */
#include "tests/golden.h"

int main(void) {
    engine_params ep = engine_default_params();
    ep.cpu_exact = 1;  /* the exact f32 path: compared with llama.cpp's numbers or bit for bit */
    ep.n_threads = 2;
    golden_run_all(&ep, "golden", "CPU");
    return test_done();
}
