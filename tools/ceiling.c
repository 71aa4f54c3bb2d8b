/* The sustained FP8 GEMM rate of the device, measured in the benchmark's own process: the ceiling a
 * scan of FP8 scores is compared with (an e4m3 x e4m3 -> bf16 cuBLASLt GEMM, TN, fp32 accumulation,
 * held for >= 1 s after 0.5 s of warm-up, since the 700 W cap pulls the clock down within a second:
 * sub-second bursts read 1,420+ TFLOP/s on the H200 where seconds read 1,150-1,236).
 * cuBLASLt is a benchmark-only dependency: it is loaded at run time (dlopen), so the CLI starts
 * without it and a record then simply has no ceiling. */
#include "devmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LTK_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

typedef cublasStatus_t (*create_fn)(cublasLtHandle_t *);
typedef cublasStatus_t (*destroy_fn)(cublasLtHandle_t);
typedef cublasStatus_t (*desc_create_fn)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
typedef cublasStatus_t (*desc_destroy_fn)(cublasLtMatmulDesc_t);
typedef cublasStatus_t (*desc_set_fn)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
typedef cublasStatus_t (*layout_create_fn)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
typedef cublasStatus_t (*layout_destroy_fn)(cublasLtMatrixLayout_t);
typedef cublasStatus_t (*pref_create_fn)(cublasLtMatmulPreference_t *);
typedef cublasStatus_t (*pref_destroy_fn)(cublasLtMatmulPreference_t);
typedef cublasStatus_t (*pref_set_fn)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void *,
                                      size_t);
typedef cublasStatus_t (*heur_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                  cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                  cublasLtMatmulHeuristicResult_t *, int *);
typedef cublasStatus_t (*matmul_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                                    cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t, const void *,
                                    const void *, cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
                                    const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);

/* the cuBLASLt entry points, in the order of lt_names: loaded as one table (dlsym gives void *) */
enum { LT_NFUNCS = 12 };
typedef union {
    void *p[LT_NFUNCS];
    struct lt_fns {
        create_fn create;
        destroy_fn destroy;
        desc_create_fn d_create;
        desc_destroy_fn d_destroy;
        desc_set_fn d_set;
        layout_create_fn l_create;
        layout_destroy_fn l_destroy;
        pref_create_fn p_create;
        pref_destroy_fn p_destroy;
        pref_set_fn p_set;
        heur_fn heur;
        matmul_fn matmul;
    } f;
} lt_api;
static const char *const lt_names[LT_NFUNCS] = {
    "cublasLtCreate", "cublasLtDestroy", "cublasLtMatmulDescCreate", "cublasLtMatmulDescDestroy",
    "cublasLtMatmulDescSetAttribute", "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy",
    "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceDestroy", "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul"};
_Static_assert(sizeof(((lt_api *)0)->f) == sizeof(((lt_api *)0)->p), "one pointer per entry point");
#endif

ltk_status devmem_fp8_gemm_tflops(double seconds, double *tflops) {
    *tflops = 0.0;
#ifdef LTK_WITH_CUDA
    void *h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return tool_fail(LTK_EUNSUPPORTED, "cuBLASLt not found (%s): no FP8 GEMM ceiling", dlerror());
    lt_api api;
    const char *missing = NULL;
    for (int i = 0; i < LT_NFUNCS; i++)
        if (!(api.p[i] = dlsym(h, lt_names[i])) && !missing) missing = lt_names[i];
    if (missing) {
        dlclose(h);
        return tool_fail(LTK_EUNSUPPORTED, "cuBLASLt lacks %s, which the ceiling needs", missing);
    }
    const struct lt_fns F = api.f;
    /* 8192^3 (1.1 TFLOP a product, ~1 ms): big enough that launch gaps do not count */
    const int M = 8192, N = 8192, K = 8192;
    const size_t ws_bytes = (size_t)32 << 20;
    uint8_t *A = NULL, *B = NULL, *hbuf = NULL;
    void *C = NULL, *ws = NULL;
    cublasLtHandle_t lt = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    ltk_status st = LTK_OK;
    cudaError_t ce = cudaMalloc((void **)&A, (size_t)M * K);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&B, (size_t)K * N);
    if (ce == cudaSuccess) ce = cudaMalloc(&C, (size_t)M * N * 2);
    if (ce == cudaSuccess) ce = cudaMalloc(&ws, ws_bytes);
    hbuf = malloc((size_t)M * K);
    if (ce != cudaSuccess || !hbuf) {
        st = tool_fail(LTK_ENOMEM, "FP8 GEMM ceiling: buffers: %s", cudaGetErrorString(ce));
        goto done;
    }
    /* random finite e4m3 codes (never zeros: a product of zeros runs faster than real data) */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < (size_t)M * K; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint8_t v = (uint8_t)(s >> 24);
        hbuf[i] = (v & 0x7f) == 0x7f ? 0x38 : v;
    }
    ce = cudaMemcpy(A, hbuf, (size_t)M * K, cudaMemcpyHostToDevice);
    if (ce == cudaSuccess) ce = cudaMemcpy(B, hbuf, (size_t)K * N, cudaMemcpyHostToDevice);
    if (ce == cudaSuccess) ce = cudaEventCreate(&e0);
    if (ce == cudaSuccess) ce = cudaEventCreate(&e1);
    if (ce != cudaSuccess) {
        st = tool_fail(LTK_ECUDA, "FP8 GEMM ceiling: %s", cudaGetErrorString(ce));
        goto done;
    }
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N; /* FP8 on Hopper: A transposed, B not */
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (F.create(&lt) || F.d_create(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
        F.d_set(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        F.d_set(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        F.l_create(&la, CUDA_R_8F_E4M3, K, M, K) || F.l_create(&lb, CUDA_R_8F_E4M3, K, N, K) ||
        F.l_create(&lc, CUDA_R_16BF, M, N, M) || F.p_create(&pref) ||
        F.p_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes) ||
        F.heur(lt, op, la, lb, lc, lc, pref, 1, &res, &found) || found < 1) {
        st = tool_fail(LTK_EUNSUPPORTED, "cuBLASLt has no FP8 GEMM for this device");
        goto done;
    }
    const float alpha = 1.0f, beta = 0.0f;
    const double flop = 2.0 * M * N * (double)K;
    int64_t n = 0;
    double ms_total = 0.0;
    for (int phase = 0; phase < 2 && st == LTK_OK; phase++) { /* 0: warm-up, 1: timed */
        const double until = devmem_now_s() + (phase ? seconds : 0.5);
        if (phase) cudaEventRecord(e0, 0);
        while (devmem_now_s() < until && st == LTK_OK) {
            for (int i = 0; i < 20; i++)
                if (F.matmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &res.algo, ws, ws_bytes, 0)) {
                    st = tool_fail(LTK_ECUDA, "cublasLtMatmul failed");
                    break;
                }
            if (phase) n += 20;
            /* at most 20 products queued, so the host's clock bounds the device's time */
            if (cudaDeviceSynchronize() != cudaSuccess) st = tool_fail(LTK_ECUDA, "FP8 GEMM ceiling: device error");
        }
        if (phase && st == LTK_OK) {
            float ms = 0;
            cudaEventRecord(e1, 0);
            cudaEventSynchronize(e1);
            cudaEventElapsedTime(&ms, e0, e1);
            ms_total = ms;
        }
    }
    if (st == LTK_OK && ms_total > 0) *tflops = flop * (double)n / (ms_total * 1e-3) / 1e12;
done:
    if (pref) F.p_destroy(pref);
    if (lc) F.l_destroy(lc);
    if (lb) F.l_destroy(lb);
    if (la) F.l_destroy(la);
    if (op) F.d_destroy(op);
    if (lt) F.destroy(lt);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(ws);
    free(hbuf);
    (void)cudaGetLastError();
    dlclose(h);
    return st;
#else
    (void)seconds;
    return tool_fail(LTK_ENOBACKEND, "built without CUDA: no FP8 GEMM ceiling");
#endif
}
