/* The CUDA backend: the backend table, device memory, the device facts (ltk_info() and the
 * cached ones every operation plans with), the CUDA error check and the tensor-map encoder. The
 * operations live by file: the indexer in indexer.cu (its kernels in indexer-*.cu), the select in
 * select.cu, the kNN in knn.cu (its kernels in knn-*.cu), the decode in decode.cu (on the indexer's
 * pipeline); what they share in cuda-common.cuh. */
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdint.h>
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

/* Dynamic shared memory limits by (kernel, device): raised under a lock when a launch needs more
 * than before, never lowered (so no call shrinks the limit under another's launch). Why a record:
 * the select set two attributes a call (0.28 us each on the H200's host, bench/host_prims.cu:
 * bench/results/h200/host_prims.jsonl), and a flag per process would miss a second device (the
 * attribute is the current device's). */
#define LTK_SMEM_SLOTS 256
static struct {
    const void *fn;
    int dev;
    size_t bytes;
} smem_set[LTK_SMEM_SLOTS];
static int smem_n = 0;
static pthread_mutex_t smem_lock = PTHREAD_MUTEX_INITIALIZER;

extern "C" ltk_status ltk_cuda_smem_reserve(const void *fn, size_t bytes) {
    int dev = 0;
    LTK_CUDA_TRY(cudaGetDevice(&dev));
    pthread_mutex_lock(&smem_lock);
    int i = 0;
    while (i < smem_n && (smem_set[i].fn != fn || smem_set[i].dev != dev)) i++;
    cudaError_t ce = cudaSuccess;
    if (i == smem_n || smem_set[i].bytes < bytes) {
        ce = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        if (ce == cudaSuccess && i == smem_n && smem_n < LTK_SMEM_SLOTS) {
            smem_set[i].fn = fn, smem_set[i].dev = dev;
            smem_n++;
        }
        if (ce == cudaSuccess && i < smem_n) smem_set[i].bytes = bytes;
    }
    pthread_mutex_unlock(&smem_lock);
    LTK_CUDA_TRY(ce);
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
/* Asked once a process (the devices a process sees are fixed when CUDA starts), not on every call:
 * the front end resolves the backend on each. */
static int cuda_available(void) {
    static int known = -1;
    int v = __atomic_load_n(&known, __ATOMIC_ACQUIRE);
    if (v < 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            (void)cudaGetLastError(); /* no driver or no device: not an error for the caller */
            n = 0;
        }
        v = n > 0;
        __atomic_store_n(&known, v, __ATOMIC_RELEASE);
    }
    return v;
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

/* The workspace of a call made without one: from a stream-ordered pool of the library's, one a
 * device, which keeps up to LTK_CUDA_POOL_KEEP_MB between calls (tuning table). Why not cudaMalloc
 * and cudaFree: cudaFree waits for the whole device, so every such call was a host synchronisation
 * (H200: 90 us for the pair against 0.7 for a pool's, bench/results/h200/host_prims.jsonl; a decode
 * step without a workspace 406 -> 15 us of host time, decode.jsonl host_alloc_us). Under stream
 * capture the allocation is the graph's own (cudaMallocAsync becomes a memory node); a device
 * without memory pools takes cudaMalloc. */
static cudaMemPool_t pools[LTK_DEV_CACHED];
static int pool_state[LTK_DEV_CACHED]; /* 0 not made, 1 made, -1 the device has no pools */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static int cuda_pool(int dev, cudaMemPool_t *out) {
    if (dev < 0 || dev >= LTK_DEV_CACHED) return 0;
    int s = __atomic_load_n(&pool_state[dev], __ATOMIC_ACQUIRE);
    if (s == 0) {
        pthread_mutex_lock(&pool_lock);
        s = pool_state[dev];
        if (s == 0) {
            int ok = 0;
            cudaMemPool_t p = NULL;
            if (cudaDeviceGetAttribute(&ok, cudaDevAttrMemoryPoolsSupported, dev) == cudaSuccess && ok) {
                cudaMemPoolProps pr;
                memset(&pr, 0, sizeof pr);
                pr.allocType = cudaMemAllocationTypePinned;
                pr.location.type = cudaMemLocationTypeDevice;
                pr.location.id = dev;
                if (cudaMemPoolCreate(&p, &pr) == cudaSuccess) {
                    uint64_t keep = (uint64_t)ltk_tune_get()->cuda_pool_keep_mb << 20;
                    (void)cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep);
                } else {
                    p = NULL;
                }
            }
            (void)cudaGetLastError();
            pools[dev] = p;
            s = p ? 1 : -1;
            __atomic_store_n(&pool_state[dev], s, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&pool_lock);
    }
    *out = pools[dev];
    return s > 0;
}

static ltk_status cuda_ws_alloc(size_t bytes, void *stream, void **p) {
    *p = NULL;
    cudaStream_t st = (cudaStream_t)stream;
    int dev = 0;
    LTK_CUDA_TRY(cudaGetDevice(&dev));
    cudaMemPool_t pool;
    cudaError_t e;
    if (ltk_stream_capturing(st)) e = cudaMallocAsync(p, bytes ? bytes : 256, st);
    else if (cuda_pool(dev, &pool)) e = cudaMallocFromPoolAsync(p, bytes ? bytes : 256, pool, st);
    else return cuda_alloc(bytes, p);
    if (e != cudaSuccess) {
        *p = NULL;
        return ltk_cuda_error(e, "cudaMallocFromPoolAsync (the workspace of a call made without one)", __FILE__,
                              __LINE__);
    }
    return LTK_OK;
}
static void cuda_ws_free(void *p, void *stream) {
    int dev = 0;
    cudaMemPool_t pool;
    const int capturing = ltk_stream_capturing((cudaStream_t)stream);
    if (!capturing && (cudaGetDevice(&dev) != cudaSuccess || !cuda_pool(dev, &pool))) {
        cuda_free(p);
        return;
    }
    if (cudaFreeAsync(p, (cudaStream_t)stream) != cudaSuccess) (void)cudaGetLastError();
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
    /* .ws_alloc          = */ cuda_ws_alloc,
    /* .ws_free           = */ cuda_ws_free,
    /* .blocks_workspace  = */ ltk_cuda_blocks_workspace,
    /* .blocks            = */ ltk_cuda_blocks,
    /* .candidates_ws     = */ ltk_cuda_candidates_workspace,
    /* .candidates        = */ ltk_cuda_candidates,
    /* .decode_blocks_ws  = */ ltk_cuda_decode_blocks_workspace,
    /* .decode_blocks     = */ ltk_cuda_decode_blocks,
    /* .decode_cands_ws   = */ ltk_cuda_decode_candidates_workspace,
    /* .decode_cands      = */ ltk_cuda_decode_candidates,
    /* .merge_workspace   = */ ltk_cuda_merge_workspace,
    /* .merge             = */ ltk_cuda_merge,
};
