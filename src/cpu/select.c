/* Exact select engine of the CPU backend: radix select on ltk_rank_key (11/11/10-bit digits),
 * and the select API (also the final step of the materialize paths).
 * Ties are broken by position: every caller passes entries in index order, so "first by
 * position" is "lower index first", as the ORDER of litetopk.h requires. */
#include "cpu-impl.h"

#include <omp.h>
#include <string.h>

static const int dig_shift[3] = {21, 10, 0};
static const int dig_bits[3] = {11, 11, 10};

uint32_t ltkc_kth_key(const uint32_t *keys, int64_t n, int64_t k, int64_t *take_eq, uint32_t *hist) {
    uint32_t prefix = 0, pmask = 0;
    int64_t rem = k;
    for (int p = 0; p < 3; p++) {
        uint32_t nb = 1u << dig_bits[p], dm = nb - 1;
        int sh = dig_shift[p];
        memset(hist, 0, sizeof(uint32_t) * nb);
        if (p == 0) {
            for (int64_t i = 0; i < n; i++) hist[keys[i] >> 21]++;
        } else {
            for (int64_t i = 0; i < n; i++)
                if ((keys[i] & pmask) == prefix) hist[(keys[i] >> sh) & dm]++;
        }
        int64_t cum = 0;
        uint32_t d = dm;
        while (d > 0 && cum + hist[d] < rem) cum += hist[d--];
        rem -= cum;
        prefix |= d << sh;
        pmask |= dm << sh;
    }
    *take_eq = rem;
    return prefix;
}

int64_t ltkc_filter_top(const uint32_t *keys, int64_t n, uint32_t K, int64_t take_eq, int32_t *out_pos) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t key = keys[i];
        if (key > K || (key == K && take_eq-- > 0)) out_pos[m++] = (int32_t)i;
    }
    return m;
}

void ltkc_sort_u64(uint64_t *a, uint64_t *tmp, int64_t n) {
    if (n <= 48) {
        for (int64_t i = 1; i < n; i++) {
            uint64_t v = a[i];
            int64_t j = i;
            while (j > 0 && a[j - 1] > v) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = v;
        }
        return;
    }
    static _Thread_local uint32_t cnt[8][256];
    memset(cnt, 0, sizeof cnt);
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = a[i];
        for (int b = 0; b < 8; b++) cnt[b][(v >> (8 * b)) & 255]++;
    }
    uint64_t *src = a, *dst = tmp;
    for (int b = 0; b < 8; b++) {
        if (cnt[b][(a[0] >> (8 * b)) & 255] == (uint32_t)n) continue; /* digit constant: skip */
        uint32_t off = 0;
        for (int d = 0; d < 256; d++) {
            uint32_t c = cnt[b][d];
            cnt[b][d] = off;
            off += c;
        }
        for (int64_t i = 0; i < n; i++) dst[cnt[b][(src[i] >> (8 * b)) & 255]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, sizeof(uint64_t) * (size_t)n);
}

/* ---- typed rows -------------------------------------------------------------------------------- */
#define CHUNK 2048

static void load_keys(const void *row, ltk_dtype dt, int64_t i0, int64_t n, uint32_t *keys) {
    switch (dt) {
    case LTK_DTYPE_F32: ltkc_kernels()->keys_f32((const float *)row + i0, n, keys); break;
    case LTK_DTYPE_BF16: {
        const uint16_t *p = (const uint16_t *)row + i0;
        for (int64_t i = 0; i < n; i++) keys[i] = ltk_rank_key(ltk_bits_f32((uint32_t)p[i] << 16));
        break;
    }
    case LTK_DTYPE_F16: {
        const uint16_t *p = (const uint16_t *)row + i0;
        for (int64_t i = 0; i < n; i++) keys[i] = ltk_rank_key(ltk_f16_to_f32(p[i]));
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) keys[i] = 0;
        break;
    }
}

int64_t ltkc_select_cap(int64_t n, int64_t k) {
    int64_t cap = (int64_t)1 << 18;
    if (cap < 2 * k) cap = 2 * k;
    return n < cap ? (n > 0 ? n : 1) : cap;
}

/* The alone pass of the shortcut (no sampled key above v) over one chunk: entries above v to
 * akey/apos (every one, in index order, while fewer than cap: slot cap - 1 is the sink), the first
 * k equal to v to tpos[0, k); no branch on the comparisons. tpos has no sink slot, so the chunk
 * takes one of three loops: every tie slot below k (eq + c < k: stored at eq), none left (eq >= k:
 * no tie store and no tie count; no sink while below cap), or the chunk that crosses k (past it
 * the last slot keeps its value). Why not the crossing loop throughout: its load and select per entry made all-equal rows 83 -> 110 ms (64 x
 * 1M, k = 2048, 2 cores, base and new alternating). */
static inline void sc_chunk_all(const uint32_t *keys, int64_t c, int64_t i0, uint32_t v, int64_t k, int64_t cap,
                                uint32_t *akey, int32_t *apos, int32_t *tpos, int64_t *gtp, int64_t *eqp) {
    int64_t gt = *gtp, eq = *eqp;
#define LTKC_ABOVE()                                          \
    const uint32_t key = keys[i];                             \
    const int64_t gs = gt < cap ? gt : cap - 1;               \
    akey[gs] = key;                                           \
    apos[gs] = (int32_t)(i0 + i)
    if (eq + c < k) {
        for (int64_t i = 0; i < c; i++) {
            LTKC_ABOVE();
            tpos[eq] = (int32_t)(i0 + i);
            gt += key > v;
            eq += key == v;
        }
    } else if (eq >= k && gt + c < cap) {
        /* k ties held: only the entries above v are still counted (sc_answer reads eq only as
         * gt + eq >= k, true from here on), and below cap no sink is needed, as the filter's
         * loop. Why: plateau rows spend the whole pass here; 64 x 1M plateau-k took 1.31x the time
         * of normal rows (the filter's) with the tie count and the sink in this loop */
        for (int64_t i = 0; i < c; i++) {
            const uint32_t key = keys[i];
            akey[gt] = key;
            apos[gt] = (int32_t)(i0 + i);
            gt += key > v;
        }
    } else if (eq >= k) {
        for (int64_t i = 0; i < c; i++) {
            LTKC_ABOVE();
            gt += key > v;
        }
    } else {
        for (int64_t i = 0; i < c; i++) {
            LTKC_ABOVE();
            const int64_t es = eq < k ? eq : k - 1;
            tpos[es] = eq < k ? (int32_t)(i0 + i) : tpos[k - 1];
            gt += key > v;
            eq += key == v;
        }
    }
#undef LTKC_ABOVE
    *gtp = gt, *eqp = eq;
}

/* Appends the kk best of the n entries key/pos (index order; ties at the kk-th key go to the lower
 * index) to out_key/out_pos; returns kk. */
static int64_t take_best(const uint32_t *key, const int32_t *pos, int64_t n, int64_t kk, uint32_t *hist,
                         uint32_t *out_key, int32_t *out_pos) {
    int64_t te, m = 0;
    const uint32_t K = ltkc_kth_key(key, n, kk, &te, hist);
    for (int64_t i = 0; i < n; i++)
        if (key[i] > K || (key[i] == K && te-- > 0)) {
            out_key[m] = key[i];
            out_pos[m++] = pos[i];
        }
    return m;
}

/* The shortcut's answer after a pass over the whole row (gt entries above v held in akey/apos when
 * gt < cap, the first min(eq, k) equal to v in out_pos): when the class holds the k-th, the gt
 * above and then its first k - gt; when k or more are above, the top k of those (index order, so
 * that ties at the k-th go to the lower index). -1: cap or more above, nothing decided. */
static int64_t sc_answer(uint32_t v, int64_t gt, int64_t eq, int64_t k, int64_t cap, const uint32_t *akey,
                         const int32_t *apos, uint32_t *hist, uint32_t *out_key, int32_t *out_pos) {
    if (gt < k && gt + eq >= k) {
        const int64_t nt = k - gt;
        memmove(out_pos + gt, out_pos, sizeof(int32_t) * (size_t)nt);
        for (int64_t j = 0; j < nt; j++) out_key[gt + j] = v;
        memcpy(out_key, akey, sizeof(uint32_t) * (size_t)gt);
        memcpy(out_pos, apos, sizeof(int32_t) * (size_t)gt);
        return k;
    }
    if (gt < k || gt >= cap) return -1;
    return take_best(akey, apos, gt, k, hist, out_key, out_pos);
}

int64_t ltkc_select_row(const void *row, ltk_dtype dt, int64_t n, int64_t k, const ltkc_selws *w, uint32_t *out_key,
                        int32_t *out_pos) {
    uint32_t keys[CHUNK];
    if (n <= k) {
        for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
            int64_t c = n - i0 < CHUNK ? n - i0 : CHUNK;
            load_keys(row, dt, i0, c, out_key + i0);
            for (int64_t i = 0; i < c; i++) out_pos[i0 + i] = (int32_t)(i0 + i);
        }
        return n;
    }
    uint32_t *hist = w->hist;
    uint32_t h4[4][2049]; /* (32 KB of the thread's stack; bin 2048 is the spare) */
    /* Where the first digit starts. Fixed at the top 11 bits, a row whose values share their
     * exponent and leading mantissa bits (N(0,1) + 100: one first-level bucket holds every entry)
     * needed a third pass over the row: 2.4x the time of N(0,1) rows (`litetopk bench select
     * --rows 64 --cols 1048576 -k 2048 --dist offset --backend cpu`). So a strided sample of the
     * row gives the high bits its keys share (at most 21), and the first digit is the 11 bits below
     * them; entries above that prefix are counted as taken, those below are out. If the sample
     * misled (k or more entries above the prefix, or fewer than k at or above it), the top-bits
     * schedule runs instead. */
    uint32_t pfx = 0; /* the sampled common prefix: the top 32 - psh0 bits */
    int psh0 = 32;
    uint32_t vtop = 0; /* the largest key the sample holds twice or more */
    int vrep = 0, vabove = 0; /* (sampled keys above it) */
    {
        const int64_t ns = n < 128 ? n : 128; /* (each a cache miss: 512 cost normal rows 2-3%) */
        uint32_t kmin = 0xffffffffu, kmax = 0, key, sk[128];
        for (int64_t j = 0; j < ns; j++) {
            const int64_t i = j * (n / ns);
            if (dt == LTK_DTYPE_F32) key = ltk_rank_key(((const float *)row)[i]); /* (no call per key) */
            else load_keys(row, dt, i, 1, &key);
            kmin = key < kmin ? key : kmin;
            kmax = key > kmax ? key : kmax;
            int64_t q = j; /* (insertion, descending: 128 keys) */
            while (q > 0 && sk[q - 1] < key) sk[q] = sk[q - 1], q--;
            sk[q] = key;
        }
        for (int64_t j = 1; j < ns && !vrep; j++)
            if (sk[j] == sk[j - 1]) vtop = sk[j], vrep = 1, vabove = (int)j - 1;
        int cp = kmin == kmax ? 32 : __builtin_clz(kmin ^ kmax);
        if (cp > 21) cp = 21;
        if (cp > 0) {
            psh0 = 32 - cp;
            pfx = kmax >> psh0;
        }
    }
    /* A large class near the sample's top (the largest key the 128 hold twice or more: flat rows,
     * few distinct values, a zero plateau, rounded values): a pass keeps every entry above it (in
     * the bucket buffer, while fewer than cap) and its first k entries, in index order; if the k-th
     * key is that key, or k or more entries are above it, the answer comes from those
     * (sc_answer) and no other pass runs. Why: such rows took every digit pass over buckets
     * holding most of the row, then the collect (64 x 1M, k = 2048, 2 cores, `litetopk bench
     * select --dist D --backend cpu`, before -> after: distinct2 370 -> 102 ms, distinct4 275 ->
     * 94, plateau0 192 -> 105, plateau-k 230 -> 125, normal rows untouched; record
     * bench/results/cpu/select.jsonl); and while the pass stopped once k entries were above the
     * class, a zero plateau under 4k positives or rounded normals (shift4) went on to the digit
     * passes. When no sampled key is above the class, that pass runs alone; when some are, it
     * rides on the first digit pass over each chunk while its keys are in L1, so that a miss costs
     * no read of its own (a pass of its own measured 13-18% slower on plateau-4k and rounded
     * normals, near this machine's noise). */
    int sc_on = vrep && k < w->cap;
    int64_t sc_gt = 0, sc_eq = 0;
    if (sc_on && vabove == 0) {
        const int64_t cap = w->cap;
        for (int64_t i0 = 0; i0 < n && sc_gt < cap; i0 += CHUNK) {
            int64_t c = n - i0 < CHUNK ? n - i0 : CHUNK;
            load_keys(row, dt, i0, c, keys);
            sc_chunk_all(keys, c, i0, vtop, k, cap, w->bkey, w->bpos, out_pos, &sc_gt, &sc_eq);
        }
        const int64_t m = sc_answer(vtop, sc_gt, sc_eq, k, cap, w->bkey, w->bpos, hist, out_key, out_pos);
        if (m >= 0) return m;
        sc_on = 0; /* (cap or more above the class: the digit passes) */
    }
    /* Long rows: LiteTopK's filter on the CPU. A strided sample of FS keys gives a threshold t (its
     * j-th largest, j for ~3k expected entries at or above t), one pass keeps every entry >= t in
     * index order (no branch: an entry below t is written and not counted), and the k best of those
     * are the row's (an entry of the top k is >= t whenever k or more are). Why: the digit passes
     * read the row two or three times, three on rows whose values share high bits (offset, the DSA
     * generator's scores: 1.4-1.7x the time of normal rows, 64 x 1M, k = 2048, 2 cores, `litetopk
     * bench select --dist D --backend cpu`). When the sample misled (fewer than k entries >= t, or
     * cap or more) the digit passes run as before. */
    if (n >= 32 * k) {
        enum { FS = 4096 };
        const int64_t ns = n < FS ? n : FS, step = n / ns, cap = w->cap;
        const int64_t j = (3 * k * ns + n - 1) / n + 4;
        uint32_t sk[FS], key;
        for (int64_t q = 0; q < ns; q++) {
            if (dt == LTK_DTYPE_F32) sk[q] = ltk_rank_key(((const float *)row)[q * step]);
            else load_keys(row, dt, q * step, 1, &sk[q]);
        }
        int64_t te;
        const uint32_t t = ltkc_kth_key(sk, ns, j < ns ? j : ns, &te, hist);
        /* t held twice or more by the sample, and the sample's entries >= t standing for half the
         * buffer or more: t is a class that the entries >= t would overflow the buffer with (a zero
         * plateau under k positives, few distinct values), so the pass keeps the entries above t
         * and t's first k instead (sc_chunk_all), which answers the row whether the k-th is t or
         * above it. Why: the >= t pass filled the buffer and gave up part way, then the digit
         * passes ran: 64 x 1M plateau-k1 (k - 1 positives) took 1.35-1.45x the time of normal rows
         * (`litetopk bench select --backend cpu --rows 64 --cols 1048576 -k 2048 --dist
         * plateau-k1`, 2 cores). Not for every repeated t: a class that fits (ties: normals
         * rounded to 1/4) is cheaper in the >= t pass, sc_chunk_all's crossing loop being twice
         * its work an entry until k ties are held. */
        int64_t teq = 0, tge = 0;
        for (int64_t q = 0; q < ns; q++) teq += sk[q] == t, tge += sk[q] >= t;
        if (teq >= 2 && k < cap && tge * step >= cap / 2) {
            int64_t gt = 0, eq = 0;
            for (int64_t i0 = 0; i0 < n && gt < cap; i0 += CHUNK) {
                int64_t cc = n - i0 < CHUNK ? n - i0 : CHUNK;
                load_keys(row, dt, i0, cc, keys);
                sc_chunk_all(keys, cc, i0, t, k, cap, w->bkey, w->bpos, out_pos, &gt, &eq);
            }
            const int64_t m = sc_answer(t, gt, eq, k, cap, w->bkey, w->bpos, hist, out_key, out_pos);
            if (m >= 0) return m;
            sc_on = 0; /* (cap or more above t: the digit passes, without the class pass) */
            goto digits;
        }
        int64_t c = 0;
        uint32_t *bk = w->bkey;
        int32_t *bp = w->bpos;
        for (int64_t i0 = 0; i0 < n && c < cap; i0 += CHUNK) {
            int64_t cc = n - i0 < CHUNK ? n - i0 : CHUNK;
            load_keys(row, dt, i0, cc, keys);
            if (c + cc < cap) {
                for (int64_t i = 0; i < cc; i++) {
                    key = keys[i];
                    bk[c] = key;
                    bp[c] = (int32_t)(i0 + i);
                    c += key >= t;
                }
            } else {
                for (int64_t i = 0; i < cc; i++) {
                    key = keys[i];
                    const int64_t s = c < cap ? c : cap - 1;
                    bk[s] = key;
                    bp[s] = (int32_t)(i0 + i);
                    c += key >= t;
                }
            }
        }
        if (c >= k && c < cap) return take_best(bk, bp, c, k, hist, out_key, out_pos);
    }
digits:;
    uint32_t prefix = 0; /* known high bits of the k-th key */
    int64_t rem = k;      /* entries still to take from the current bucket */
    int64_t bucket = n;   /* entries in the current bucket */
    int sh = psh0 - 11 > 0 ? psh0 - 11 : 0, psh = psh0;
    for (;;) {
        const uint32_t nb = 1u << (psh - sh), dm = nb - 1;
        const uint32_t want = psh >= 32 ? 0 : prefix >> psh;
        const int first = psh == psh0;
        int64_t above = 0, total = 0;
        /* Four histograms, four entries a step (constant offsets: h4[i & 3] cost normal rows 12% in
         * index arithmetic), and no branch in the filtered passes: an entry outside the prefix or
         * the bucket counts in the spare bin 2048. Why: rows of few distinct values put most entries
         * in one bin, whose increments then wait on each other, and make the in-bucket test a coin
         * toss for the branch predictor. 64 x 1M, k = 2048 (`litetopk bench select --dist D
         * --backend cpu`), before -> after: distinct2 540-558 -> 208-210 ms, all-equal and plateaus
         * 137-141 -> ~100, dsa 90-94 -> 83-84, offset 90-95 -> 84-85, normal 69-73 unchanged. */
        memset(h4, 0, sizeof h4);
        for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
            int64_t c = n - i0 < CHUNK ? n - i0 : CHUNK;
            load_keys(row, dt, i0, c, keys);
            if (sc_on) {
                sc_chunk_all(keys, c, i0, vtop, k, w->cap, w->bkey, w->bpos, out_pos, &sc_gt, &sc_eq);
                if (sc_gt >= w->cap) sc_on = 0; /* too many above the class to hold */
            }
            if (psh >= 32) {
                int64_t i = 0;
                for (; i + 4 <= c; i += 4) { /* (four at a time: constant offsets, no index math) */
                    h4[0][keys[i] >> sh]++;
                    h4[1][keys[i + 1] >> sh]++;
                    h4[2][keys[i + 2] >> sh]++;
                    h4[3][keys[i + 3] >> sh]++;
                }
                for (; i < c; i++) h4[0][keys[i] >> sh]++;
            } else if (first) {
                int64_t i = 0;
#define LTKC_FIRST(q, x)                                        \
    do {                                                        \
        const uint32_t top_ = (x) >> psh;                       \
        h4[q][top_ == pfx ? ((x) >> sh) & dm : 2048u]++;        \
        above += top_ > pfx;                                    \
    } while (0)
                for (; i + 4 <= c; i += 4) {
                    LTKC_FIRST(0, keys[i]);
                    LTKC_FIRST(1, keys[i + 1]);
                    LTKC_FIRST(2, keys[i + 2]);
                    LTKC_FIRST(3, keys[i + 3]);
                }
                for (; i < c; i++) LTKC_FIRST(0, keys[i]);
#undef LTKC_FIRST
            } else { /* (no branch: an entry outside the bucket counts in the spare bin 2048) */
                int64_t i = 0;
#define LTKC_BIN(x) ((x) >> psh == want ? ((x) >> sh) & dm : 2048u)
                for (; i + 4 <= c; i += 4) {
                    h4[0][LTKC_BIN(keys[i])]++;
                    h4[1][LTKC_BIN(keys[i + 1])]++;
                    h4[2][LTKC_BIN(keys[i + 2])]++;
                    h4[3][LTKC_BIN(keys[i + 3])]++;
                }
                for (; i < c; i++) h4[0][LTKC_BIN(keys[i])]++;
#undef LTKC_BIN
            }
        }
        if (sc_on) {
            sc_on = 0; /* (the first pass only) */
            const int64_t m = sc_answer(vtop, sc_gt, sc_eq, k, w->cap, w->bkey, w->bpos, hist, out_key, out_pos);
            if (m >= 0) return m;
        }
        for (uint32_t d = 0; d < nb; d++) hist[d] = h4[0][d] + h4[1][d] + h4[2][d] + h4[3][d];
        if (first && psh < 32) {
            for (uint32_t d = 0; d < nb; d++) total += hist[d];
            if (above >= k || above + total < k) { /* the sample misled: the top-bits schedule */
                psh0 = 32, pfx = 0, sh = 21, psh = 32;
                continue;
            }
            rem -= above;
            prefix = pfx << psh;
        }
        int64_t cum = 0;
        uint32_t d = dm;
        while (d > 0 && cum + hist[d] < rem) cum += hist[d--];
        rem -= cum;
        prefix |= d << sh;
        bucket = hist[d];
        if (bucket <= w->cap || sh == 0) break;
        psh = sh;
        sh = sh - 11 > 0 ? sh - 11 : 0;
    }
    /* Collect: entries above the bucket go straight out, bucket entries to the buffer. */
    const uint32_t want = prefix >> sh;
    int64_t m = 0, nb = 0;
    const int direct = sh == 0; /* the whole key is known: take the first rem equal ones */
    int64_t take = rem;
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t c = n - i0 < CHUNK ? n - i0 : CHUNK;
        load_keys(row, dt, i0, c, keys);
        if (direct) { /* (take > 0 tested first: once it is 0, a tie is no longer a coin toss) */
            for (int64_t i = 0; i < c; i++) {
                const uint32_t top = keys[i] >> sh;
                if (top > want || (take > 0 && top == want)) {
                    take -= top == want;
                    out_key[m] = keys[i];
                    out_pos[m++] = (int32_t)(i0 + i);
                }
            }
            continue;
        }
        for (int64_t i = 0; i < c; i++) {
            const uint32_t top = keys[i] >> sh;
            if (top > want) {
                out_key[m] = keys[i];
                out_pos[m++] = (int32_t)(i0 + i);
            } else if (top == want) {
                w->bkey[nb] = keys[i];
                w->bpos[nb++] = (int32_t)(i0 + i);
            }
        }
    }
    if (!direct && rem > 0) m += take_best(w->bkey, w->bpos, nb, rem, hist, out_key + m, out_pos + m);
    return m;
}

/* ---- select API ---------------------------------------------------------------------------------- */
typedef struct {
    ltkc_selws sel;
    uint32_t *okey;
    int32_t *opos;
    uint64_t *sa, *sb;
} sel_thread;

static size_t select_layout(const ltk_select_args *a, int nth, char *base, sel_thread **thp) {
    ltkc_ws w = {base, 0};
    sel_thread *th = ltkc_take(&w, sizeof(sel_thread) * (size_t)nth);
    if (thp) *thp = th;
    int64_t cap = ltkc_select_cap(a->cols, a->k);
    int64_t k = a->k;
    for (int t = 0; t < nth; t++) {
        sel_thread s;
        s.sel.hist = ltkc_take(&w, sizeof(uint32_t) * 2048);
        s.sel.bkey = ltkc_take(&w, sizeof(uint32_t) * (size_t)cap);
        s.sel.bpos = ltkc_take(&w, sizeof(int32_t) * (size_t)cap);
        s.sel.cap = cap;
        s.okey = ltkc_take(&w, sizeof(uint32_t) * (size_t)k);
        s.opos = ltkc_take(&w, sizeof(int32_t) * (size_t)k);
        s.sa = ltkc_take(&w, sizeof(uint64_t) * (size_t)k);
        s.sb = ltkc_take(&w, sizeof(uint64_t) * (size_t)k);
        if (th) th[t] = s;
    }
    return w.off;
}

static int select_threads(const ltk_select_args *a, const ltk_exec *e) {
    int nth = ltkc_threads(e);
    if (a->rows < nth) nth = a->rows > 0 ? (int)a->rows : 1;
    return nth;
}

ltk_status ltkc_select_ws(const ltk_select_args *a, const ltk_exec *e, size_t *bytes) {
    *bytes = select_layout(a, select_threads(a, e), NULL, NULL);
    return LTK_OK;
}

ltk_status ltkc_select(const ltk_select_args *a, const ltk_exec *e, void *ws, size_t wsb) {
    int nth = select_threads(a, e);
    while (nth > 1 && select_layout(a, nth, NULL, NULL) > wsb) nth--;
    LTK_RETURN_IF(select_layout(a, nth, NULL, NULL) > wsb || (wsb && !ws), LTK_EWORKSPACE,
                  "cpu select: workspace of %zu bytes is too small", wsb);
    sel_thread *th;
    select_layout(a, nth, ws, &th);
    size_t es = ltk_dtype_size(a->dtype);
    int unsorted = (a->flags & LTK_FLAG_UNSORTED) != 0, absolute = (a->flags & LTK_FLAG_ABSOLUTE) != 0;
    int64_t k = a->k;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nth)
    for (int64_t r = 0; r < a->rows; r++) {
        sel_thread *s = &th[omp_get_thread_num()];
        int64_t lo = a->starts ? a->starts[r] : 0, hi = a->ends ? a->ends[r] : a->cols;
        int64_t n = hi - lo, base = absolute ? 0 : lo;
        /* (cols = 0 allows scores = NULL: no pointer arithmetic on it, the row is empty) */
        const char *row = a->scores ? (const char *)a->scores + ((size_t)r * (size_t)a->row_stride + (size_t)lo) * es
                                    : NULL;
        int64_t m = ltkc_select_row(row, a->dtype, n, k, &s->sel, s->okey, s->opos);
        int32_t *oi = a->out_idx + r * a->out_stride;
        float *os = a->out_scores ? a->out_scores + r * a->out_stride : NULL;
        if (!unsorted) {
            for (int64_t j = 0; j < m; j++) s->sa[j] = ltkc_composite(s->okey[j], s->opos[j]);
            ltkc_sort_u64(s->sa, s->sb, m);
            for (int64_t j = 0; j < m; j++) s->opos[j] = (int32_t)(uint32_t)s->sa[j];
        }
        for (int64_t j = 0; j < m; j++) {
            oi[j] = (int32_t)(s->opos[j] + lo - base);
            if (os) os[j] = ltk_load_f32(row, a->dtype, s->opos[j]);
        }
        for (int64_t j = m; j < k; j++) {
            oi[j] = -1;
            if (os) os[j] = -__builtin_inff();
        }
    }
    if (e->stats) {
        memset(e->stats, 0, offsetof(ltk_stats, row_candidates));
        e->stats->rows = a->rows;
        for (int64_t r = 0; r < a->rows; r++) {
            int64_t lo = a->starts ? a->starts[r] : 0, hi = a->ends ? a->ends[r] : a->cols;
            if (hi - lo <= k) e->stats->short_rows++;
        }
    }
    return LTK_OK;
}
