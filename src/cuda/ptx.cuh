/* Thin inline-PTX wrappers for the sm_90a indexer kernel: mbarrier, TMA (cp.async.bulk.tensor),
 * wgmma (FP8 e4m3 x e4m3 -> fp32, m64n128k32), shared-memory matrix descriptors, setmaxnreg,
 * named barriers. One instruction per function; the layouts they assume are described where the
 * kernel uses them (indexer-sm90.cu). Shared-memory addresses are 32-bit (cvta to .shared). */
#ifndef LTK_CUDA_PTX_CUH
#define LTK_CUDA_PTX_CUH

#include <stdint.h>

static __device__ __forceinline__ uint32_t ltk_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier ------------------------------------------------------------------------------ */
static __device__ __forceinline__ void ltk_mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ltk_smem_addr(bar)), "r"(count) : "memory");
}
/* Makes mbarrier.init visible to the async proxy (TMA) before the first use. */
static __device__ __forceinline__ void ltk_fence_mbar_init(void) {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
static __device__ __forceinline__ void ltk_mbar_arrive(uint64_t *bar) {
    asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(ltk_smem_addr(bar))
                 : "memory");
}
static __device__ __forceinline__ void ltk_mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}" ::"r"(
                     ltk_smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ uint32_t ltk_mbar_try_wait(uint64_t *bar, uint32_t parity) {
    uint32_t ok;
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(ok)
        : "r"(ltk_smem_addr(bar)), "r"(parity)
        : "memory");
    return ok;
}
/* Blocks until the phase with the given parity has completed. */
static __device__ __forceinline__ void ltk_mbar_wait(uint64_t *bar, uint32_t parity) {
    while (!ltk_mbar_try_wait(bar, parity)) {
    }
}
/* Nanoseconds of the global timer (the same clock on every SM): watchdogs of spin loops. */
static __device__ __forceinline__ uint64_t ltk_globaltimer(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* ---- TMA ----------------------------------------------------------------------------------- */
static __device__ __forceinline__ void ltk_tma_prefetch_desc(const void *desc) {
    asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)desc) : "memory");
}
static __device__ __forceinline__ void ltk_tma_load_2d(void *dst, const void *desc, uint64_t *bar, int32_t c0,
                                                       int32_t c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
            ltk_smem_addr(dst)),
        "l"((uint64_t)desc), "r"(ltk_smem_addr(bar)), "r"(c0), "r"(c1)
        : "memory");
}
static __device__ __forceinline__ void ltk_tma_load_3d(void *dst, const void *desc, uint64_t *bar, int32_t c0,
                                                       int32_t c1, int32_t c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
        "[%2];" ::"r"(ltk_smem_addr(dst)),
        "l"((uint64_t)desc), "r"(ltk_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

/* ---- warp-group register reallocation and named barriers ------------------------------------ */
template <int N> static __device__ __forceinline__ void ltk_setmaxnreg_dec(void) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> static __device__ __forceinline__ void ltk_setmaxnreg_inc(void) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
static __device__ __forceinline__ void ltk_named_bar_sync(uint32_t id, uint32_t count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/* ---- wgmma --------------------------------------------------------------------------------- */
static __device__ __forceinline__ void ltk_wgmma_fence(void) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
static __device__ __forceinline__ void ltk_wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> static __device__ __forceinline__ void ltk_wgmma_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving accumulator reads/writes across wgmma issue/wait points. */
static __device__ __forceinline__ void ltk_fence_operand(float &r) { asm volatile("" : "+f"(r)::"memory"); }

/* Shared-memory matrix descriptor for a K-major operand stored as rows of 128 bytes with the
 * 128-byte swizzle (what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B): 8-row core groups are
 * 1024 bytes apart (stride byte offset), the leading byte offset is unused for this layout.
 * Bits: [0,14) addr>>4, [16,30) LBO>>4, [32,46) SBO>>4, [62,64) layout (1 = 128B swizzle). */
static __device__ __forceinline__ uint64_t ltk_desc_sw128(const void *smem) {
    uint64_t a = (uint64_t)((ltk_smem_addr(smem) & 0x3ffffu) >> 4);
    return a | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

/* D[64x128] (+)= A[64x32] * B[128x32]^T, A and B e4m3 from shared memory (K-major), D fp32 in
 * registers. scale_d = 0 overwrites D (first K step), 1 accumulates. */
static __device__ __forceinline__ void ltk_wgmma_m64n128k32_e4m3(float *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1;\n\t}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d));
}

/* ReLU that keeps NaN (max.NaN propagates it), matching the reference's ReLU on a NaN dot. */
static __device__ __forceinline__ float ltk_relu_nan(float x) {
    float r;
    asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(r) : "f"(x));
    return r;
}

#endif
