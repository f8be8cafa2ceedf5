/* The CUDA backend of engine/batch.h on one device: weights uploaded once (and repacked for the
 * matvec kernels), an f16 paged KV cache on the device, the forward pass as a chain of kernels,
 * and the decode step (one token per sequence) replayed from a captured CUDA graph. */
#ifndef MGI_ENGINE_FORWARD_CUDA_H
#define MGI_ENGINE_FORWARD_CUDA_H

#include "engine/engine.h"

/* What engine_params.gpu takes. */
extern const engine_gpu_backend forward_cuda_gpu;

#endif
