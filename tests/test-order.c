/* test-order: the rank key of src/ltk-order.h, the one total order every backend ranks by, and its
 * floor (ltk_rank_key_floor), with which the CUDA kNN gate compares scores as floats. Checked on the
 * bit patterns where the order has its corners (NaN, -inf, -max, -denormal, -0, +0, +denormal,
 * +max, +inf) and their neighbours, and on random patterns and random threshold keys:
 *   - the key orders non-NaN floats as the float compare does, -0 == +0, NaN lowest (key 0);
 *   - ltk_rank_key_to_f32 inverts the key on every non-NaN key;
 *   - for every key t > 0: ltk_rank_key(x) >= t  <=>  x >= ltk_rank_key_floor(t), every x;
 *   - the floor is the lowest such float: its key reaches t, and the next float below it does not;
 * and the key buckets of the CUDA kNN final select (ltk_key_bucket): monotone, 2048, none skipped. */
#include "harness.h"

#include "../src/ltk-order.h"

static const uint32_t corner_bits[] = {
    0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x3f800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
    0x7fc00000u, 0x7fffffffu, 0x80000000u, 0x80000001u, 0x807fffffu, 0x80800000u, 0xbf800000u, 0xff7fffffu,
    0xff800000u, 0xff800001u, 0xffc00000u, 0xffffffffu,
};
enum { N_CORNER = sizeof corner_bits / sizeof corner_bits[0] };

static int is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

/* A bit pattern near the corners or the given key's floor, or anywhere. */
static uint32_t draw_bits(uint32_t near_key) {
    switch (rng_u64() % 4) {
    case 0: return corner_bits[rng_u64() % N_CORNER] + (uint32_t)(rng_u64() % 5) - 2u;
    case 1: return ~near_key + (uint32_t)(rng_u64() % 5) - 2u;           /* negative floats near it */
    case 2: return (near_key & 0x7fffffffu) + (uint32_t)(rng_u64() % 5) - 2u; /* positive floats near it */
    default: return (uint32_t)rng_u64();
    }
}

static void test_key_order(void) {
    for (int i = 0; i < 2000000; i++) {
        const uint32_t ua = draw_bits((uint32_t)rng_u64()), ub = draw_bits((uint32_t)rng_u64());
        const float a = ltk_bits_f32(ua), b = ltk_bits_f32(ub);
        const uint32_t ka = ltk_rank_key(a), kb = ltk_rank_key(b);
        test_ctx("a bits %08x, b bits %08x", ua, ub);
        if (is_nan_bits(ua)) {
            ASSERT_TRUE(ka == 0u);
            continue;
        }
        ASSERT_TRUE(ka > 0u);
        if (!is_nan_bits(ub)) ASSERT_TRUE((ka > kb) == (a > b) && (ka == kb) == (a == b));
        const float back = ltk_rank_key_to_f32(ka); /* -0 comes back as +0 */
        ASSERT_TRUE(back == a && ltk_rank_key(back) == ka);
    }
}

static void test_key_floor(void) {
    int64_t checked = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t t;
        switch (rng_u64() % 3) {
        case 0: t = ltk_rank_key(ltk_bits_f32(corner_bits[rng_u64() % N_CORNER])) + (uint32_t)(rng_u64() % 5) - 2u; break;
        case 1: t = ltk_rank_key(ltk_bits_f32((uint32_t)rng_u64())) + (uint32_t)(rng_u64() % 3) - 1u; break;
        default: t = (uint32_t)rng_u64(); break;
        }
        if (t == 0u) continue; /* key 0: every score passes; the callers test it apart */
        const float f = ltk_rank_key_floor(t);
        const uint32_t fb = ltk_f32_bits(f);
        test_ctx("key %08x, floor bits %08x", t, fb);
        /* the lowest float passing: its key reaches t, the float just below it (in key order) does not */
        if (!is_nan_bits(fb)) {
            ASSERT_TRUE(ltk_rank_key(f) >= t);
            const uint32_t kf = ltk_rank_key(f);
            if (kf > 0x007fffffu) { /* a float exists below f: the key just under f's */
                const float below = ltk_rank_key_to_f32(kf == 0x80000000u ? 0x7ffffffeu : kf - 1u);
                ASSERT_TRUE(ltk_rank_key(below) < t);
            }
        }
        for (int j = 0; j < 16; j++) {
            const uint32_t ux = draw_bits(t);
            const float x = ltk_bits_f32(ux);
            test_ctx("key %08x, floor bits %08x, x bits %08x", t, fb, ux);
            ASSERT_TRUE((ltk_rank_key(x) >= t) == (x >= f));
            checked++;
        }
    }
    CHECK(checked > 1000000, "only %lld pairs checked", (long long)checked);
}

/* ltk_key_bucket (the CUDA kNN final select's buckets): on every distance below 2^15 a bucket in
 * 0 .. 2047, never decreasing, never skipping one, all 2048 used; the shift is the smallest that
 * brings a span below 2^15; on random ranges, a larger key never lands in a lower bucket. */
static void test_key_bucket(void) {
    uint32_t prev = 0;
    for (uint32_t d = 0; d < 32768u; d++) {
        const uint32_t b = ltk_key_bucket(d, 0u, 0);
        test_ctx("d %u bucket %u", d, b);
        ASSERT_TRUE(b < 2048u);
        ASSERT_TRUE(d == 0 ? b == 0u : (b == prev || b == prev + 1u));
        prev = b;
    }
    ASSERT_TRUE(prev == 2047u);
    for (int i = 0; i < 200000; i++) {
        const uint32_t span = (uint32_t)(rng_u64() >> (rng_u64() % 33)), kmin = (uint32_t)rng_u64() & ~span;
        const int sh = ltk_key_bucket_shift(span);
        test_ctx("span %08x kmin %08x sh %d", span, kmin, sh);
        ASSERT_TRUE((span >> sh) < 32768u && (sh == 0 || (span >> (sh - 1)) >= 32768u));
        uint32_t a = (uint32_t)(rng_u64() % ((uint64_t)span + 1)), b = (uint32_t)(rng_u64() % ((uint64_t)span + 1));
        if (a > b) {
            const uint32_t t = a;
            a = b;
            b = t;
        }
        const uint32_t ba = ltk_key_bucket(kmin + a, kmin, sh), bb = ltk_key_bucket(kmin + b, kmin, sh);
        ASSERT_TRUE(ba <= bb && bb < 2048u && ltk_key_bucket(kmin + span, kmin, sh) < 2048u);
    }
}

int main(int argc, char **argv) {
    static const t_test tests[] = {T_ENTRY(test_key_order), T_ENTRY(test_key_floor), T_ENTRY(test_key_bucket)};
    return T_RUN_ALL(tests);
}
