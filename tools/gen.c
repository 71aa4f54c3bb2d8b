/* Synthetic inputs. Each knob of the DSA generator is tied to a published fact about real indexer
 * inputs (see the comment above gen_dsa_make). */
#include "gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "num.h"

/* ---- random numbers ----------------------------------------------------------------------- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void gen_rng_seed(gen_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->has_spare = 0;
    r->spare = 0.0;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gen_u64(gen_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return result;
}

double gen_uniform(gen_rng *r) { return (double)(gen_u64(r) >> 11) * 0x1.0p-53; }

double gen_normal(gen_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, s;
    do { /* Marsaglia polar method */
        u = 2.0 * gen_uniform(r) - 1.0;
        v = 2.0 * gen_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    r->spare = v * f;
    r->has_spare = 1;
    return u * f;
}

/* ---- encodings ---------------------------------------------------------------------------- */
ltk_status gen_encode(const float *src, int64_t n, ltk_dtype dtype, void **out) {
    size_t es = ltk_dtype_size(dtype);
    *out = NULL;
    if (es == 0) return tool_fail(LTK_EINVAL, "unknown dtype %d", (int)dtype);
    void *dst = malloc((size_t)(n > 0 ? n : 1) * es);
    if (!dst) return tool_fail(LTK_ENOMEM, "cannot allocate %lld elements", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case LTK_DTYPE_F32: ((float *)dst)[i] = src[i]; break;
        case LTK_DTYPE_F16: ((uint16_t *)dst)[i] = num_f32_to_f16(src[i]); break;
        case LTK_DTYPE_BF16: ((uint16_t *)dst)[i] = num_f32_to_bf16(src[i]); break;
        case LTK_DTYPE_E4M3: ((uint8_t *)dst)[i] = num_f32_to_e4m3(src[i]); break;
        }
    }
    *out = dst;
    return LTK_OK;
}

void gen_round_to(float *x, int64_t n, ltk_dtype dtype) {
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case LTK_DTYPE_F32: break;
        case LTK_DTYPE_F16: x[i] = num_f16_to_f32(num_f32_to_f16(x[i])); break;
        case LTK_DTYPE_BF16: x[i] = num_bf16_to_f32(num_f32_to_bf16(x[i])); break;
        case LTK_DTYPE_E4M3: x[i] = num_e4m3_to_f32(num_f32_to_e4m3(x[i])); break;
        }
    }
}

/* ---- DSA workload -------------------------------------------------------------------------- */
/* In-place orthonormal Walsh-Hadamard transform (scale n^-1/2), n a power of two: the rotation the
 * DeepSeek indexer applies to q and k before quantising (it preserves inner products and spreads
 * outlier channels, which is what makes per-token e4m3 scales work). */
static void hadamard(float *x, int n) {
    for (int len = 1; len < n; len <<= 1)
        for (int i = 0; i < n; i += len << 1)
            for (int j = i; j < i + len; j++) {
                float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
    float s = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= s;
}

/* Power-of-two (UE8M0) scale covering amax at the e4m3 maximum, as DeepSeek's act_quant with
 * scale_fmt="ue8m0" and vLLM's indexer quantiser do; amax is clamped at 1e-4 like theirs. */
static float ue8m0_scale(float amax) {
    if (amax < 1e-4f) amax = 1e-4f;
    return ldexpf(1.0f, (int)ceil(log2((double)amax / 448.0)));
}

/* Quantises one vector to e4m3 with its own scale; returns the scale. */
static float quantize_e4m3(const float *x, int n, uint8_t *dst) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float scale = ue8m0_scale(amax), inv = 1.0f / scale;
    for (int i = 0; i < n; i++) dst[i] = num_f32_to_e4m3(x[i] * inv);
    return scale;
}

static void store_vec(const float *x, int n, ltk_dtype dt, void *base, int64_t offset) {
    for (int i = 0; i < n; i++) {
        if (dt == LTK_DTYPE_F32) ((float *)base)[offset + i] = x[i];
        else ((uint16_t *)base)[offset + i] = num_f32_to_bf16(x[i]);
    }
}

void gen_dsa_free(gen_dsa *d) {
    if (!d) return;
    free(d->q), free(d->kv), free(d->kv_scale), free(d->weights), free(d->ks), free(d->ke);
    memset(d, 0, sizeof *d);
}

/*
 * The generator (every knob tied to a fact in data.md section 6 / dsa-contract.md):
 *
 *  Latent structure. M = 64 "topic" directions u_j ~ N(0, I_D). The token stream (keys and the
 *  queries' own positions) is cut into runs ("paragraphs") of geometric length, mean 1024 tokens,
 *  each with a random topic; a query's topic is that of its own position. Positional locality:
 *  recent keys share the query's topic, so top-k sets have a recency component (knob 6).
 *  Four "sink" directions: the first 4 keys and a random 0.4% of all keys are heavy hitters that lean
 *  toward one sink; every head leans toward one sink too, so the same few hundred keys rank high in
 *  most rows of every chunk (the 93.6-98.6% persistence of the LiteTopK README, knob 5).
 *
 *  Keys. k_s = sigma_s (0.8 n_s + 0.6 u_topic(s) [+ 0.8 u_sink for heavy hitters]), n_s ~ N(0, I),
 *  sigma_s = exp(0.25 N(0,1)) (key norm spread, knob 1). Most q.k are bulk N(0, D)-like (scores
 *  concentrate, knob 2); topic matches and sinks form the thin upper tail.
 *
 *  Queries. Per head q_{t,h} = c_h (z_{t,h} + 0.25 u_topic(t) + 0.3 u_sink(h)) with an AR(1) walk
 *  z_{t,h} = rho z_{t-1,h} + sqrt(1 - rho^2) N(0, I): adjacent queries are correlated (rho = 0.95 by
 *  default), so a chunk's hot set predicts the next chunk's top-k. c_h = exp(0.3 N(0,1)).
 *  About half of the head dots are negative, so the ReLU zeroes a realistic share of terms.
 *
 *  Weights. w_raw[t,h] = b_h + 0.3 N(0,1), b_h ~ N(0.5, 0.5): mostly positive, some heads negative
 *  (the contract allows any sign).
 *
 *  Pipeline (knob 1, dsa-contract.md sections 1 and 3). q and k are rotated by the orthonormal
 *  Hadamard transform (D a power of two), then for E4M3: k quantised per token with a power-of-two
 *  scale amax/448 (kv_scale[s] = that scale), q per (token, head) likewise, and the q scale folded
 *  into the weights together with D^-0.5 H^-0.5 (vLLM's fused_indexer_q_rope_quant). BF16 / F32
 *  store the rotated values directly with kv_scale = NULL.
 *
 *  Ranges. Causal prefill: ks = 0, ke[t] = ctx + t + 1.
 */
#define GEN_BLOCK 1024

const char *const gen_dsa_dists[] = {"dsa", "equal", "zero", "distinct2", "distinct4", "distinct16", "plateau0",
                                     "plateau-half", "plateau-k1", "plateau-k", "plateau-4k", "scale-hi", "scale-lo",
                                     NULL};

int gen_dsa_dist_known(const char *name) {
    for (int i = 0; gen_dsa_dists[i]; i++)
        if (!strcmp(name, gen_dsa_dists[i])) return 1;
    return 0;
}

/* Element i of a [n] array of dtype dt: copy from j, or the negation of j (the sign bit flipped:
 * exact in e4m3, bf16 and f32). */
static void dsa_put(void *a, size_t es, int64_t i, int64_t j, int neg) {
    uint8_t *p = (uint8_t *)a;
    memmove(p + (size_t)i * es, p + (size_t)j * es, es);
    if (neg) p[(size_t)i * es + es - 1] ^= 0x80u; /* little-endian: the sign is in the last byte */
}

/* Reshapes the generated inputs so that the scores follow spec->dist (gen_dsa_dists). */
static ltk_status dsa_reshape(const gen_dsa_spec *spec, gen_dsa *d) {
    const char *dist = spec->dist;
    if (!dist || !strcmp(dist, "dsa")) return LTK_OK;
    if (!gen_dsa_dist_known(dist)) return tool_fail(LTK_EINVAL, "DSA generator: unknown distribution '%s'", dist);
    const int64_t S = d->S, T = d->T, H = d->H, D = d->D, k = spec->k > 0 ? spec->k : 2048;
    const size_t es = ltk_dtype_size(d->dtype);
    if (!strncmp(dist, "scale-", 6)) {
        const float f = !strcmp(dist, "scale-hi") ? 1e30f : 1e-30f;
        if (d->kv_scale)
            for (int64_t s = 0; s < S; s++) d->kv_scale[s] *= f;
        else
            for (int64_t i = 0; i < T * H; i++) d->weights[i] *= f;
        return LTK_OK;
    }
    if (!strncmp(dist, "distinct", 8)) {
        const int64_t n = atoi(dist + 8);
        for (int64_t s = n; s < S; s++) {
            for (int64_t x = 0; x < D; x++) dsa_put(d->kv, es, s * D + x, (s % n) * D + x, 0);
            if (d->kv_scale) d->kv_scale[s] = d->kv_scale[s % n];
        }
        return LTK_OK;
    }
    /* equal, zero and the plateaus start from every key a copy of the first */
    int64_t m = -1; /* keys scoring > 0 (plateaus), -1: all (equal) */
    if (!strcmp(dist, "zero") || !strcmp(dist, "plateau0")) m = 0;
    else if (!strcmp(dist, "plateau-half")) m = k / 2;
    else if (!strcmp(dist, "plateau-k1")) m = k - 1;
    else if (!strcmp(dist, "plateau-k")) m = k;
    else if (!strcmp(dist, "plateau-4k")) m = 4 * k;
    uint8_t *pos = calloc((size_t)(S > 0 ? S : 1), 1);
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(S > 0 ? S : 1));
    if (!pos || !perm) {
        free(pos), free(perm);
        return tool_fail(LTK_ENOMEM, "DSA generator: out of memory for a plateau of %lld keys", (long long)S);
    }
    gen_rng rng;
    gen_rng_seed(&rng, spec->seed ^ 0x9e3779b97f4a7c15ull);
    for (int64_t i = 0; i < S; i++) perm[i] = i;
    if (m < 0) memset(pos, 1, (size_t)S); /* equal: every key */
    for (int64_t i = 0; i < m && i < S; i++) { /* exactly min(m, S) positions */
        int64_t j = i + (int64_t)(gen_u64(&rng) % (uint64_t)(S - i)), x = perm[i];
        perm[i] = perm[j], perm[j] = x;
        pos[perm[i]] = 1;
    }
    for (int64_t s = 1; s < S; s++) {
        for (int64_t x = 0; x < D; x++) dsa_put(d->kv, es, s * D + x, x, m >= 0 && !pos[s]);
        if (d->kv_scale) d->kv_scale[s] = m < 0 ? d->kv_scale[0] : d->kv_scale[s]; /* plateaus: distinct > 0 */
    }
    if (m >= 0) { /* key 0 itself: negated unless it is one of the m */
        if (!pos[0])
            for (int64_t x = 0; x < D; x++) ((uint8_t *)d->kv)[(size_t)x * es + es - 1] ^= 0x80u;
        /* every query head the positive key (= +-key 0), the weights' signs dropped: a positive
         * dot then scores > 0, the negated keys' dot is < 0 and scores 0 */
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                for (int64_t x = 0; x < D; x++) {
                    memcpy((uint8_t *)d->q + (size_t)((t * H + h) * D + x) * es, (uint8_t *)d->kv + (size_t)x * es, es);
                    if (!pos[0]) ((uint8_t *)d->q)[(size_t)((t * H + h) * D + x) * es + es - 1] ^= 0x80u;
                }
                d->weights[t * H + h] = fabsf(d->weights[t * H + h]);
            }
    }
    free(pos), free(perm);
    return LTK_OK;
}

ltk_status gen_dsa_make(const gen_dsa_spec *spec, gen_dsa *out) {
    memset(out, 0, sizeof *out);
    const int64_t T = spec->T, S = spec->ctx + spec->T;
    const int H = spec->H, D = spec->D;
    const ltk_dtype dt = spec->dtype;
    if (spec->ctx < 0 || T < 0 || S > INT32_MAX || H < 1 || D < 1 || D > 4096)
        return tool_fail(LTK_EINVAL, "DSA generator: bad shape ctx=%lld T=%lld H=%d D=%d", (long long)spec->ctx,
                         (long long)T, H, D);
    if (dt != LTK_DTYPE_E4M3 && dt != LTK_DTYPE_BF16 && dt != LTK_DTYPE_F32)
        return tool_fail(LTK_EINVAL, "DSA generator: dtype must be e4m3, bf16 or f32");
    enum { TOPICS = 64, SINKS = 4 };
    const double mean_run = 1024.0, hot_frac = 0.004;
    double rho = spec->rho;
    if (rho < 0.0) rho = 0.0;
    if (rho > 0.9999) rho = 0.9999;
    const int pow2 = (D & (D - 1)) == 0;
    const size_t es = ltk_dtype_size(dt);

    gen_rng rng;
    gen_rng_seed(&rng, spec->seed);
    float *topic_dir = malloc(sizeof(float) * (size_t)(TOPICS + SINKS) * (size_t)D);
    int32_t *topic = malloc(sizeof(int32_t) * (size_t)(S > 0 ? S : 1));
    float *head_c = malloc(sizeof(float) * (size_t)H), *head_b = malloc(sizeof(float) * (size_t)H);
    out->q = malloc((size_t)(T > 0 ? T : 1) * (size_t)H * (size_t)D * es);
    out->kv = malloc((size_t)(S > 0 ? S : 1) * (size_t)D * es);
    out->weights = malloc(sizeof(float) * (size_t)(T > 0 ? T : 1) * (size_t)H);
    out->ks = malloc(sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
    out->ke = malloc(sizeof(int32_t) * (size_t)(T > 0 ? T : 1));
    if (dt == LTK_DTYPE_E4M3) out->kv_scale = malloc(sizeof(float) * (size_t)(S > 0 ? S : 1));
    ltk_status st = LTK_OK;
    if (!topic_dir || !topic || !head_c || !head_b || !out->q || !out->kv || !out->weights || !out->ks ||
        !out->ke || (dt == LTK_DTYPE_E4M3 && !out->kv_scale)) {
        st = tool_fail(LTK_ENOMEM, "DSA generator: out of memory for ctx=%lld T=%lld H=%d D=%d", (long long)spec->ctx,
                       (long long)T, H, D);
        gen_dsa_free(out);
        goto done;
    }
    out->T = T, out->S = S, out->H = H, out->D = D, out->dtype = dt;

    for (int64_t i = 0; i < (int64_t)(TOPICS + SINKS) * D; i++) topic_dir[i] = (float)gen_normal(&rng);
    /* Paragraph runs with geometric lengths. */
    for (int64_t s = 0, cur = 0; s < S; s++) {
        if (s == 0 || gen_uniform(&rng) < 1.0 / mean_run) cur = (int64_t)(gen_u64(&rng) % TOPICS);
        topic[s] = (int32_t)cur;
    }

    /* Keys and queries are made in blocks of GEN_BLOCK tokens, each with its own random stream
     * (seed, kind, block): the same data for any number of threads, and an L = 1M prefill input
     * in seconds instead of minutes. A query block starts its AR(1) walk from the walk's stationary
     * law N(0, I), so the correlation of adjacent queries is the same everywhere except that it
     * restarts every GEN_BLOCK tokens (the hot set still matters within and across chunks: topics
     * and sinks are shared). */
    for (int h = 0; h < H; h++) {
        head_c[h] = (float)exp(0.3 * gen_normal(&rng));
        head_b[h] = (float)(0.5 + 0.5 * gen_normal(&rng));
    }
    const float innov = (float)sqrt(1.0 - rho * rho), fold = 1.0f / sqrtf((float)D) / sqrtf((float)H);
    const int64_t kblocks = (S + GEN_BLOCK - 1) / GEN_BLOCK, qblocks = (T + GEN_BLOCK - 1) / GEN_BLOCK;
    int oom = 0;
#pragma omp parallel
    {
        float *v = malloc(sizeof(float) * (size_t)D);
        float *zz = malloc(sizeof(float) * (size_t)H * (size_t)D);
        if (!v || !zz) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < kblocks; b++) {
            if (!v) continue;
            gen_rng r;
            gen_rng_seed(&r, spec->seed ^ (0x6b657973ull << 32) ^ (uint64_t)b * 0x9e3779b97f4a7c15ull);
            for (int64_t s = b * GEN_BLOCK; s < S && s < (b + 1) * GEN_BLOCK; s++) {
                const float *u = topic_dir + (size_t)topic[s] * D;
                const int hot = s < 4 || gen_uniform(&r) < hot_frac;
                const float *sink = topic_dir + (size_t)(TOPICS + (int)(gen_u64(&r) % SINKS)) * D;
                const float sigma = (float)exp(0.25 * gen_normal(&r));
                for (int d = 0; d < D; d++) {
                    float x = 0.8f * (float)gen_normal(&r) + 0.6f * u[d];
                    if (hot) x += 0.8f * sink[d];
                    v[d] = sigma * x;
                }
                if (pow2) hadamard(v, D);
                if (dt == LTK_DTYPE_E4M3) out->kv_scale[s] = quantize_e4m3(v, D, (uint8_t *)out->kv + (size_t)s * D);
                else store_vec(v, D, dt, out->kv, s * D);
            }
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < qblocks; b++) {
            if (!v || !zz) continue;
            gen_rng r;
            gen_rng_seed(&r, spec->seed ^ (0x71756572ull << 32) ^ (uint64_t)b * 0x9e3779b97f4a7c15ull);
            for (int64_t i = 0; i < (int64_t)H * D; i++) zz[i] = (float)gen_normal(&r);
            for (int64_t t = b * GEN_BLOCK; t < T && t < (b + 1) * GEN_BLOCK; t++) {
                const float *u = topic_dir + (size_t)topic[spec->ctx + t] * D;
                for (int h = 0; h < H; h++) {
                    float *zh = zz + (size_t)h * D;
                    const float *sink = topic_dir + (size_t)(TOPICS + h % SINKS) * D;
                    for (int d = 0; d < D; d++) {
                        if (t > b * GEN_BLOCK) zh[d] = (float)rho * zh[d] + innov * (float)gen_normal(&r);
                        v[d] = head_c[h] * (zh[d] + 0.25f * u[d] + 0.3f * sink[d]);
                    }
                    if (pow2) hadamard(v, D);
                    float w = (float)(head_b[h] + 0.3 * gen_normal(&r)) * fold;
                    int64_t off = (t * H + h) * D;
                    if (dt == LTK_DTYPE_E4M3) w *= quantize_e4m3(v, D, (uint8_t *)out->q + off);
                    else store_vec(v, D, dt, out->q, off);
                    out->weights[t * H + h] = w;
                }
                out->ks[t] = 0;
                out->ke[t] = (int32_t)(spec->ctx + t + 1);
            }
        }
        free(v);
        free(zz);
    }
    if (oom) {
        st = tool_fail(LTK_ENOMEM, "DSA generator: out of memory for its thread buffers");
        gen_dsa_free(out);
        goto done;
    }
    for (int64_t t = 0; t < T; t++) out->visible += (double)(spec->ctx + t + 1);
    st = dsa_reshape(spec, out);
    if (st) gen_dsa_free(out);
done:
    free(topic_dir), free(topic), free(head_c), free(head_b);
    return st;
}

/* ---- kNN embeddings ------------------------------------------------------------------------ */
ltk_status gen_embeddings(int64_t rows, int32_t D, int64_t clusters, uint64_t seed, uint64_t stream, float **out) {
    *out = NULL;
    if (rows < 0 || D < 1) return tool_fail(LTK_EINVAL, "embedding generator: bad shape %lld x %d", (long long)rows, D);
    if (clusters < 1) clusters = 1;
    gen_rng shared;
    gen_rng_seed(&shared, seed);           /* centres and the common direction: same for base and queries */
    float *centres = malloc(sizeof(float) * (size_t)clusters * (size_t)D);
    float *mean = malloc(sizeof(float) * (size_t)D);
    float *x = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1) * (size_t)D);
    if (!centres || !mean || !x) {
        free(centres), free(mean), free(x);
        return tool_fail(LTK_ENOMEM, "embedding generator: out of memory for %lld x %d", (long long)rows, D);
    }
    for (int d = 0; d < D; d++) mean[d] = (float)gen_normal(&shared);
    for (int64_t i = 0; i < clusters * D; i++) centres[i] = (float)gen_normal(&shared);
    /* Anisotropy (a shared mean direction) + cluster + noise, then unit norm: cosines of unrelated
     * pairs sit near 0.35, same-cluster pairs higher: a concentrated bulk with a thin tail. Rows in
     * blocks of GEN_BLOCK, each from its own stream (seed, stream, block): the same values for any
     * thread count, and 5M x 768 in seconds instead of a minute on one core. */
    const int64_t blocks = (rows + GEN_BLOCK - 1) / GEN_BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < blocks; b++) {
        gen_rng rng;
        gen_rng_seed(&rng, seed ^ (0x5bd1e995ull * (stream + 1)) ^ (uint64_t)(b + 1) * 0x9e3779b97f4a7c15ull);
        for (int64_t r = b * GEN_BLOCK; r < rows && r < (b + 1) * GEN_BLOCK; r++) {
            const float *c = centres + (size_t)(gen_u64(&rng) % (uint64_t)clusters) * D;
            float *v = x + (size_t)r * D;
            double norm = 0.0;
            for (int d = 0; d < D; d++) {
                v[d] = 0.6f * mean[d] + 0.6f * c[d] + 0.5f * (float)gen_normal(&rng);
                norm += (double)v[d] * v[d];
            }
            float inv = norm > 0.0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
            for (int d = 0; d < D; d++) v[d] *= inv;
        }
    }
    free(centres), free(mean);
    *out = x;
    return LTK_OK;
}

const char *const gen_knn_dists[] = {"clustered", "dup", "equal", "zero", "scale-hi", "scale-lo", "nonfinite", NULL};

int gen_knn_dist_known(const char *name) {
    for (int i = 0; gen_knn_dists[i]; i++)
        if (!strcmp(name, gen_knn_dists[i])) return 1;
    return 0;
}

void gen_knn_dist_apply(float *base, int64_t N, int32_t D, const char *name, uint64_t seed) {
    const size_t d = (size_t)D;
    if (!strcmp(name, "dup") || !strcmp(name, "equal")) {
        const int64_t m = !strcmp(name, "equal") ? 1 : (N / 16 > 0 ? N / 16 : 1);
        for (int64_t i = m; i < N; i++) { /* rows below m stay: sources, read before any is overwritten */
            const uint64_t src = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ seed;
            memcpy(base + (size_t)i * d, base + (size_t)(src % (uint64_t)m) * d, sizeof(float) * d);
        }
    } else if (!strcmp(name, "zero")) {
        for (int64_t i = 0; i < N; i++)
            if (i % 10 != 0) memset(base + (size_t)i * d, 0, sizeof(float) * d);
    } else if (!strcmp(name, "scale-hi") || !strcmp(name, "scale-lo")) {
        const float f = !strcmp(name, "scale-hi") ? 1e15f : 1e-15f;
        for (size_t i = 0; i < (size_t)N * d; i++) base[i] *= f;
    } else if (!strcmp(name, "nonfinite")) {
        gen_rng r;
        gen_rng_seed(&r, seed ^ 0x6e6f6e66696e69ull);
        for (int64_t i = 0; i < N; i++) {
            const uint64_t u = gen_u64(&r) % 1000u;
            if (u < 2) base[(size_t)i * d + gen_u64(&r) % d] = u == 0 ? NAN : INFINITY;
        }
    }
}

/* ---- score matrices ------------------------------------------------------------------------ */
static const char *const dist_names[GEN_SCORES_COUNT] = {
    "dsa", "normal", "offset", "ties", "shift4", "equal", "distinct2", "distinct4", "distinct16", "plateau0",
    "plateau-half", "plateau-k1", "plateau-k", "plateau-4k", "increasing", "decreasing", "heavy", "outliers",
    "nonfinite"};

int gen_score_dist_parse(const char *name, gen_score_dist *out) {
    for (int i = 0; i < GEN_SCORES_COUNT; i++)
        if (!strcmp(name, dist_names[i])) {
            *out = (gen_score_dist)i;
            return 1;
        }
    return 0;
}

const char *gen_score_dist_name(gen_score_dist d) { return (unsigned)d < GEN_SCORES_COUNT ? dist_names[d] : "unknown"; }

ltk_status gen_scores(int64_t rows, int64_t cols, gen_score_dist dist, int64_t k, uint64_t seed, float **out) {
    *out = NULL;
    if (rows < 0 || cols < 0) return tool_fail(LTK_EINVAL, "score generator: bad shape");
    size_t n = (size_t)rows * (size_t)cols;
    float *x = malloc(sizeof(float) * (n ? n : 1));
    if (!x) return tool_fail(LTK_ENOMEM, "score generator: out of memory for %lld x %lld", (long long)rows, (long long)cols);
    gen_rng rng;
    gen_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        const int64_t col = (int64_t)(i % (size_t)(cols > 0 ? cols : 1));
        switch (dist) {
        case GEN_SCORES_DSA: {
            /* GLM-5.2 at 1M: bulk 25-35, ~1% of keys at >= 45 (LiteTopK paper). */
            double v = 30.0 + 2.5 * gen_normal(&rng);
            if (gen_uniform(&rng) < 0.01) v += -6.0 * log(1.0 - gen_uniform(&rng)) + 8.0;
            x[i] = (float)v;
            break;
        }
        case GEN_SCORES_NORMAL: x[i] = (float)gen_normal(&rng); break;
        case GEN_SCORES_OFFSET: x[i] = (float)(gen_normal(&rng) + 100.0); break;
        case GEN_SCORES_TIES: x[i] = (float)(floor(gen_normal(&rng) * 4.0) / 4.0); break;
        case GEN_SCORES_SHIFT4: x[i] = (float)(gen_normal(&rng) * 1e-3 + 1e4); break;
        case GEN_SCORES_EQUAL: x[i] = 1.0f; break;
        case GEN_SCORES_DISTINCT2: x[i] = (float)(gen_u64(&rng) % 2); break;
        case GEN_SCORES_DISTINCT4: x[i] = (float)(gen_u64(&rng) % 4); break;
        case GEN_SCORES_DISTINCT16: x[i] = (float)(gen_u64(&rng) % 16); break;
        case GEN_SCORES_INC: x[i] = (float)col; break;
        case GEN_SCORES_DEC: x[i] = (float)(cols - col); break;
        case GEN_SCORES_HEAVY: x[i] = (float)(gen_normal(&rng) / (gen_uniform(&rng) + 1e-12)); break;
        case GEN_SCORES_NONFINITE: {
            const uint64_t r = gen_u64(&rng) % 20;
            x[i] = r < 2 ? NAN : r == 2 ? INFINITY : r == 3 ? -INFINITY : (float)gen_normal(&rng);
            break;
        }
        case GEN_SCORES_OUTLIERS: x[i] = (float)gen_normal(&rng); break;
        default: x[i] = 0.0f; break; /* the plateaus: set below */
        }
    }
    int64_t m = -1, big = 0;
    switch (dist) {
    case GEN_SCORES_PLATEAU0: m = 0; break;
    case GEN_SCORES_PLATEAU_HALF: m = k / 2; break;
    case GEN_SCORES_PLATEAU_KM1: m = k - 1; break;
    case GEN_SCORES_PLATEAU_K: m = k; break;
    case GEN_SCORES_PLATEAU_4K: m = 4 * k; break;
    case GEN_SCORES_OUTLIERS: big = 8; break;
    default: break;
    }
    for (int64_t r = 0; r < rows && cols > 0; r++) {
        for (int64_t j = 0; j < m; j++) /* (a column drawn twice leaves fewer than m positive) */
            x[r * cols + (int64_t)(gen_u64(&rng) % (uint64_t)cols)] = (float)(1.0 + gen_uniform(&rng));
        for (int64_t j = 0; j < big; j++) x[r * cols + (int64_t)(gen_u64(&rng) % (uint64_t)cols)] = 1e30f;
    }
    *out = x;
    return LTK_OK;
}
