/* Helpers every part of the library shares: the per-thread error message and the status strings,
 * dtype sizes and decoding, aligned host memory, and the hot-set vote that carries a chunk's top-k
 * to the next chunk of the same request. */
#include "ltk-impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------------- */
static _Thread_local char ltk_errbuf[512];

ltk_status ltk_error(ltk_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ltk_errbuf, sizeof ltk_errbuf, fmt, ap);
    va_end(ap);
    return status;
}

void ltk_clear_error(void) { ltk_errbuf[0] = '\0'; }

const char *ltk_last_error(void) { return ltk_errbuf; }

const char *ltk_status_str(ltk_status status) {
    switch (status) {
#define LTK_X_CASE(name, value, text) \
    case name:                        \
        return text;
        LTK_STATUS_LIST(LTK_X_CASE)
#undef LTK_X_CASE
    }
    return "unknown status";
}

size_t ltk_dtype_size(ltk_dtype dtype) {
    switch (dtype) {
    case LTK_DTYPE_F32: return 4;
    case LTK_DTYPE_F16: return 2;
    case LTK_DTYPE_BF16: return 2;
    case LTK_DTYPE_E4M3: return 1;
    }
    return 0;
}

ltk_status ltk_state_check(const ltk_indexer_state *st, const char *what) {
    if (st == NULL) return ltk_error(LTK_EINVAL, "%s is NULL", what);
    if (st->tag != LTK_STATE_TAG)
        return ltk_error(LTK_EINVAL, "%s is not a live ltk_indexer_state (made by ltk_indexer_state_create, not freed)",
                         what);
    return LTK_OK;
}

/* ---- dtypes ------------------------------------------------------------------------------- */
float ltk_e4m3_to_f32(uint8_t v) {
    /* OCP e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities; S.1111.111 is NaN. */
    uint32_t sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 0x7;
    float mag;
    if (exp == 0xf && man == 0x7) return NAN;
    if (exp == 0) mag = ldexpf((float)man, -9); /* subnormal: man * 2^-6 * 2^-3 */
    else mag = ldexpf((float)(8 + man), (int)exp - 10);
    return sign ? -mag : mag;
}

float ltk_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return ltk_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float mag = ldexpf((float)man, -24);
        return sign ? -mag : mag;
    }
    return ltk_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

float ltk_bf16_to_f32(uint16_t v) { return ltk_bits_f32((uint32_t)v << 16); }

float ltk_load_f32(const void *p, ltk_dtype dt, int64_t i) {
    switch (dt) {
    case LTK_DTYPE_F32: return ((const float *)p)[i];
    case LTK_DTYPE_F16: return ltk_f16_to_f32(((const uint16_t *)p)[i]);
    case LTK_DTYPE_BF16: return ltk_bf16_to_f32(((const uint16_t *)p)[i]);
    case LTK_DTYPE_E4M3: return ltk_e4m3_to_f32(((const uint8_t *)p)[i]);
    }
    return NAN;
}

void *ltk_aligned_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    if (posix_memalign(&p, 64, (bytes + 63) & ~(size_t)63) != 0) return NULL;
    return p;
}

void ltk_aligned_free(void *p) { free(p); }

ltk_status ltk_host_alloc(size_t bytes, void **ptr) {
    *ptr = ltk_aligned_alloc(bytes);
    return *ptr ? LTK_OK : ltk_error(LTK_ENOMEM, "host allocation of %zu bytes failed", bytes);
}

ltk_status ltk_host_copy(void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
    return LTK_OK;
}

/* ---- hot set ------------------------------------------------------------------------------ */
typedef struct { int32_t value, pos; } val_pos;

static int cmp_val_pos(const void *a, const void *b) {
    const val_pos *x = a, *y = b;
    if (x->value != y->value) return x->value < y->value ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_pos(const void *a, const void *b) {
    const val_pos *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

ltk_status ltk_state_set_host_list(ltk_indexer_state *st, const int32_t *idx, int32_t count,
                                   ltk_status (*copy)(void *dst, const void *src, size_t bytes)) {
    val_pos *vp = malloc(sizeof *vp * (size_t)(count > 0 ? count : 1));
    int32_t *keys = malloc(sizeof(int32_t) * ((size_t)st->capacity + 1));
    if (!vp || !keys) {
        free(vp);
        free(keys);
        return ltk_error(LTK_ENOMEM, "hot-set staging allocation failed");
    }
    int32_t n = 0;
    for (int32_t i = 0; i < count; i++)
        if (idx[i] >= 0) vp[n++] = (val_pos){idx[i], i};
    /* A duplicate would be scored twice and could make the sample's k-th score illegally tight. */
    qsort(vp, (size_t)n, sizeof *vp, cmp_val_pos);
    int32_t u = 0;
    for (int32_t i = 0; i < n; i++)
        if (i == 0 || vp[i].value != vp[i - 1].value) vp[u++] = vp[i];
    qsort(vp, (size_t)u, sizeof *vp, cmp_pos);
    int32_t m = u < st->capacity ? u : st->capacity;
    keys[0] = m;
    for (int32_t i = 0; i < m; i++) keys[1 + i] = vp[i].value;
    ltk_status s = copy(st->keys, keys, sizeof(int32_t) * ((size_t)m + 1));
    free(vp);
    free(keys);
    return s;
}

typedef struct { int32_t key, votes; } key_votes;

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_votes(const void *a, const void *b) {
    const key_votes *x = a, *y = b;
    if (x->votes != y->votes) return x->votes > y->votes ? -1 : 1;
    return (x->key < y->key) - (x->key > y->key); /* more recent (larger) index first */
}

size_t ltk_state_vote_host_scratch(int64_t rows, int32_t k) {
    size_t total = (size_t)(rows > 0 ? rows : 0) * (size_t)(k > 0 ? k : 0);
    return (sizeof(int32_t) + sizeof(key_votes)) * (total ? total : 1) + 64;
}

ltk_status ltk_state_vote_host(ltk_indexer_state *st, const int32_t *idx, int64_t rows, int32_t k, int64_t stride,
                               const int32_t *ks, int absolute, void *scratch, size_t scratch_bytes) {
    size_t total = (size_t)rows * (size_t)k;
    void *owned = NULL;
    if (!scratch || scratch_bytes < ltk_state_vote_host_scratch(rows, k)) {
        owned = malloc(ltk_state_vote_host_scratch(rows, k));
        if (!owned) return ltk_error(LTK_ENOMEM, "hot-set vote allocation failed");
        scratch = owned;
    }
    int32_t *all = scratch;
    /* the (key, votes) pairs follow the keys, 8-byte aligned */
    key_votes *kv = (key_votes *)((char *)scratch + ((sizeof(int32_t) * (total ? total : 1) + 7) & ~(size_t)7));
    size_t n = 0;
    for (int64_t r = 0; r < rows; r++) {
        int32_t base = (absolute || !ks) ? 0 : ks[r];
        for (int32_t j = 0; j < k; j++) {
            int32_t v = idx[r * stride + j];
            if (v >= 0) all[n++] = v + base;
        }
    }
    qsort(all, n, sizeof(int32_t), cmp_i32);
    size_t u = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && all[j] == all[i]) j++;
        kv[u++] = (key_votes){all[i], (int32_t)(j - i)};
        i = j;
    }
    qsort(kv, u, sizeof *kv, cmp_votes);
    int32_t m = (int32_t)(u < (size_t)st->capacity ? u : (size_t)st->capacity);
    st->keys[0] = m;
    for (int32_t i = 0; i < m; i++) st->keys[1 + i] = kv[i].key;
    free(owned);
    return LTK_OK;
}
