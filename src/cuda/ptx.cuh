/* Every inline PTX of the CUDA backend, one thin wrapper an instruction: mbarrier, TMA
 * (cp.async.bulk.tensor), wgmma (FP8 e4m3 for the indexer, bf16/f16 for the kNN), shared-memory
 * matrix descriptors, setmaxnreg and named barriers (the sm_90a kernels: indexer-sm90.cu,
 * knn-sm90.cu), and cp.async, ldmatrix and mma.sync (the kNN's portable main loop, sm_80+:
 * knn-portable.cu). The layouts they assume are described where the kernels use them.
 * Shared-memory addresses are 32-bit (cvta to .shared). */
#ifndef LTK_CUDA_PTX_CUH
#define LTK_CUDA_PTX_CUH

#include <stdint.h>

/* Programmatic dependent launch (sm_90+; a no-op elsewhere and when the kernel was launched
 * without the attribute, ltk_launch_pdl): waits until the stream's previous kernel has finished
 * and its writes are visible. A kernel launched by ltk_launch_pdl calls it before it touches global
 * memory at all, so that every kernel of a stream still runs after the one before it; what overlaps
 * is the launch and the CTAs' start. */
static __device__ __forceinline__ void ltk_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the stream's next kernel, when launched by ltk_launch_pdl, place its CTAs from now on as
 * SMs free up (they wait in ltk_pdl_wait until this grid has finished): its launch and CTA start
 * overlap this kernel's tail instead of following it. Called at the start of each kernel of the
 * decode chain (lengths, scan, the select's two kernels). */
static __device__ __forceinline__ void ltk_pdl_launch(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

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

/* The same loads with an L2 cache policy (ltk_l2_evict_first). */
static __device__ __forceinline__ void ltk_tma_load_2d_hint(void *dst, const void *desc, uint64_t *bar, int32_t c0,
                                                            int32_t c1, uint64_t pol) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, "
                 "{%3, %4}], [%2], %5;" ::"r"(ltk_smem_addr(dst)),
                 "l"((uint64_t)desc), "r"(ltk_smem_addr(bar)), "r"(c0), "r"(c1), "l"(pol)
                 : "memory");
}
static __device__ __forceinline__ void ltk_tma_load_3d_hint(void *dst, const void *desc, uint64_t *bar, int32_t c0,
                                                            int32_t c1, int32_t c2, uint64_t pol) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, "
                 "{%3, %4, %5}], [%2], %6;" ::"r"(ltk_smem_addr(dst)),
                 "l"((uint64_t)desc), "r"(ltk_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "l"(pol)
                 : "memory");
}
/* An L2 policy under which the lines an access brings in are the first to go: for data read once
 * (a decode step's cache blocks), so that it does not push out what the next kernel reads. */
static __device__ __forceinline__ uint64_t ltk_l2_evict_first(void) {
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
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
/* The same with N = 64 (the decode scan of one query row a q-block: no tensor work on absent rows). */
static __device__ __forceinline__ void ltk_wgmma_m64n64k32_e4m3(float *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1;\n\t}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(scale_d));
}
/* The same with N = 32 (the decode scan of one query row a q-block: no tensor work on absent rows). */
static __device__ __forceinline__ void ltk_wgmma_m64n32k32_e4m3(float *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %18, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "%16, %17, p, 1, 1;\n\t}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(scale_d));
}

/* D[64x128] (+)= A[64x16] * B[128x16]^T, bf16 (DT 2) or f16 (DT 1) from shared memory (K-major),
 * fp32 in registers; scale_d as above. Empty outside sm_90a code (knn-sm90.cu's sm_80 image never runs it). */
template <int DT>
static __device__ __forceinline__ void ltk_wgmma_m64n128k16_16b(float *d, uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LTK_WGMMA_REGS                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                            \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                   \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                   \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                  \
    "%64, %65, p, 1, 1, 0, 0;\n\t}"
#define LTK_WGMMA_OPS                                                                                    \
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),    \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),           \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),         \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),         \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),         \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),         \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),         \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),         \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])          \
    : "l"(da), "l"(db), "r"(scale_d)
    if (DT == 2)
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " LTK_WGMMA_REGS LTK_WGMMA_OPS);
    else
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " LTK_WGMMA_REGS LTK_WGMMA_OPS);
#undef LTK_WGMMA_REGS
#undef LTK_WGMMA_OPS
#endif
}

/* ---- cp.async, ldmatrix, mma.sync (sm_80+) ---------------------------------------------------- *
 * Built for an older target (e.g. a CMake default of sm_75) they compile to a trap; the host side
 * refuses devices below compute capability 8.0 before launching anything. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define LTK_SM80(...) __trap()
#else
#define LTK_SM80(...) __VA_ARGS__
#endif
/* 16 bytes global -> shared, bypassing L1; ok = 0 zero-fills the destination instead. */
static __device__ __forceinline__ void ltk_cp_async16(uint32_t dst, const void *src, bool ok) {
    LTK_SM80(asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory"));
}
/* The same with the first nbytes (0 .. 16) read and the rest zero-filled. */
static __device__ __forceinline__ void ltk_cp_async16_n(uint32_t dst, const void *src, uint32_t nbytes) {
    LTK_SM80(asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(nbytes) : "memory"));
}
/* An arrival on bar once this thread's earlier cp.async copies have landed, counted against the
 * barrier's expected arrivals (.noinc: the init count includes it). */
static __device__ __forceinline__ void ltk_cp_async_mbar_arrive_noinc(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(ltk_smem_addr(bar)) : "memory");
}
static __device__ __forceinline__ void ltk_cp_async_commit() { LTK_SM80(asm volatile("cp.async.commit_group;" ::: "memory")); }
/* Waits until at most N committed groups are still in flight. */
template <int N> static __device__ __forceinline__ void ltk_cp_async_wait() {
    LTK_SM80(asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"));
}
/* Four 8x8 b16 matrices from shared memory, one row address a lane. */
static __device__ __forceinline__ void ltk_ldmatrix_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                                       uint32_t &r3) {
    LTK_SM80(asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                          : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                          : "r"(addr)));
}
/* C[16x8] += A[16x16] * B[16x8], f16 (DT 1) or bf16 (DT 2) operands in registers, fp32 accumulators. */
template <int DT>
static __device__ __forceinline__ void ltk_mma_m16n8k16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();
#else
    if (DT == 1)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* ReLU that keeps NaN (max.NaN propagates it), matching the reference's ReLU on a NaN dot. */
static __device__ __forceinline__ float ltk_relu_nan(float x) {
    float r;
    asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(r) : "f"(x));
    return r;
}

#endif
