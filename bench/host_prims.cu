/* The host cost of the CUDA runtime calls a litetopk call is made of, and of the library's own steps
 * at a decode shape, each timed alone on the host clock (median of REPS) in one process: what the
 * C path's host time per call (bench/host_cost.py, `litetopk bench` host_us) is built from.
 *
 *   nvcc -O2 -std=c++17 -Iinclude bench/host_prims.cu -Lgpu-bin -llitetopk -o /tmp/host-prims
 *   LD_LIBRARY_PATH=gpu-bin /tmp/host-prims [B ctx next_n]      (default 64 65536 1)
 *
 * "held" rows time a call while the stream waits behind a host function (so nothing waits for the
 * GPU, as in a serving loop whose GPU runs behind); "idle" rows with the GPU idle. One JSON line on
 * stdout per row (bench/record.py adds it to a record). */
#include <cuda.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "litetopk.h"

#define REPS 201

__global__ void empty_kernel(int *p) {
    if (p && threadIdx.x == 0) *p = 1;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static void CUDART_CB hold_fn(void *) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}
#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* Median host time of fn over REPS calls; held: behind a 20 ms host function every 50 calls. */
template <class F> static double time_us(F fn, int held) {
    double t[REPS];
    for (int i = 0; i < REPS; i++) {
        if (held && i % 50 == 0) {
            CK(cudaStreamSynchronize(0));
            CK(cudaLaunchHostFunc(0, hold_fn, NULL));
        }
        const double t0 = now_us();
        fn();
        t[i] = now_us() - t0;
        if (!held) CK(cudaStreamSynchronize(0));
    }
    CK(cudaDeviceSynchronize());
    qsort(t, REPS, sizeof(double), cmp);
    return t[REPS / 2];
}

static void row(const char *what, const char *cond, double us) {
    printf("{\"op\": \"host_prims\", \"harness\": \"bench/host_prims.cu\", \"what\": \"%s\", \"gpu\": \"%s\", "
           "\"us\": %.3f}\n", what, cond, us);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const int64_t B = argc > 1 ? atoll(argv[1]) : 64, ctx = argc > 2 ? atoll(argv[2]) : 65536;
    const int32_t next_n = argc > 3 ? atoi(argv[3]) : 1, H = 64, D = 128, bkv = 64, k = 2048;
    CK(cudaFree(0));
    int *d = NULL;
    CK(cudaMalloc(&d, 4));
    for (int held = 0; held < 2; held++) {
        const char *c = held ? "held" : "idle";
        row("kernel launch", c, time_us([&] { empty_kernel<<<1, 32>>>(d); }, held));
        row("kernel launch, 132 CTAs x 384 threads, 200 KB smem", c, time_us([&] {
                static int set = 0;
                if (!set) {
                    set = 1;
                    CK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
                }
                empty_kernel<<<132, 384, 200 << 10>>>(d);
            }, held));
    }
    int n = 0, dev = 0;
    cudaStreamCaptureStatus cs;
    row("cudaGetDeviceCount", "idle", time_us([&] { cudaGetDeviceCount(&n); }, 0));
    row("cudaGetDevice", "idle", time_us([&] { cudaGetDevice(&dev); }, 0));
    row("cudaStreamIsCapturing", "idle", time_us([&] { cudaStreamIsCapturing(0, &cs); }, 0));
    row("cudaFuncSetAttribute (same value)", "idle", time_us([&] {
            cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10);
        }, 0));
    {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q;
        CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
        typedef CUresult (*enc_t)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
        enc_t enc = (enc_t)fn;
        void *buf = NULL;
        CK(cudaMalloc(&buf, 1 << 24));
        CUtensorMap m;
        cuuint64_t dim[3] = {128, 64, 64}, str[2] = {128, 128 * 64};
        cuuint32_t box[3] = {128, 64, 1}, one[3] = {1, 1, 1};
        row("cuTensorMapEncodeTiled", "idle", time_us([&] {
                enc(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, buf, dim, str, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
            }, 0));
        cudaFree(buf);
    }
    row("cudaMalloc + cudaFree (64 MB)", "idle", time_us([&] {
            void *p;
            cudaMalloc(&p, 64 << 20);
            cudaFree(p);
        }, 0));
    row("cudaMallocAsync + cudaFreeAsync (64 MB)", "held", time_us([&] {
            void *p;
            cudaMallocAsync(&p, 64 << 20, 0);
            cudaFreeAsync(p, 0);
        }, 1));

    {
        cudaEvent_t ev;
        CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        row("cudaEventRecord + cudaStreamWaitEvent", "held", time_us([&] {
                cudaEventRecord(ev, 0);
                cudaStreamWaitEvent(0, ev, 0);
            }, 1));
        cudaMemPool_t pool;
        CK(cudaDeviceGetDefaultMemPool(&pool, 0));
        uint64_t keep = UINT64_MAX;
        CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        row("cudaMallocAsync + cudaFreeAsync (64 MB, pool keeps it)", "held", time_us([&] {
                void *p;
                cudaMallocAsync(&p, 64 << 20, 0);
                cudaFreeAsync(p, 0);
            }, 1));
    }

    /* the library at a decode shape: random bytes (the host cost does not depend on them) */
    ltk_decode_args a;
    memset(&a, 0, sizeof a);
    a.B = B, a.next_n = next_n, a.H = H, a.D = D, a.k = k, a.dtype = LTK_DTYPE_E4M3, a.block_kv = bkv;
    a.max_blocks = (int32_t)((ctx + bkv - 1) / bkv), a.num_blocks = B * a.max_blocks;
    a.block_stride = bkv * (D + 4), a.max_len = (int32_t)ctx;
    void *q, *cache, *w, *lens, *table, *oi, *ws;
    CK(cudaMalloc(&q, (size_t)(B * next_n * H * D)));
    CK(cudaMalloc(&cache, (size_t)(a.num_blocks * a.block_stride)));
    CK(cudaMemset(cache, 0, (size_t)(a.num_blocks * a.block_stride)));
    CK(cudaMalloc(&w, sizeof(float) * (size_t)(B * next_n * H)));
    CK(cudaMalloc(&lens, 4 * (size_t)B));
    CK(cudaMalloc(&table, 4 * (size_t)(B * a.max_blocks)));
    CK(cudaMalloc(&oi, 4 * (size_t)(B * next_n * k)));
    CK(cudaMemset(q, 0, (size_t)(B * next_n * H * D)));
    CK(cudaMemset(w, 0, sizeof(float) * (size_t)(B * next_n * H)));
    CK(cudaMemset(lens, 0, 4 * (size_t)B));
    CK(cudaMemset(table, 0, 4 * (size_t)(B * a.max_blocks)));
    a.q = q, a.kv_cache = (const uint8_t *)cache, a.weights = (const float *)w, a.seq_lens = (const int32_t *)lens;
    a.block_table = (const int32_t *)table, a.out_idx = (int32_t *)oi, a.flags = LTK_FLAG_UNSORTED;
    ltk_exec e;
    memset(&e, 0, sizeof e);
    e.backend = LTK_BACKEND_CUDA;
    size_t wsb = 0;
    if (ltk_decode_workspace_size(&a, &e, &wsb) != LTK_OK) {
        fprintf(stderr, "workspace size: %s\n", ltk_last_error());
        return 1;
    }
    CK(cudaMalloc(&ws, wsb));
    char what[160];
    snprintf(what, sizeof what, "ltk_decode_workspace_size B=%lld ctx=%lld next_n=%d", (long long)B, (long long)ctx,
             next_n);
    row(what, "idle", time_us([&] { ltk_decode_workspace_size(&a, &e, &wsb); }, 0));
    ltk_exec ew = e;
    ew.workspace = ws, ew.workspace_bytes = wsb;
    for (int held = 0; held < 2; held++) {
        snprintf(what, sizeof what, "ltk_decode_topk B=%lld ctx=%lld next_n=%d, workspace", (long long)B,
                 (long long)ctx, next_n);
        row(what, held ? "held" : "idle", time_us([&] {
                if (ltk_decode_topk(&a, &ew) != LTK_OK) fprintf(stderr, "%s\n", ltk_last_error()), exit(1);
            }, held));
        snprintf(what, sizeof what, "ltk_decode_topk B=%lld ctx=%lld next_n=%d, no workspace", (long long)B,
                 (long long)ctx, next_n);
        row(what, held ? "held" : "idle", time_us([&] {
                if (ltk_decode_topk(&a, &e) != LTK_OK) fprintf(stderr, "%s\n", ltk_last_error()), exit(1);
            }, held));
    }
    return 0;
}
