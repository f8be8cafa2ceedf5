/* One family of check macros for CUDA runtime, cuBLAS and NCCL calls. Each failure names the
 * call as written, the current device, the file and the line. Library code (engine/) uses the
 * *_TRY forms, which write the message into the caller's err buffer and return -1; programs
 * (tests, kernel lab) use the *_CHECK forms, which print it on stderr and exit 3. Plain C. */
#ifndef MGI_KERNELS_CHECK_H
#define MGI_KERNELS_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <nccl.h>

static inline int check_device_(void) {
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) dev = -1;
    return dev;
}

static inline void check_format_(char *err, size_t err_size, const char *lib, const char *call,
                                 const char *why, const char *file, int line) {
    snprintf(err, err_size, "%s call %s failed on device %d: %s (%s:%d)", lib, call, check_device_(),
             why, file, line);
}

static inline const char *check_cublas_string_(cublasStatus_t s) {
    return cublasGetStatusString(s);
}

/* The three error sources reduced to (ok, text). */
#define CHECK_CUDA_STATUS_(call, ok, why) \
    cudaError_t check_rc_ = (call); int ok = check_rc_ == cudaSuccess; \
    const char *why = ok ? "" : cudaGetErrorString(check_rc_)
#define CHECK_CUBLAS_STATUS_(call, ok, why) \
    cublasStatus_t check_rc_ = (call); int ok = check_rc_ == CUBLAS_STATUS_SUCCESS; \
    const char *why = ok ? "" : check_cublas_string_(check_rc_)
#define CHECK_NCCL_STATUS_(call, ok, why) \
    ncclResult_t check_rc_ = (call); int ok = check_rc_ == ncclSuccess; \
    const char *why = ok ? "" : ncclGetErrorString(check_rc_)

#define CHECK_TRY_(kind, lib, call, err, err_size) do { \
        CHECK_##kind##_STATUS_(call, check_ok_, check_why_); \
        if (!check_ok_) { check_format_((err), (err_size), lib, #call, check_why_, __FILE__, __LINE__); return -1; } \
    } while (0)
#define CHECK_DIE_(kind, lib, call) do { \
        CHECK_##kind##_STATUS_(call, check_ok_, check_why_); \
        if (!check_ok_) { char check_msg_[512]; \
            check_format_(check_msg_, sizeof check_msg_, lib, #call, check_why_, __FILE__, __LINE__); \
            fprintf(stderr, "mgi: %s\n", check_msg_); exit(3); } \
    } while (0)

/* Return -1 from the enclosing function with the message in err. */
#define CUDA_TRY(call, err, err_size)   CHECK_TRY_(CUDA, "CUDA", call, err, err_size)
#define CUBLAS_TRY(call, err, err_size) CHECK_TRY_(CUBLAS, "cuBLAS", call, err, err_size)
#define NCCL_TRY(call, err, err_size)   CHECK_TRY_(NCCL, "NCCL", call, err, err_size)

/* Print the message and exit 3 (programs only: tests and the kernel lab). */
#define CUDA_CHECK(call)   CHECK_DIE_(CUDA, "CUDA", call)
#define CUBLAS_CHECK(call) CHECK_DIE_(CUBLAS, "cuBLAS", call)
#define NCCL_CHECK(call)   CHECK_DIE_(NCCL, "NCCL", call)

#endif
