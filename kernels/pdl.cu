/* The PDL switch of kernels/pdl.cuh (kernels.h: kernels_use_pdl). */
#include "kernels/kernels.h"
#include "kernels/pdl.cuh"

static int pdl_on = 1;

int pdl_enabled() { return pdl_on; }

extern "C" void kernels_use_pdl(int on) { pdl_on = on != 0; }
