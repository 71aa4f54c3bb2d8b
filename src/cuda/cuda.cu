/* The CUDA backend: the backend table, device memory, the device facts (ltk_info() and the
 * cached ones every operation plans with), the CUDA error check and the tensor-map encoder. The
 * operations live by file: the indexer in indexer.cu (its kernels in indexer-*.cu), the select in
 * select.cu, the kNN in knn.cu (its kernels in knn-*.cu), the decode in decode.cu (on the indexer's
 * pipeline); what they share in cuda-common.cuh. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <string.h>

#include "cuda-common.cuh"

/* ---- shared host helpers (cuda-common.cuh) ----------------------------------------------------- */
extern "C" ltk_status ltk_cuda_error(cudaError_t e, const char *what, const char *file, int line) {
    (void)cudaGetLastError(); /* clear a non-sticky error so later calls start clean */
    const char *base = file ? strrchr(file, '/') : NULL;
    return ltk_error(e == cudaErrorMemoryAllocation ? LTK_ENOMEM : LTK_ECUDA, "%s: %s (%s) at %s:%d", what,
                     cudaGetErrorString(e), cudaGetErrorName(e), base ? base + 1 : file ? file : "?", line);
}

#define LTK_DEV_CACHED 64 /* devices whose facts are kept */

extern "C" ltk_status ltk_cuda_device(ltk_cuda_dev *d) {
    static ltk_cuda_dev facts[LTK_DEV_CACHED];
    static int known[LTK_DEV_CACHED]; /* 1 once facts[dev] is filled (concurrent first calls write the same) */
    int dev = 0;
    LTK_CUDA_TRY(cudaGetDevice(&dev));
    const int cached = dev >= 0 && dev < LTK_DEV_CACHED;
    if (cached && __atomic_load_n(&known[dev], __ATOMIC_ACQUIRE)) {
        *d = facts[dev];
        return LTK_OK;
    }
    ltk_cuda_dev f;
    memset(&f, 0, sizeof f);
    f.dev = dev;
    LTK_CUDA_TRY(cudaDeviceGetAttribute(&f.nsm, cudaDevAttrMultiProcessorCount, dev));
    LTK_CUDA_TRY(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, dev));
    LTK_CUDA_TRY(cudaDeviceGetAttribute(&f.minor, cudaDevAttrComputeCapabilityMinor, dev));
    LTK_CUDA_TRY(cudaDeviceGetAttribute(&f.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (cached) {
        facts[dev] = f;
        __atomic_store_n(&known[dev], 1, __ATOMIC_RELEASE);
    }
    *d = f;
    return LTK_OK;
}

extern "C" void *ltk_cuda_tmap_encoder(void) {
    static void *fn = NULL;
    static int tried = 0;
    if (!tried) {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else
        cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            f = NULL;
        }
        fn = f;
        tried = 1;
    }
    return fn;
}

/* ---- backend table ---------------------------------------------------------------------------- */
static int cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: not an error for the caller */
        return 0;
    }
    return n > 0;
}

static void cuda_info(char *buf, size_t cap) {
    int n = 0, drv = 0, rt = 0;
    size_t used = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    (void)cudaDriverGetVersion(&drv);
    (void)cudaRuntimeGetVersion(&rt);
    used += (size_t)snprintf(buf + used, cap > used ? cap - used : 0, "  cuda runtime %d, driver %d, %d device(s)\n",
                             rt, drv, n);
    for (int d = 0; d < n && used < cap; d++) {
        cudaDeviceProp pr;
        if (cudaGetDeviceProperties(&pr, d) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        int fast = pr.major == 9 && pr.minor == 0 && ltk_cuda_tmap_encoder() != NULL;
        used += (size_t)snprintf(buf + used, cap - used, "  device %d: %s, sm_%d%d, %d SMs, %.1f GiB, kernels %s\n", d,
                                 pr.name, pr.major, pr.minor, pr.multiProcessorCount,
                                 (double)pr.totalGlobalMem / (double)(1u << 30),
                                 fast ? (ltk_tune_get()->cuda_portable ? "portable (LTK_CUDA_PORTABLE=1)"
                                                                       : "sm_90a wgmma+TMA")
                                      : "portable");
    }
}

static ltk_status cuda_alloc(size_t bytes, void **p) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        *p = NULL;
        return ltk_cuda_error(e, "cudaMalloc", __FILE__, __LINE__);
    }
    return LTK_OK;
}
static void cuda_free(void *p) {
    if (p && cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}
static ltk_status cuda_to_host(void *dst, const void *src, size_t bytes) {
    LTK_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return LTK_OK;
}
static ltk_status cuda_from_host(void *dst, const void *src, size_t bytes) {
    LTK_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return LTK_OK;
}
static ltk_status cuda_stream_sync(void *stream) {
    LTK_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
    return LTK_OK;
}
__global__ void ltk_causal_ranges_kernel(int32_t *ks, int32_t *ke, int64_t t0, int64_t rows, int32_t m) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows) {
        ks[i] = 0;
        ke[i] = (int32_t)((t0 + i + 1) / m);
    }
}
static ltk_status cuda_causal_ranges(int32_t *ks, int32_t *ke, int64_t t0, int64_t rows, int32_t m, void *stream) {
    if (rows <= 0) return LTK_OK;
    ltk_causal_ranges_kernel<<<(unsigned)((rows + 255) / 256), 256, 0, (cudaStream_t)stream>>>(ks, ke, t0, rows, m);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}

extern "C" const ltk_backend_i ltk_backend_cuda = {
    /* .name              = */ "cuda",
    /* .available         = */ cuda_available,
    /* .info              = */ cuda_info,
    /* .indexer_workspace = */ ltk_cuda_indexer_workspace,
    /* .indexer           = */ ltk_cuda_indexer,
    /* .knn_workspace     = */ ltk_cuda_knn_workspace,
    /* .knn               = */ ltk_cuda_knn,
    /* .select_workspace  = */ ltk_cuda_select_workspace,
    /* .select            = */ ltk_cuda_select,
    /* .mem_alloc         = */ cuda_alloc,
    /* .mem_free          = */ cuda_free,
    /* .mem_to_host       = */ cuda_to_host,
    /* .mem_from_host     = */ cuda_from_host,
    /* .stream_sync       = */ cuda_stream_sync,
    /* .causal_ranges     = */ cuda_causal_ranges,
    /* .decode_workspace  = */ ltk_cuda_decode_workspace,
    /* .decode            = */ ltk_cuda_decode,
};
