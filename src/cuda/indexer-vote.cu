/* Hot-set update of an ltk_indexer_state on the GPU, on the call's stream (no host sync):
 * votes = how many rows of the call hold each key in their top-k (absolute indices); the new hot
 * set is the `capacity` most-voted keys, votes descending, then the larger (more recent) index.
 * Keys are ranked by one 64-bit composite (votes << 32 | key) sorted descending with CUB.
 *   S <= 2^26: a vote counter per key (atomics into an L2-resident array), then one sort of S
 *              composites;
 *   larger S : sort the T*k output keys, run-length encode, sort the (count, key) composites. */
#include <cub/cub.cuh>

#include "indexer.cuh"

#define VOTE_HIST_MAX_S (1ll << 26)

static int vote_bits(int64_t T) {
    int b = 1;
    while (b < 31 && (1ll << b) <= T) b++;
    return 32 + b;
}

__global__ void vote_count_kernel(const int32_t *out, int64_t stride, int64_t T, int32_t k, const int32_t *ks,
                                  const int32_t *ke, int64_t S, int absolute, uint32_t *cnt) {
    const int64_t n = T * (int64_t)k;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / k, j = i % k;
        int32_t v = out[t * stride + j];
        if (v < 0) continue;
        int64_t lo = 0, hi = S;
        if (!absolute) ltk_row_range(ks, ke, t, S, &lo, &hi);
        int64_t key = absolute ? (int64_t)v : lo + v;
        if (key >= 0 && key < S) atomicAdd(cnt + key, 1u);
    }
}

__global__ void vote_comp_hist_kernel(const uint32_t *cnt, int64_t S, uint64_t *comp) {
    for (int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; s < S; s += (int64_t)gridDim.x * blockDim.x)
        comp[s] = cnt[s] ? ((uint64_t)cnt[s] << 32) | (uint64_t)s : 0ull;
}

__global__ void vote_keys_kernel(const int32_t *out, int64_t stride, int64_t T, int32_t k, const int32_t *ks,
                                 const int32_t *ke, int64_t S, int absolute, int32_t *keys) {
    const int64_t n = T * (int64_t)k;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / k, j = i % k;
        int32_t v = out[t * stride + j];
        int64_t key = -1;
        if (v >= 0) {
            int64_t lo = 0, hi = S;
            if (!absolute) ltk_row_range(ks, ke, t, S, &lo, &hi);
            key = absolute ? (int64_t)v : lo + v;
        }
        keys[i] = (key >= 0 && key < S) ? (int32_t)key : 0x7fffffff;
    }
}

__global__ void vote_comp_runs_kernel(const int32_t *uniq, const int32_t *counts, const int32_t *nruns, int64_t n,
                                      uint64_t *comp) {
    const int64_t r = *nruns;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        comp[i] = (i < r && uniq[i] != 0x7fffffff) ? ((uint64_t)(uint32_t)counts[i] << 32) | (uint32_t)uniq[i] : 0ull;
}

/* keys[0] = number of nonzero composites among the first cap (they come first), keys[1..] = keys. */
__global__ void vote_store_kernel(const uint64_t *sorted, int64_t n, int32_t cap, int32_t *keys) {
    __shared__ int32_t s_cnt;
    const int64_t m = n < cap ? n : cap;
    if (threadIdx.x == 0) s_cnt = (int32_t)m;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
        uint64_t c = sorted[i];
        if (c == 0ull) atomicMin(&s_cnt, (int32_t)i);
        else keys[1 + i] = (int32_t)(uint32_t)c;
    }
    __syncthreads();
    if (threadIdx.x == 0) keys[0] = s_cnt;
}

extern "C" ltk_status ltk_idx_vote_workspace(int64_t T, int32_t k, int64_t S, int32_t cap, size_t *bytes) {
    (void)cap;
    size_t temp = 0, t2 = 0;
    if (S <= VOTE_HIST_MAX_S) {
        LTK_CUDA_TRY(cub::DeviceRadixSort::SortKeysDescending(NULL, temp, (const uint64_t *)NULL, (uint64_t *)NULL,
                                                               (int64_t)S, 0, vote_bits(T)));
        *bytes = ltk_al256(4 * (size_t)S) + 2 * ltk_al256(8 * (size_t)S) + ltk_al256(temp);
        return LTK_OK;
    }
    const int64_t n = T * (int64_t)k;
    LTK_CUDA_TRY(cub::DeviceRadixSort::SortKeys(NULL, temp, (const int32_t *)NULL, (int32_t *)NULL, n, 0, 31));
    LTK_CUDA_TRY(cub::DeviceRunLengthEncode::Encode(NULL, t2, (const int32_t *)NULL, (int32_t *)NULL, (int32_t *)NULL,
                                                    (int32_t *)NULL, n));
    temp = temp > t2 ? temp : t2;
    LTK_CUDA_TRY(cub::DeviceRadixSort::SortKeysDescending(NULL, t2, (const uint64_t *)NULL, (uint64_t *)NULL, n, 0,
                                                          vote_bits(T)));
    temp = temp > t2 ? temp : t2;
    *bytes = 4 * ltk_al256(4 * (size_t)n) + 2 * ltk_al256(8 * (size_t)n) + ltk_al256(256) + ltk_al256(temp);
    return LTK_OK;
}

extern "C" ltk_status ltk_idx_vote(const ltk_indexer_args *a, ltk_indexer_state *state, void *ws, size_t ws_bytes,
                                   cudaStream_t st) {
    const int64_t T = a->T, S = a->S;
    const int32_t k = a->k;
    const int abs_ = (a->flags & LTK_FLAG_ABSOLUTE) != 0;
    size_t need = 0;
    LTK_FORWARD_IF(ltk_idx_vote_workspace(T, k, S, state->capacity, &need));
    if (ws_bytes < need) return ltk_error(LTK_EINTERNAL, "vote workspace %zu < %zu", ws_bytes, need);
    uint8_t *w = (uint8_t *)ws;
    const int bits = vote_bits(T);
    if (S == 0 || T == 0) {
        LTK_CUDA_TRY(cudaMemsetAsync(state->keys, 0, sizeof(int32_t), st));
        return LTK_OK;
    }
    if (S <= VOTE_HIST_MAX_S) {
        uint32_t *cnt = (uint32_t *)w;
        uint64_t *comp = (uint64_t *)(w + ltk_al256(4 * (size_t)S));
        uint64_t *sorted = (uint64_t *)((uint8_t *)comp + ltk_al256(8 * (size_t)S));
        void *temp = (uint8_t *)sorted + ltk_al256(8 * (size_t)S);
        size_t temp_bytes = ws_bytes - (size_t)((uint8_t *)temp - w);
        LTK_CUDA_TRY(cudaMemsetAsync(cnt, 0, 4 * (size_t)S, st));
        vote_count_kernel<<<1024, 256, 0, st>>>(a->out_idx, a->out_stride, T, k, a->ks, a->ke, S, abs_, cnt);
        LTK_CUDA_TRY(cudaGetLastError());
        vote_comp_hist_kernel<<<1024, 256, 0, st>>>(cnt, S, comp);
        LTK_CUDA_TRY(cudaGetLastError());
        LTK_CUDA_TRY(cub::DeviceRadixSort::SortKeysDescending(temp, temp_bytes, comp, sorted, (int64_t)S, 0, bits, st));
        vote_store_kernel<<<1, 1024, 0, st>>>(sorted, S, state->capacity, state->keys);
        LTK_CUDA_TRY(cudaGetLastError());
        return LTK_OK;
    }
    const int64_t n = T * (int64_t)k;
    int32_t *keys = (int32_t *)w;
    int32_t *keys_s = (int32_t *)(w + ltk_al256(4 * (size_t)n));
    int32_t *uniq = (int32_t *)((uint8_t *)keys_s + ltk_al256(4 * (size_t)n));
    int32_t *counts = (int32_t *)((uint8_t *)uniq + ltk_al256(4 * (size_t)n));
    uint64_t *comp = (uint64_t *)((uint8_t *)counts + ltk_al256(4 * (size_t)n));
    uint64_t *sorted = (uint64_t *)((uint8_t *)comp + ltk_al256(8 * (size_t)n));
    int32_t *nruns = (int32_t *)((uint8_t *)sorted + ltk_al256(8 * (size_t)n));
    void *temp = (uint8_t *)nruns + ltk_al256(256);
    size_t temp_bytes = ws_bytes - (size_t)((uint8_t *)temp - w);
    vote_keys_kernel<<<1024, 256, 0, st>>>(a->out_idx, a->out_stride, T, k, a->ks, a->ke, S, abs_, keys);
    LTK_CUDA_TRY(cudaGetLastError());
    LTK_CUDA_TRY(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, keys, keys_s, n, 0, 31, st));
    LTK_CUDA_TRY(cub::DeviceRunLengthEncode::Encode(temp, temp_bytes, keys_s, uniq, counts, nruns, n, st));
    vote_comp_runs_kernel<<<1024, 256, 0, st>>>(uniq, counts, nruns, n, comp);
    LTK_CUDA_TRY(cudaGetLastError());
    LTK_CUDA_TRY(cub::DeviceRadixSort::SortKeysDescending(temp, temp_bytes, comp, sorted, n, 0, bits, st));
    vote_store_kernel<<<1, 1024, 0, st>>>(sorted, n, state->capacity, state->keys);
    LTK_CUDA_TRY(cudaGetLastError());
    return LTK_OK;
}
