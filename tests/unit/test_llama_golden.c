/* The CPU forward pass against llama.cpp's reference runs in ../shared/golden/llama (the checks
 * and budgets are in tests/golden.h, shared with the GPU test). */
#include "tests/golden.h"

int main(void) {
    engine_params ep = engine_default_params();
    ep.n_threads = 2;
    golden_run_all(&ep, "golden", "CPU");
    return test_done();
}
