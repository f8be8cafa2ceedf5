/* The PDL switch of kernels/pdl.cuh (kernels.h: kernels_use_pdl). */
#include "kernels/kernels.h"
#include "kernels/pdl.cuh"

static int pdl_on = 1;

int pdl_enabled() { return pdl_on; }

extern "C" void kernels_use_pdl(int on) { pdl_on = on != 0; }

/* kernels_use_carveout: the kernels already given the largest carveout, per device (a kernel
 * is set up once; launches come from one thread per device, so the lock is uncontended). */
#include <pthread.h>
static int carveout_on = 0;
static pthread_mutex_t carveout_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { int dev; const void *fn; } carveout_seen[1024];
static int carveout_n = 0;

extern "C" void kernels_use_carveout(int on) { carveout_on = on != 0; }

void pdl_carveout(const void *fn) {
    if (!carveout_on) return;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return;
    pthread_mutex_lock(&carveout_mu);
    int seen = 0;
    for (int i = 0; i < carveout_n && !seen; i++) seen = carveout_seen[i].dev == dev && carveout_seen[i].fn == fn;
    if (!seen && carveout_n < 1024 &&
        cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared) ==
            cudaSuccess)
        carveout_seen[carveout_n++] = {dev, fn};
    pthread_mutex_unlock(&carveout_mu);
}
