/* The prefill driver against one direct indexer call over the whole sequence: same backend,
 * same scores, so the chunked run with its hot-set carry must give identical indices and scores,
 * with the outputs given, through the callback only, and for m = 1 (DSA) and m = 4 (CSA). */
#include "harness.h"

#include "litetopk.h"

static float frand(void) { return (float)(2.0 * rng_unit() - 1.0); }

typedef struct { int32_t *idx; float *sc; int64_t k, rows_seen; } sink;

static int collect(int64_t first, int64_t rows, const int32_t *idx, const float *scores, int64_t stride, void *user) {
    sink *s = user;
    for (int64_t r = 0; r < rows; r++) memcpy(s->idx + (first + r) * s->k, idx + r * stride, sizeof(int32_t) * s->k);
    s->rows_seen += rows;
    (void)scores;
    return 0;
}

static int stop_early(int64_t first, int64_t rows, const int32_t *idx, const float *sc, int64_t stride, void *user) {
    (void)first, (void)rows, (void)idx, (void)sc, (void)stride, (void)user;
    return 1;
}

static void run_case(ltk_backend be, int64_t L, int32_t m, int32_t H, int32_t D, int32_t k, int64_t chunk) {
    int64_t S = L / m;
    float *q = malloc(sizeof(float) * L * H * D), *kv = malloc(sizeof(float) * (S + 1) * D);
    float *w = malloc(sizeof(float) * L * H), *scale = malloc(sizeof(float) * (S + 1));
    int32_t *ks = malloc(sizeof(int32_t) * L), *ke = malloc(sizeof(int32_t) * L);
    int32_t *ref_idx = malloc(sizeof(int32_t) * L * k), *got_idx = malloc(sizeof(int32_t) * L * k);
    float *ref_sc = malloc(sizeof(float) * L * k), *got_sc = malloc(sizeof(float) * L * k);
    for (int64_t i = 0; i < L * H * D; i++) q[i] = frand();
    for (int64_t i = 0; i < S * D; i++) kv[i] = frand();
    for (int64_t i = 0; i < L * H; i++) w[i] = frand();
    for (int64_t i = 0; i < S; i++) scale[i] = 0.5f + 0.5f * fabsf(frand());
    for (int64_t t = 0; t < L; t++) ks[t] = 0, ke[t] = (int32_t)((t + 1) / m);

    ltk_exec e = {.backend = be};
    ltk_indexer_args a = {.T = L, .S = S, .H = H, .D = D, .k = k, .dtype = LTK_DTYPE_F32, .q = q, .kv = kv,
                          .kv_scale = scale, .weights = w, .ks = ks, .ke = ke, .out_idx = ref_idx,
                          .out_scores = ref_sc, .flags = LTK_FLAG_ABSOLUTE};
    ltk_status st = ltk_indexer_topk(&a, &e);
    CHECK(st == LTK_OK, "direct indexer: %s (%s)", ltk_status_str(st), ltk_last_error());

    memset(got_idx, 0x7b, sizeof(int32_t) * L * k);
    memset(got_sc, 0x7b, sizeof(float) * L * k);
    ltk_prefill_args p = {.L = L, .m = m, .H = H, .D = D, .k = k, .dtype = LTK_DTYPE_F32, .q = q, .kv = kv,
                          .kv_scale = scale, .weights = w, .chunk = chunk, .out_idx = got_idx, .out_scores = got_sc};
    st = ltk_prefill_run(&p, &e);
    CHECK(st == LTK_OK, "prefill: %s (%s)", ltk_status_str(st), ltk_last_error());
    CHECK(memcmp(ref_idx, got_idx, sizeof(int32_t) * L * k) == 0, "%s L=%lld m=%d: indices differ",
          ltk_backend_name(be), (long long)L, m);
    CHECK(memcmp(ref_sc, got_sc, sizeof(float) * L * k) == 0, "%s L=%lld m=%d: scores differ", ltk_backend_name(be),
          (long long)L, m);

    /* Callback only: outputs live in the workspace, one chunk at a time. */
    sink s = {got_idx, NULL, k, 0};
    memset(got_idx, 0x7b, sizeof(int32_t) * L * k);
    p.out_idx = NULL;
    p.out_scores = NULL;
    p.callback = collect;
    p.user = &s;
    st = ltk_prefill_run(&p, &e);
    CHECK(st == LTK_OK, "prefill callback: %s (%s)", ltk_status_str(st), ltk_last_error());
    CHECK(s.rows_seen == L, "callback saw %lld rows of %lld", (long long)s.rows_seen, (long long)L);
    CHECK(memcmp(ref_idx, got_idx, sizeof(int32_t) * L * k) == 0, "%s callback indices differ", ltk_backend_name(be));

    /* A callback may stop the run; the status says so. */
    p.callback = stop_early;
    st = ltk_prefill_run(&p, &e);
    CHECK(st == LTK_EINVAL && strstr(ltk_last_error(), "callback") != NULL, "stop: %s (%s)", ltk_status_str(st),
          ltk_last_error());

    /* The workspace is bounded independently of L at a fixed chunk (fused). It may grow with the
     * first chunks' keys (each chunk is planned for its own keys; a CPU fused call over <= 12k keys
     * runs dense; the CPU vote counts per key while S <= 4 T k), then stays put: the sizes for
     * L = 4, 64, 256 and 1024 chunks never exceed the size for 4096 chunks, which equals 1024's. */
    static const int64_t mult[] = {4, 64, 256, 1024, 4096};
    size_t ws_at[5] = {0, 0, 0, 0, 0};
    p.callback = collect;
    for (int i = 0; i < 5; i++) {
        p.L = mult[i] * chunk;
        CHECK(ltk_prefill_workspace_size(&p, &e, &ws_at[i]) == LTK_OK, "%s", ltk_last_error());
    }
    if (be != LTK_BACKEND_REF)
        CHECK(ws_at[0] <= ws_at[4] && ws_at[1] <= ws_at[4] && ws_at[2] <= ws_at[4] && ws_at[3] == ws_at[4],
              "%s workspace not bounded in L: %zu %zu %zu %zu %zu (L = 4..4096 chunks)", ltk_backend_name(be),
              ws_at[0], ws_at[1], ws_at[2], ws_at[3], ws_at[4]);

    free(q), free(kv), free(w), free(scale), free(ks), free(ke), free(ref_idx), free(got_idx), free(ref_sc), free(got_sc);
}

static void cases(ltk_backend be) {
    run_case(be, 300, 1, 4, 16, 8, 64);
    run_case(be, 300, 4, 4, 16, 8, 64);
    run_case(be, 513, 4, 2, 8, 16, 100);
    if (be == LTK_BACKEND_CPU) run_case(be, 4096, 1, 8, 32, 64, 1000);
}
static void test_prefill_ref(void) { cases(LTK_BACKEND_REF); }
static void test_prefill_cpu(void) { cases(LTK_BACKEND_CPU); }

static void test_prefill_arguments(void) {
    ltk_prefill_args p = {.L = 10, .m = 0, .H = 1, .D = 1, .k = 1};
    CHECK(ltk_prefill_run(&p, NULL) == LTK_EINVAL, "m=0 accepted");
    p.m = 1;
    CHECK(ltk_prefill_run(&p, NULL) == LTK_EINVAL, "no outputs and no callback accepted");
}

int main(int argc, char **argv) {
    static const t_test tests[] = {T_ENTRY(test_prefill_ref), T_ENTRY(test_prefill_cpu), T_ENTRY(test_prefill_arguments)};
    return T_RUN_ALL(tests);
}
