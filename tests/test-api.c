/* test-api: the argument contract of litetopk.h. Every required pointer NULL, every shape and
 * stride out of range, unknown enums and flags, bad row ranges, workspace and backend errors: the
 * status code must be the documented one, ltk_last_error() must name the offending argument, and
 * the outputs must be left untouched (poisoned outputs inside guard canaries). Also the status
 * strings, the thread-local error message, backend queries, ltk_info, and the hot-set state API. */
#include "harness.h"

#include "litetopk.h"
#include "ltk-tune.h" /* ltk_tune_set: re-read LTK_BACKEND */

#include <pthread.h>

/* ---- poisoned, guarded outputs ------------------------------------------------------------ */
enum { POISON = 0x7b };

typedef struct {
    void *p[4];
    size_t n;
} outs;

static void *out_new(outs *o, size_t bytes) {
    void *p = t_guarded_alloc(bytes, 0);
    memset(p, POISON, bytes);
    o->p[o->n++] = p;
    return p;
}

/* 1 if every output still holds only the poison byte and its canaries are intact. */
static int outs_untouched(const outs *o) {
    for (size_t i = 0; i < o->n; i++) {
        const uint8_t *b = o->p[i];
        if (!t_guarded_ok(b)) return 0;
        for (size_t j = 0; j < t_guarded_size(b); j++)
            if (b[j] != POISON) return 0;
    }
    return 1;
}

static void outs_free(outs *o) {
    for (size_t i = 0; i < o->n; i++) t_guarded_free(o->p[i]);
    o->n = 0;
}

/* ---- status codes and messages ------------------------------------------------------------ */
static void test_status_codes(void) {
    /* Values are ABI: pinned. */
    ASSERT_EQ_INT(LTK_OK, 0);
    ASSERT_EQ_INT(LTK_EINVAL, -1);
    ASSERT_EQ_INT(LTK_EUNSUPPORTED, -2);
    ASSERT_EQ_INT(LTK_ENOBACKEND, -3);
    ASSERT_EQ_INT(LTK_ENOMEM, -4);
    ASSERT_EQ_INT(LTK_EWORKSPACE, -5);
    ASSERT_EQ_INT(LTK_ECUDA, -6);
    ASSERT_EQ_INT(LTK_EINTERNAL, -7);
    ASSERT_EQ_INT(LTK_EIO, -8);
    ASSERT_EQ_INT(LTK_EFORMAT, -9);
    static const struct {
        ltk_status s;
        const char *word;
    } want[] = {
        {LTK_OK, "success"},         {LTK_EINVAL, "invalid"},    {LTK_EUNSUPPORTED, "unsupported"},
        {LTK_ENOBACKEND, "backend"}, {LTK_ENOMEM, "memory"},     {LTK_EWORKSPACE, "workspace"},
        {LTK_ECUDA, "CUDA"},         {LTK_EINTERNAL, "internal"}, {LTK_EIO, "I/O"},
        {LTK_EFORMAT, "malformed"},
    };
    size_t n = sizeof want / sizeof want[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = ltk_status_str(want[i].s);
        ASSERT_TRUE(s != NULL && s[0] != '\0');
        ASSERT_STR_CONTAINS(s, want[i].word);
        for (size_t j = 0; j < i; j++) ASSERT_TRUE(strcmp(s, ltk_status_str(want[j].s)) != 0);
    }
    /* Unknown codes still give a non-NULL text, distinct from every known one. */
    static const int unknown[] = {1, -10, -100, 12345, INT32_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = ltk_status_str((ltk_status)unknown[i]);
        ASSERT_TRUE(s != NULL && s[0] != '\0');
        for (size_t j = 0; j < n; j++) ASSERT_TRUE(strcmp(s, ltk_status_str(want[j].s)) != 0);
    }
}

static void *thread_last_error(void *arg) {
    const char **out = arg;
    static char copy[512];
    snprintf(copy, sizeof copy, "%s", ltk_last_error());
    *out = copy;
    return NULL;
}

static void test_last_error(void) {
    ltk_select_args a = {.rows = 1, .cols = 4, .k = 0};
    ASSERT_STATUS(ltk_select_topk(&a, NULL), LTK_EINVAL, "k=0");
    /* The message is per thread: a fresh thread sees "". */
    const char *other = NULL;
    pthread_t th;
    ASSERT_EQ_INT(pthread_create(&th, NULL, thread_last_error, &other), 0);
    ASSERT_EQ_INT(pthread_join(th, NULL), 0);
    ASSERT_TRUE(other != NULL);
    ASSERT_EQ_STR(other, "");
    ASSERT_STR_CONTAINS(ltk_last_error(), "k=0"); /* untouched by the other thread */
    /* A successful call clears it. */
    float sc[4] = {1, 2, 3, 4};
    int32_t idx[2];
    a.k = 2;
    a.scores = sc;
    a.out_idx = idx;
    ASSERT_STATUS(ltk_select_topk(&a, NULL), LTK_OK, NULL);
    ASSERT_EQ_STR(ltk_last_error(), "");
    ASSERT_EQ_INT(idx[0], 3);
    ASSERT_EQ_INT(idx[1], 2);
}

/* ---- backend queries, dtype sizes, info --------------------------------------------------- */
static void test_backend_queries(void) {
    ASSERT_EQ_STR(ltk_backend_name(LTK_BACKEND_AUTO), "auto");
    ASSERT_EQ_STR(ltk_backend_name(LTK_BACKEND_REF), "ref");
    ASSERT_EQ_STR(ltk_backend_name(LTK_BACKEND_CPU), "cpu");
    ASSERT_EQ_STR(ltk_backend_name(LTK_BACKEND_CUDA), "cuda");
    ASSERT_TRUE(ltk_backend_name((ltk_backend)77) != NULL);
    ASSERT_EQ_INT(ltk_backend_available(LTK_BACKEND_REF), 1);
    ASSERT_EQ_INT(ltk_backend_available(LTK_BACKEND_CPU), 1);
    ASSERT_EQ_INT(ltk_backend_available((ltk_backend)77), 0);
    ASSERT_EQ_INT(ltk_backend_available((ltk_backend)-1), 0);
    ASSERT_EQ_INT(ltk_backend_resolve(LTK_BACKEND_REF), LTK_BACKEND_REF);
    ASSERT_EQ_INT(ltk_backend_resolve(LTK_BACKEND_CPU), LTK_BACKEND_CPU);

    /* AUTO: CUDA when usable, else CPU; env LTK_BACKEND overrides. */
    char *saved = getenv("LTK_BACKEND") ? strdup(getenv("LTK_BACKEND")) : NULL;
    /* the library reads its environment once (ltk-tune.h): the test hook re-reads it */
    unsetenv("LTK_BACKEND");
    ltk_tune_set(NULL);
    ASSERT_EQ_INT(ltk_backend_resolve(LTK_BACKEND_AUTO),
                  ltk_backend_available(LTK_BACKEND_CUDA) ? LTK_BACKEND_CUDA : LTK_BACKEND_CPU);
    setenv("LTK_BACKEND", "ref", 1);
    ltk_tune_set(NULL);
    ltk_backend r_ref = ltk_backend_resolve(LTK_BACKEND_AUTO);
    setenv("LTK_BACKEND", "cpu", 1);
    ltk_tune_set(NULL);
    ltk_backend r_cpu = ltk_backend_resolve(LTK_BACKEND_AUTO);
    ltk_status st_cuda = LTK_OK;
    if (!ltk_backend_available(LTK_BACKEND_CUDA)) {
        setenv("LTK_BACKEND", "cuda", 1);
        ltk_tune_set(NULL);
        float sc[2] = {1, 2};
        int32_t idx[1] = {POISON};
        ltk_select_args a = {.rows = 1, .cols = 2, .k = 1, .scores = sc, .out_idx = idx};
        st_cuda = ltk_select_topk(&a, NULL);
        if (idx[0] != POISON) st_cuda = LTK_EINTERNAL;
    }
    if (saved) setenv("LTK_BACKEND", saved, 1);
    else unsetenv("LTK_BACKEND");
    ltk_tune_set(NULL);
    free(saved);
    ASSERT_EQ_INT(r_ref, LTK_BACKEND_REF);
    ASSERT_EQ_INT(r_cpu, LTK_BACKEND_CPU);
    if (!ltk_backend_available(LTK_BACKEND_CUDA)) ASSERT_EQ_INT(st_cuda, LTK_ENOBACKEND);

    ASSERT_EQ_INT(ltk_dtype_size(LTK_DTYPE_F32), 4);
    ASSERT_EQ_INT(ltk_dtype_size(LTK_DTYPE_F16), 2);
    ASSERT_EQ_INT(ltk_dtype_size(LTK_DTYPE_BF16), 2);
    ASSERT_EQ_INT(ltk_dtype_size(LTK_DTYPE_E4M3), 1);
    ASSERT_EQ_INT(ltk_dtype_size((ltk_dtype)4), 0);
    ASSERT_EQ_INT(ltk_dtype_size((ltk_dtype)-1), 0);
}

static void test_info(void) {
    char big[8192];
    ASSERT_STATUS(ltk_info(big, sizeof big), LTK_OK, NULL);
    ASSERT_TRUE(memchr(big, '\0', sizeof big) != NULL);
    ASSERT_STR_CONTAINS(big, "litetopk");
    ASSERT_STR_CONTAINS(big, "ref");
    ASSERT_STR_CONTAINS(big, "cpu");
    ASSERT_STR_CONTAINS(big, "cuda");
    size_t full = strlen(big);
    ASSERT_STATUS(ltk_info(NULL, 16), LTK_EINVAL, NULL);
    ASSERT_STATUS(ltk_info(big, 0), LTK_EINVAL, NULL);
    /* Truncation: NUL-terminated within cap, a prefix of the full text, nothing written past cap. */
    for (size_t cap = 1; cap <= full + 2; cap += (cap < 64 ? 1 : 13)) {
        char *b = t_guarded_alloc(cap, 0);
        memset(b, POISON, cap);
        ltk_status s = ltk_info(b, cap);
        int ok = s == LTK_OK && t_guarded_ok(b) && memchr(b, '\0', cap) != NULL &&
                 strncmp(b, big, strlen(b)) == 0 && strlen(b) == (full < cap ? full : cap - 1);
        t_guarded_free(b);
        if (!CHECK(ok, "ltk_info(buf, %zu): status %d, truncation or canary wrong", cap, (int)s)) return;
    }
}

/* ---- indexer validation ------------------------------------------------------------------- */
enum { IT = 2, IS = 5, IH = 2, ID = 4, IK = 3 };

typedef struct {
    float q[IT * IH * ID], kv[IS * ID], w[IT * IH], scale[IS];
    int32_t ks[IT], ke[IT];
    outs o;
    int32_t *idx;
    float *sc;
    ltk_indexer_args a;
} ifix;

static void ifix_init(ifix *f) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < IT * IH * ID; i++) f->q[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < IS * ID; i++) f->kv[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < IT * IH; i++) f->w[i] = 1.0f;
    for (int i = 0; i < IS; i++) f->scale[i] = 1.0f;
    f->ks[0] = 0, f->ke[0] = 5, f->ks[1] = 1, f->ke[1] = 4;
    f->idx = out_new(&f->o, sizeof(int32_t) * IT * IK);
    f->sc = out_new(&f->o, sizeof(float) * IT * IK);
    f->a = (ltk_indexer_args){.T = IT, .S = IS, .H = IH, .D = ID, .k = IK, .dtype = LTK_DTYPE_F32, .q = f->q,
                              .kv = f->kv, .kv_scale = f->scale, .weights = f->w, .ks = f->ks, .ke = f->ke,
                              .out_idx = f->idx, .out_scores = f->sc};
}

/* Runs one mutated copy of the fixture through the workspace query and the call: both must
 * return `want` with a message naming `msg`, and the outputs must stay poisoned. */
#define BAD_INDEXER(mutation, want, msg)                                                            \
    do {                                                                                            \
        ltk_indexer_args a = f.a;                                                                   \
        ltk_exec e = ex;                                                                            \
        mutation;                                                                                   \
        test_ctx("backend %s, indexer: %s", ltk_backend_name(be), #mutation);                      \
        size_t bytes = 0;                                                                           \
        ASSERT_STATUS(ltk_indexer_workspace_size(&a, &e, &bytes), want, msg);                      \
        ASSERT_STATUS(ltk_indexer_topk(&a, &e), want, msg);                                        \
        ASSERT_TRUE(outs_untouched(&f.o));                                                          \
    } while (0)

static void indexer_validation_on(ltk_backend be) {
    ifix f;
    ifix_init(&f);
    ltk_exec ex = {.backend = be};
    /* The fixture itself is valid (so each mutation below is what fails). */
    {
        ltk_indexer_args a = f.a;
        ASSERT_STATUS(ltk_indexer_topk(&a, &ex), LTK_OK, NULL);
        memset(f.idx, POISON, sizeof(int32_t) * IT * IK);
        memset(f.sc, POISON, sizeof(float) * IT * IK);
    }
    ASSERT_STATUS(ltk_indexer_topk(NULL, &ex), LTK_EINVAL, "args");
    {
        size_t bytes;
        ASSERT_STATUS(ltk_indexer_workspace_size(NULL, &ex, &bytes), LTK_EINVAL, "args");
        ASSERT_STATUS(ltk_indexer_workspace_size(&f.a, &ex, NULL), LTK_EINVAL, "bytes");
    }
    /* Required pointers. */
    BAD_INDEXER(a.q = NULL, LTK_EINVAL, "q");
    BAD_INDEXER(a.weights = NULL, LTK_EINVAL, "weights");
    BAD_INDEXER(a.out_idx = NULL, LTK_EINVAL, "out_idx");
    BAD_INDEXER(a.kv = NULL, LTK_EINVAL, "kv");
    /* Shapes. */
    BAD_INDEXER(a.T = -1, LTK_EINVAL, "T=-1");
    BAD_INDEXER(a.T = (int64_t)INT32_MAX + 1, LTK_EINVAL, "T=");
    BAD_INDEXER(a.T = INT64_MIN, LTK_EINVAL, "T=");
    BAD_INDEXER(a.S = -1, LTK_EINVAL, "S=-1");
    BAD_INDEXER(a.S = (int64_t)INT32_MAX + 1, LTK_EINVAL, "S=");
    BAD_INDEXER(a.H = 0, LTK_EINVAL, "H=0");
    BAD_INDEXER(a.H = -3, LTK_EINVAL, "H=-3");
    BAD_INDEXER(a.H = 129, LTK_EINVAL, "H=129");
    BAD_INDEXER(a.D = 0, LTK_EINVAL, "D=0");
    BAD_INDEXER(a.D = 257, LTK_EINVAL, "D=257");
    BAD_INDEXER(a.k = 0, LTK_EINVAL, "k=0");
    BAD_INDEXER(a.k = -1, LTK_EINVAL, "k=-1");
    BAD_INDEXER(a.k = 8193; a.out_stride = 8193, LTK_EINVAL, "k=8193");
    /* Strides smaller than a row (or negative). */
    BAD_INDEXER(a.q_stride_t = IH * ID - 1, LTK_EINVAL, "q_stride_t");
    BAD_INDEXER(a.q_stride_t = -8, LTK_EINVAL, "q_stride_t");
    BAD_INDEXER(a.kv_stride_s = ID - 1, LTK_EINVAL, "kv_stride_s");
    BAD_INDEXER(a.kv_stride_s = -1, LTK_EINVAL, "kv_stride_s");
    BAD_INDEXER(a.w_stride_t = IH - 1, LTK_EINVAL, "w_stride_t");
    BAD_INDEXER(a.out_stride = IK - 1, LTK_EINVAL, "out_stride");
    BAD_INDEXER(a.out_stride = -IK, LTK_EINVAL, "out_stride");
    /* Enumerations and flags. */
    BAD_INDEXER(a.dtype = LTK_DTYPE_F16, LTK_EINVAL, "dtype");
    BAD_INDEXER(a.dtype = (ltk_dtype)4, LTK_EINVAL, "dtype");
    BAD_INDEXER(a.dtype = (ltk_dtype)-1, LTK_EINVAL, "dtype");
    BAD_INDEXER(a.flags = 0x4u, LTK_EINVAL, "flags");
    BAD_INDEXER(a.flags = LTK_FLAG_UNSORTED | 0x80000000u, LTK_EINVAL, "flags");
    /* Row ranges. */
    BAD_INDEXER(a.ke = NULL, LTK_EINVAL, "ks and ke");
    BAD_INDEXER(a.ks = NULL, LTK_EINVAL, "ks and ke");
    {
        int32_t ks[IT] = {0, 3}, ke[IT] = {5, 2}; /* ks > ke in row 1 */
        BAD_INDEXER(a.ks = ks; a.ke = ke, LTK_EINVAL, "row 1");
    }
    {
        int32_t ks[IT] = {-1, 0}, ke[IT] = {5, 5};
        BAD_INDEXER(a.ks = ks; a.ke = ke, LTK_EINVAL, "row 0");
    }
    {
        int32_t ks[IT] = {0, 0}, ke[IT] = {5, IS + 1};
        BAD_INDEXER(a.ks = ks; a.ke = ke, LTK_EINVAL, "row 1");
    }
    {
        int32_t ks[IT] = {IS + 1, 0}, ke[IT] = {IS + 1, 0}; /* empty but outside [0, S] */
        BAD_INDEXER(a.ks = ks; a.ke = ke, LTK_EINVAL, "row 0");
    }
    /* Execution options. */
    BAD_INDEXER(e.backend = (ltk_backend)-1, LTK_EINVAL, "backend");
    BAD_INDEXER(e.backend = (ltk_backend)4, LTK_EINVAL, "backend");
    BAD_INDEXER(e.algo = (ltk_algo)3, LTK_EINVAL, "algo");
    BAD_INDEXER(e.algo = (ltk_algo)-1, LTK_EINVAL, "algo");
    BAD_INDEXER(e.num_threads = -1, LTK_EINVAL, "num_threads");
    BAD_INDEXER(e.workspace_bytes = 4096, LTK_EINVAL, "workspace_bytes");
    /* Valid limits are accepted: S=0 pads every row; T=0 needs no pointers. */
    {
        ltk_indexer_args a = f.a;
        a.S = 0;
        a.kv = NULL;
        a.kv_scale = NULL;
        a.ks = a.ke = NULL;
        ASSERT_STATUS(ltk_indexer_topk(&a, &ex), LTK_OK, NULL);
        for (int i = 0; i < IT * IK; i++) {
            ASSERT_EQ_INT(f.idx[i], -1);
            ASSERT_TRUE(isinf(f.sc[i]) && f.sc[i] < 0);
        }
        ASSERT_TRUE(t_guarded_ok(f.idx) && t_guarded_ok(f.sc));
        memset(f.idx, POISON, sizeof(int32_t) * IT * IK);
        memset(f.sc, POISON, sizeof(float) * IT * IK);
        ltk_indexer_args z = {.T = 0, .S = 10, .H = 1, .D = 1, .k = 1, .dtype = LTK_DTYPE_E4M3};
        ASSERT_STATUS(ltk_indexer_topk(&z, &ex), LTK_OK, NULL);
        z = (ltk_indexer_args){.T = 0, .S = IS, .H = 128, .D = 256, .k = 8192, .dtype = LTK_DTYPE_BF16};
        ASSERT_STATUS(ltk_indexer_topk(&z, &ex), LTK_OK, NULL);
        ASSERT_TRUE(outs_untouched(&f.o));
    }
    outs_free(&f.o);
}

static void test_indexer_validation(void) {
    indexer_validation_on(LTK_BACKEND_REF);
    if (T_FAILURES()) return;
    indexer_validation_on(LTK_BACKEND_CPU);
}

/* ---- kNN validation ----------------------------------------------------------------------- */
enum { KB = 2, KN = 6, KD = 3, KK = 4 };

#define BAD_KNN(mutation, want, msg)                                                                \
    do {                                                                                            \
        ltk_knn_args a = good;                                                                      \
        ltk_exec e = ex;                                                                            \
        mutation;                                                                                   \
        test_ctx("backend %s, knn: %s", ltk_backend_name(be), #mutation);                          \
        size_t bytes = 0;                                                                           \
        ASSERT_STATUS(ltk_knn_workspace_size(&a, &e, &bytes), want, msg);                          \
        ASSERT_STATUS(ltk_knn_topk(&a, &e), want, msg);                                            \
        ASSERT_TRUE(outs_untouched(&o));                                                            \
    } while (0)

static void knn_validation_on(ltk_backend be) {
    float qv[KB * KD], base[KN * KD];
    for (int i = 0; i < KB * KD; i++) qv[i] = (float)(i % 3) - 1.0f;
    for (int i = 0; i < KN * KD; i++) base[i] = (float)(i % 5) - 2.0f;
    outs o = {0};
    int64_t *idx = out_new(&o, sizeof(int64_t) * KB * KK);
    float *sc = out_new(&o, sizeof(float) * KB * KK);
    ltk_knn_args good = {.B = KB, .N = KN, .D = KD, .k = KK, .dtype = LTK_DTYPE_F32, .metric = LTK_METRIC_L2,
                         .queries = qv, .base = base, .out_idx = idx, .out_scores = sc};
    ltk_exec ex = {.backend = be};
    {
        ltk_knn_args a = good;
        ASSERT_STATUS(ltk_knn_topk(&a, &ex), LTK_OK, NULL);
        memset(idx, POISON, sizeof(int64_t) * KB * KK);
        memset(sc, POISON, sizeof(float) * KB * KK);
    }
    ASSERT_STATUS(ltk_knn_topk(NULL, &ex), LTK_EINVAL, "args");
    {
        size_t bytes;
        ASSERT_STATUS(ltk_knn_workspace_size(&good, &ex, NULL), LTK_EINVAL, "bytes");
        ASSERT_STATUS(ltk_knn_workspace_size(NULL, &ex, &bytes), LTK_EINVAL, "args");
    }
    BAD_KNN(a.queries = NULL, LTK_EINVAL, "queries");
    BAD_KNN(a.out_idx = NULL, LTK_EINVAL, "out_idx");
    BAD_KNN(a.base = NULL, LTK_EINVAL, "base");
    BAD_KNN(a.B = -1, LTK_EINVAL, "B=-1");
    BAD_KNN(a.B = (int64_t)INT32_MAX + 1, LTK_EINVAL, "B=");
    BAD_KNN(a.N = -1, LTK_EINVAL, "N=-1");
    BAD_KNN(a.D = 0, LTK_EINVAL, "D=0");
    BAD_KNN(a.D = 65537, LTK_EINVAL, "D=65537");
    BAD_KNN(a.k = 0, LTK_EINVAL, "k=0");
    BAD_KNN(a.k = -2, LTK_EINVAL, "k=-2");
    BAD_KNN(a.k = 16385; a.out_stride = 16385, LTK_EINVAL, "k=16385");
    BAD_KNN(a.dtype = LTK_DTYPE_E4M3, LTK_EINVAL, "dtype");
    BAD_KNN(a.dtype = (ltk_dtype)9, LTK_EINVAL, "dtype");
    BAD_KNN(a.metric = (ltk_metric)3, LTK_EINVAL, "metric");
    BAD_KNN(a.metric = (ltk_metric)-1, LTK_EINVAL, "metric");
    BAD_KNN(a.flags = LTK_FLAG_ABSOLUTE, LTK_EINVAL, "flags"); /* no ranges in kNN */
    BAD_KNN(a.flags = 0x10u, LTK_EINVAL, "flags");
    BAD_KNN(a.q_stride = KD - 1, LTK_EINVAL, "q_stride");
    BAD_KNN(a.q_stride = -KD, LTK_EINVAL, "q_stride");
    BAD_KNN(a.base_stride = KD - 1, LTK_EINVAL, "base_stride");
    BAD_KNN(a.out_stride = KK - 1, LTK_EINVAL, "out_stride");
    BAD_KNN(e.backend = (ltk_backend)5, LTK_EINVAL, "backend");
    BAD_KNN(e.algo = (ltk_algo)7, LTK_EINVAL, "algo");
    BAD_KNN(e.num_threads = -4, LTK_EINVAL, "num_threads");
    BAD_KNN(e.workspace_bytes = 1, LTK_EINVAL, "workspace_bytes");
    {
        /* N = 0: every slot padded (-1, +inf for L2); B = 0: nothing needed. */
        ltk_knn_args a = good;
        a.N = 0;
        a.base = NULL;
        ASSERT_STATUS(ltk_knn_topk(&a, &ex), LTK_OK, NULL);
        for (int i = 0; i < KB * KK; i++) {
            ASSERT_EQ_INT(idx[i], -1);
            ASSERT_TRUE(isinf(sc[i]) && sc[i] > 0);
        }
        a.metric = LTK_METRIC_IP;
        ASSERT_STATUS(ltk_knn_topk(&a, &ex), LTK_OK, NULL);
        for (int i = 0; i < KB * KK; i++) ASSERT_TRUE(isinf(sc[i]) && sc[i] < 0);
        memset(idx, POISON, sizeof(int64_t) * KB * KK);
        memset(sc, POISON, sizeof(float) * KB * KK);
        ltk_knn_args z = {.B = 0, .N = 3, .D = 2, .k = 1, .dtype = LTK_DTYPE_F16, .metric = LTK_METRIC_COS};
        ASSERT_STATUS(ltk_knn_topk(&z, &ex), LTK_OK, NULL);
        ASSERT_TRUE(outs_untouched(&o));
    }
    outs_free(&o);
}

static void test_knn_validation(void) {
    knn_validation_on(LTK_BACKEND_REF);
    if (T_FAILURES()) return;
    knn_validation_on(LTK_BACKEND_CPU);
}

/* ---- select validation -------------------------------------------------------------------- */
enum { SR = 3, SC = 8, SK = 3 };

#define BAD_SELECT(mutation, want, msg)                                                             \
    do {                                                                                            \
        ltk_select_args a = good;                                                                   \
        ltk_exec e = ex;                                                                            \
        mutation;                                                                                   \
        test_ctx("backend %s, select: %s", ltk_backend_name(be), #mutation);                       \
        size_t bytes = 0;                                                                           \
        ASSERT_STATUS(ltk_select_workspace_size(&a, &e, &bytes), want, msg);                       \
        ASSERT_STATUS(ltk_select_topk(&a, &e), want, msg);                                         \
        ASSERT_TRUE(outs_untouched(&o));                                                            \
    } while (0)

static void select_validation_on(ltk_backend be) {
    float scores[SR * SC];
    for (int i = 0; i < SR * SC; i++) scores[i] = (float)((i * 7) % 11);
    int32_t starts[SR] = {0, 2, 8}, ends[SR] = {8, 5, 8};
    outs o = {0};
    int32_t *idx = out_new(&o, sizeof(int32_t) * SR * SK);
    float *sc = out_new(&o, sizeof(float) * SR * SK);
    ltk_select_args good = {.rows = SR, .cols = SC, .k = SK, .dtype = LTK_DTYPE_F32, .scores = scores,
                            .starts = starts, .ends = ends, .out_idx = idx, .out_scores = sc};
    ltk_exec ex = {.backend = be};
    {
        ltk_select_args a = good;
        ASSERT_STATUS(ltk_select_topk(&a, &ex), LTK_OK, NULL);
        memset(idx, POISON, sizeof(int32_t) * SR * SK);
        memset(sc, POISON, sizeof(float) * SR * SK);
    }
    ASSERT_STATUS(ltk_select_topk(NULL, &ex), LTK_EINVAL, "args");
    {
        size_t bytes;
        ASSERT_STATUS(ltk_select_workspace_size(&good, &ex, NULL), LTK_EINVAL, "bytes");
        ASSERT_STATUS(ltk_select_workspace_size(NULL, &ex, &bytes), LTK_EINVAL, "args");
    }
    BAD_SELECT(a.scores = NULL, LTK_EINVAL, "scores");
    BAD_SELECT(a.out_idx = NULL, LTK_EINVAL, "out_idx");
    BAD_SELECT(a.rows = -1, LTK_EINVAL, "rows=-1");
    BAD_SELECT(a.rows = (int64_t)INT32_MAX + 1, LTK_EINVAL, "rows=");
    BAD_SELECT(a.cols = -1, LTK_EINVAL, "cols=-1");
    BAD_SELECT(a.cols = (int64_t)INT32_MAX + 1, LTK_EINVAL, "cols=");
    BAD_SELECT(a.k = 0, LTK_EINVAL, "k=0");
    BAD_SELECT(a.k = -7, LTK_EINVAL, "k=-7");
    BAD_SELECT(a.k = 65537; a.out_stride = 65537, LTK_EINVAL, "k=65537");
    BAD_SELECT(a.dtype = LTK_DTYPE_E4M3, LTK_EINVAL, "dtype");
    BAD_SELECT(a.dtype = (ltk_dtype)5, LTK_EINVAL, "dtype");
    BAD_SELECT(a.flags = 0x8u, LTK_EINVAL, "flags");
    BAD_SELECT(a.row_stride = SC - 1, LTK_EINVAL, "row_stride");
    BAD_SELECT(a.row_stride = -SC, LTK_EINVAL, "row_stride");
    BAD_SELECT(a.out_stride = SK - 1, LTK_EINVAL, "out_stride");
    BAD_SELECT(a.ends = NULL, LTK_EINVAL, "starts and ends");
    BAD_SELECT(a.starts = NULL, LTK_EINVAL, "starts and ends");
    {
        int32_t s2[SR] = {0, 6, 0}, e2[SR] = {8, 5, 8}; /* starts > ends */
        BAD_SELECT(a.starts = s2; a.ends = e2, LTK_EINVAL, "row 1");
    }
    {
        int32_t s2[SR] = {0, 0, -2}, e2[SR] = {8, 5, 8};
        BAD_SELECT(a.starts = s2; a.ends = e2, LTK_EINVAL, "row 2");
    }
    {
        int32_t s2[SR] = {0, 0, 0}, e2[SR] = {SC + 1, 5, 8};
        BAD_SELECT(a.starts = s2; a.ends = e2, LTK_EINVAL, "row 0");
    }
    BAD_SELECT(e.backend = (ltk_backend)-2, LTK_EINVAL, "backend");
    BAD_SELECT(e.algo = (ltk_algo)3, LTK_EINVAL, "algo");
    BAD_SELECT(e.num_threads = -1, LTK_EINVAL, "num_threads");
    BAD_SELECT(e.workspace_bytes = 64, LTK_EINVAL, "workspace_bytes");
    {
        ltk_select_args a = good;
        a.cols = 0;
        a.scores = NULL;
        a.starts = a.ends = NULL;
        ASSERT_STATUS(ltk_select_topk(&a, &ex), LTK_OK, NULL);
        for (int i = 0; i < SR * SK; i++) ASSERT_EQ_INT(idx[i], -1);
        memset(idx, POISON, sizeof(int32_t) * SR * SK);
        memset(sc, POISON, sizeof(float) * SR * SK);
        ltk_select_args z = {.rows = 0, .cols = 100, .k = 65536, .dtype = LTK_DTYPE_BF16};
        ASSERT_STATUS(ltk_select_topk(&z, &ex), LTK_OK, NULL);
        ASSERT_TRUE(outs_untouched(&o));
    }
    outs_free(&o);
}

static void test_select_validation(void) {
    select_validation_on(LTK_BACKEND_REF);
    if (T_FAILURES()) return;
    select_validation_on(LTK_BACKEND_CPU);
}

/* ---- workspace ---------------------------------------------------------------------------- */
/* A workspace of exactly the queried size works and gives the convenience path's result, with no
 * write outside it; one byte less is LTK_EWORKSPACE (when the backend needs any workspace). */
static void workspace_on(ltk_backend be) {
    enum { R = 4, C = 3000, K = 40 };
    float *scores = malloc(sizeof(float) * R * C);
    for (int i = 0; i < R * C; i++) scores[i] = (float)rng_normal();
    int32_t *idx0 = malloc(sizeof(int32_t) * R * K);
    outs o = {0};
    int32_t *idx = out_new(&o, sizeof(int32_t) * R * K);
    ltk_select_args a = {.rows = R, .cols = C, .k = K, .dtype = LTK_DTYPE_F32, .scores = scores, .out_idx = idx0};
    ltk_exec e = {.backend = be};
    test_ctx("backend %s, select workspace", ltk_backend_name(be));
    ltk_status st = ltk_select_topk(&a, &e);
    size_t need = 12345;
    if (CHECK(st == LTK_OK, "convenience path: %s", ltk_last_error()) &&
        CHECK(ltk_select_workspace_size(&a, &e, &need) == LTK_OK, "size query: %s", ltk_last_error())) {
        uint8_t *ws = t_guarded_alloc(need ? need : 1, 0);
        memset(ws, 0xff, need ? need : 1); /* dirty workspace: nothing may assume zeroes */
        e.workspace = ws;
        e.workspace_bytes = need;
        a.out_idx = idx;
        st = ltk_select_topk(&a, &e);
        CHECK(st == LTK_OK, "exact-size workspace (%zu bytes): %s", need, ltk_last_error());
        CHECK(memcmp(idx, idx0, sizeof(int32_t) * R * K) == 0, "workspace path differs from convenience path");
        CHECK(t_guarded_ok(ws), "write outside the %zu-byte workspace", need);
        if (need > 0) {
            memset(idx, POISON, sizeof(int32_t) * R * K);
            e.workspace_bytes = need - 1;
            st = ltk_select_topk(&a, &e);
            CHECK(st == LTK_EWORKSPACE, "workspace of need-1 bytes: got %s", ltk_status_str(st));
            CHECK(strstr(ltk_last_error(), "workspace") != NULL, "message \"%s\"", ltk_last_error());
            CHECK(outs_untouched(&o), "outputs written on LTK_EWORKSPACE");
        } else {
            printf("    note: %s select needs no workspace; EWORKSPACE not exercised\n", ltk_backend_name(be));
        }
        t_guarded_free(ws);
    }
    outs_free(&o);
    free(scores);
    free(idx0);
}

static void test_workspace(void) {
    workspace_on(LTK_BACKEND_REF);
    workspace_on(LTK_BACKEND_CPU);
    /* Indexer and kNN: the exact queried size is accepted, one byte less refused. */
    static const ltk_backend bes[] = {LTK_BACKEND_REF, LTK_BACKEND_CPU};
    for (size_t b = 0; b < 2; b++) {
        ifix f;
        ifix_init(&f);
        ltk_exec e = {.backend = bes[b]};
        size_t need = 0;
        test_ctx("backend %s, indexer workspace", ltk_backend_name(bes[b]));
        ASSERT_STATUS(ltk_indexer_workspace_size(&f.a, &e, &need), LTK_OK, NULL);
        uint8_t *ws = t_guarded_alloc(need + 1, 0);
        e.workspace = ws;
        e.workspace_bytes = need;
        ASSERT_STATUS(ltk_indexer_topk(&f.a, &e), LTK_OK, NULL);
        ASSERT_TRUE(t_guarded_ok(ws));
        if (need > 0) {
            memset(f.idx, POISON, sizeof(int32_t) * IT * IK);
            memset(f.sc, POISON, sizeof(float) * IT * IK);
            e.workspace_bytes = need - 1;
            ASSERT_STATUS(ltk_indexer_topk(&f.a, &e), LTK_EWORKSPACE, "workspace");
            ASSERT_TRUE(outs_untouched(&f.o));
        }
        t_guarded_free(ws);
        outs_free(&f.o);

        float qv[4] = {1, 2, 3, 4}, base[8] = {1, 0, 0, 1, 2, 2, -1, 3};
        int64_t kidx[2];
        ltk_knn_args ka = {.B = 2, .N = 4, .D = 2, .k = 1, .dtype = LTK_DTYPE_F32, .queries = qv, .base = base,
                           .out_idx = kidx};
        e = (ltk_exec){.backend = bes[b]};
        ASSERT_STATUS(ltk_knn_workspace_size(&ka, &e, &need), LTK_OK, NULL);
        ws = t_guarded_alloc(need + 1, 0);
        e.workspace = ws;
        e.workspace_bytes = need;
        ASSERT_STATUS(ltk_knn_topk(&ka, &e), LTK_OK, NULL);
        ASSERT_TRUE(t_guarded_ok(ws));
        ASSERT_EQ_INT(kidx[0], 2);
        ASSERT_EQ_INT(kidx[1], 2);
        if (need > 0) {
            e.workspace_bytes = need - 1;
            ASSERT_STATUS(ltk_knn_topk(&ka, &e), LTK_EWORKSPACE, "workspace");
        }
        t_guarded_free(ws);
    }
}

/* ---- CUDA requested where there is none --------------------------------------------------- */
static void test_cuda_unavailable(void) {
    if (ltk_backend_available(LTK_BACKEND_CUDA)) {
        printf("    note: a CUDA device is available; LTK_ENOBACKEND cases not applicable\n");
        /* Still: AUTO must resolve to it. */
        if (!getenv("LTK_BACKEND")) ASSERT_EQ_INT(ltk_backend_resolve(LTK_BACKEND_AUTO), LTK_BACKEND_CUDA);
        return;
    }
    ltk_exec e = {.backend = LTK_BACKEND_CUDA};
    ltk_backend be = LTK_BACKEND_CUDA;
    {
        ifix f;
        ifix_init(&f);
        size_t bytes;
        ASSERT_STATUS(ltk_indexer_workspace_size(&f.a, &e, &bytes), LTK_ENOBACKEND, "cuda");
        ASSERT_STATUS(ltk_indexer_topk(&f.a, &e), LTK_ENOBACKEND, "cuda");
        ASSERT_TRUE(outs_untouched(&f.o));
        outs_free(&f.o);
    }
    {
        float qv[2] = {1, 2}, base[2] = {3, 4};
        outs o = {0};
        int64_t *idx = out_new(&o, sizeof(int64_t));
        ltk_knn_args a = {.B = 1, .N = 1, .D = 2, .k = 1, .dtype = LTK_DTYPE_F32, .queries = qv, .base = base,
                          .out_idx = idx};
        ASSERT_STATUS(ltk_knn_topk(&a, &e), LTK_ENOBACKEND, "cuda");
        ASSERT_TRUE(outs_untouched(&o));
        outs_free(&o);
    }
    {
        float s[3] = {1, 2, 3};
        outs o = {0};
        int32_t *idx = out_new(&o, sizeof(int32_t));
        ltk_select_args a = {.rows = 1, .cols = 3, .k = 1, .dtype = LTK_DTYPE_F32, .scores = s, .out_idx = idx};
        size_t bytes;
        ASSERT_STATUS(ltk_select_workspace_size(&a, &e, &bytes), LTK_ENOBACKEND, "cuda");
        ASSERT_STATUS(ltk_select_topk(&a, &e), LTK_ENOBACKEND, "cuda");
        ASSERT_TRUE(outs_untouched(&o));
        outs_free(&o);
    }
    ltk_indexer_state *st = (ltk_indexer_state *)&be; /* must be overwritten with NULL */
    ASSERT_STATUS(ltk_indexer_state_create(LTK_BACKEND_CUDA, 16, &st), LTK_ENOBACKEND, "cuda");
    ASSERT_TRUE(st == NULL);
}

/* ---- adversarial API edges ---------------------------------------------------------------- */
/* A foreign object cast to a state, a freed state, misaligned arrays, and ltk_info after an error:
 * a clear status, never a crash, an out-of-bounds or a misaligned read. */
static void test_api_edges(void) {
    outs o = {0};
    /* a foreign object that looks like nothing we made (its bytes would be a wild keys pointer) */
    uint64_t foreign[8];
    memset(foreign, 0x5a, sizeof foreign);
    ltk_indexer_state *fake = (ltk_indexer_state *)foreign;
    int32_t got[4], n = -1;
    ASSERT_STATUS(ltk_indexer_state_get(fake, got, 4, &n), LTK_EINVAL, "not a live");
    ASSERT_STATUS(ltk_indexer_state_set(fake, got, 0), LTK_EINVAL, "not a live");
    ASSERT_STATUS(ltk_indexer_state_reset(fake), LTK_EINVAL, "not a live");
    ltk_indexer_state_free(fake); /* not ours: left alone */
    float q[8] = {1, 2, 3, 4, 5, 6, 7, 8}, kv[8] = {1, 0, 0, 1, 1, 1, 2, 0}, w[2] = {1, 1};
    int32_t *idx = out_new(&o, sizeof(int32_t) * 2 * 2);
    ltk_indexer_args ia = {.T = 2, .S = 4, .H = 1, .D = 2, .k = 2, .dtype = LTK_DTYPE_F32, .q = q, .kv = kv,
                           .weights = w, .out_idx = idx, .state = fake};
    ltk_exec e = {.backend = LTK_BACKEND_CPU};
    ASSERT_STATUS(ltk_indexer_topk(&ia, &e), LTK_EINVAL, "not a live");
    ASSERT_TRUE(outs_untouched(&o));
    /* a live state is accepted (the tag check lets the real thing through) */
    ltk_indexer_state *st = NULL;
    ASSERT_STATUS(ltk_indexer_state_create(LTK_BACKEND_CPU, 8, &st), LTK_OK, NULL);
    ia.state = st;
    ASSERT_STATUS(ltk_indexer_topk(&ia, &e), LTK_OK, NULL);
    ltk_indexer_state_free(st);
    memset(idx, POISON, sizeof(int32_t) * 4);
    ia.state = NULL;

    /* misaligned arrays: refused before anything is read */
    float *sc = (float *)((char *)q + 1);
    int32_t *sidx = out_new(&o, sizeof(int32_t) * 2);
    ltk_select_args sa = {.rows = 1, .cols = 4, .k = 2, .dtype = LTK_DTYPE_F32, .scores = sc, .out_idx = sidx};
    ASSERT_STATUS(ltk_select_topk(&sa, &e), LTK_EINVAL, "aligned");
    sa.scores = q;
    sa.out_scores = (float *)((char *)got + 2);
    ASSERT_STATUS(ltk_select_topk(&sa, &e), LTK_EINVAL, "aligned");
    ia.weights = (const float *)((const char *)w + 1);
    ASSERT_STATUS(ltk_indexer_topk(&ia, &e), LTK_EINVAL, "aligned");
    ia.weights = w;
    ia.q = (const char *)q + 2;
    ASSERT_STATUS(ltk_indexer_topk(&ia, &e), LTK_EINVAL, "aligned");
    int64_t *kidx = out_new(&o, sizeof(int64_t) * 3);
    ltk_knn_args ka = {.B = 1, .N = 4, .D = 2, .k = 2, .dtype = LTK_DTYPE_F32, .queries = q, .base = kv,
                       .out_idx = (int64_t *)((char *)kidx + 4)};
    ASSERT_STATUS(ltk_knn_topk(&ka, &e), LTK_EINVAL, "aligned");
    ASSERT_TRUE(outs_untouched(&o));
    /* bf16 needs 2-byte alignment only, e4m3 none */
    uint16_t raw[16] = {0};
    ltk_select_args sb = {.rows = 1, .cols = 4, .k = 2, .dtype = LTK_DTYPE_BF16, .scores = raw + 1, .out_idx = got};
    ASSERT_STATUS(ltk_select_topk(&sb, &e), LTK_OK, NULL);

    /* ltk_info leaves no stale message of an earlier failure */
    ASSERT_STATUS(ltk_select_topk(NULL, &e), LTK_EINVAL, NULL);
    ASSERT_TRUE(ltk_last_error()[0] != '\0');
    char buf[4096];
    ASSERT_STATUS(ltk_info(buf, sizeof buf), LTK_OK, NULL);
    ASSERT_TRUE(ltk_last_error()[0] == '\0');
    outs_free(&o);
}

/* ---- hot-set state ------------------------------------------------------------------------ */
static void test_state_api(void) {
    static const ltk_backend bes[] = {LTK_BACKEND_REF, LTK_BACKEND_CPU, LTK_BACKEND_AUTO};
    for (size_t b = 0; b < 3; b++) {
        if (bes[b] == LTK_BACKEND_AUTO && ltk_backend_resolve(LTK_BACKEND_AUTO) == LTK_BACKEND_CUDA) continue;
        test_ctx("state on backend %s", ltk_backend_name(bes[b]));
        ltk_indexer_state *st = NULL;
        ASSERT_STATUS(ltk_indexer_state_create(bes[b], 0, &st), LTK_EINVAL, "sample_size");
        ASSERT_TRUE(st == NULL);
        ASSERT_STATUS(ltk_indexer_state_create(bes[b], -5, &st), LTK_EINVAL, "sample_size");
        ASSERT_STATUS(ltk_indexer_state_create(bes[b], (1 << 20) + 1, &st), LTK_EINVAL, "sample_size");
        ASSERT_STATUS(ltk_indexer_state_create(bes[b], 4, NULL), LTK_EINVAL, "out");
        ASSERT_STATUS(ltk_indexer_state_create((ltk_backend)9, 4, &st), LTK_EINVAL, "backend");
        ASSERT_TRUE(st == NULL);
        ltk_indexer_state *big = NULL;
        ASSERT_STATUS(ltk_indexer_state_create(bes[b], 1 << 20, &big), LTK_OK, NULL);
        ASSERT_TRUE(big != NULL);
        ltk_indexer_state_free(big);
        ASSERT_STATUS(ltk_indexer_state_create(bes[b], 4, &st), LTK_OK, NULL);
        ASSERT_TRUE(st != NULL);

        int32_t got[16], count = -1;
        for (int i = 0; i < 16; i++) got[i] = POISON;
        /* Fresh state: cold (empty). */
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 16, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 0);
        ASSERT_EQ_INT(got[0], POISON);
        /* Duplicates and negatives dropped (first occurrence kept, order kept). */
        const int32_t in1[] = {5, 3, 5, -1, 7, 3, INT32_MIN};
        ASSERT_STATUS(ltk_indexer_state_set(st, in1, 7), LTK_OK, NULL);
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 16, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 3);
        ASSERT_EQ_INT(got[0], 5);
        ASSERT_EQ_INT(got[1], 3);
        ASSERT_EQ_INT(got[2], 7);
        ASSERT_EQ_INT(got[3], POISON);
        /* Capacity: at most sample_size keys, the first ones given. */
        const int32_t in2[] = {9, 9, 8, 1, 2, 3, 4, 5};
        ASSERT_STATUS(ltk_indexer_state_set(st, in2, 8), LTK_OK, NULL);
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 16, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 4);
        ASSERT_EQ_INT(got[0], 9);
        ASSERT_EQ_INT(got[1], 8);
        ASSERT_EQ_INT(got[2], 1);
        ASSERT_EQ_INT(got[3], 2);
        /* cap < count: copies cap keys, reports the number held, writes nothing past cap. */
        int32_t small[3] = {POISON, POISON, POISON};
        ASSERT_STATUS(ltk_indexer_state_get(st, small, 2, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 4);
        ASSERT_EQ_INT(small[0], 9);
        ASSERT_EQ_INT(small[1], 8);
        ASSERT_EQ_INT(small[2], POISON);
        ASSERT_STATUS(ltk_indexer_state_get(st, NULL, 0, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 4);
        /* Argument errors. */
        ASSERT_STATUS(ltk_indexer_state_get(st, NULL, 2, &count), LTK_EINVAL, "idx");
        ASSERT_STATUS(ltk_indexer_state_get(st, got, -1, &count), LTK_EINVAL, "cap");
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 2, NULL), LTK_EINVAL, "count");
        ASSERT_STATUS(ltk_indexer_state_get(NULL, got, 2, &count), LTK_EINVAL, "state");
        ASSERT_STATUS(ltk_indexer_state_set(st, NULL, 3), LTK_EINVAL, "idx");
        ASSERT_STATUS(ltk_indexer_state_set(st, in1, -1), LTK_EINVAL, "count");
        ASSERT_STATUS(ltk_indexer_state_set(NULL, in1, 1), LTK_EINVAL, "state");
        ASSERT_STATUS(ltk_indexer_state_reset(NULL), LTK_EINVAL, "state");
        /* ... which leave the state as it was. */
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 16, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 4);
        ASSERT_EQ_INT(got[0], 9);
        /* Only negatives: empty. Reset: cold again. Set with NULL, 0: empty. */
        const int32_t neg[] = {-1, -2, -3};
        ASSERT_STATUS(ltk_indexer_state_set(st, neg, 3), LTK_OK, NULL);
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 16, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 0);
        ASSERT_STATUS(ltk_indexer_state_set(st, in1, 3), LTK_OK, NULL);
        ASSERT_STATUS(ltk_indexer_state_reset(st), LTK_OK, NULL);
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 16, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 0);
        ASSERT_STATUS(ltk_indexer_state_set(st, in1, 3), LTK_OK, NULL);
        ASSERT_STATUS(ltk_indexer_state_set(st, NULL, 0), LTK_OK, NULL);
        ASSERT_STATUS(ltk_indexer_state_get(st, got, 16, &count), LTK_OK, NULL);
        ASSERT_EQ_INT(count, 0);
        ltk_indexer_state_free(st);
    }
    ltk_indexer_state_free(NULL); /* no-op */
}

/* A state belongs to one backend; a call on another refuses it. After a call the state holds the
 * most-voted keys of the call's output. */
static void test_state_backend_mismatch(void) {
    ifix f;
    ifix_init(&f);
    ltk_indexer_state *st_ref = NULL, *st_cpu = NULL;
    ASSERT_STATUS(ltk_indexer_state_create(LTK_BACKEND_REF, 8, &st_ref), LTK_OK, NULL);
    ASSERT_STATUS(ltk_indexer_state_create(LTK_BACKEND_CPU, 8, &st_cpu), LTK_OK, NULL);
    ltk_exec e_cpu = {.backend = LTK_BACKEND_CPU}, e_ref = {.backend = LTK_BACKEND_REF};
    ltk_indexer_args a = f.a;
    a.state = st_ref;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e_cpu), LTK_EINVAL, "state");
    ASSERT_TRUE(outs_untouched(&f.o));
    a.state = st_cpu;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e_ref), LTK_EINVAL, "state");
    ASSERT_TRUE(outs_untouched(&f.o));
    int32_t got[8], count = -1;
    ASSERT_STATUS(ltk_indexer_state_get(st_cpu, got, 8, &count), LTK_OK, NULL);
    ASSERT_EQ_INT(count, 0); /* the refused call left it alone */
    /* Matching backends work and vote: row 0 sees [0,5), row 1 [1,4) (relative output). */
    a.state = st_cpu;
    ASSERT_STATUS(ltk_indexer_topk(&a, &e_cpu), LTK_OK, NULL);
    ASSERT_STATUS(ltk_indexer_state_get(st_cpu, got, 8, &count), LTK_OK, NULL);
    int votes[IS] = {0};
    for (int t = 0; t < IT; t++)
        for (int j = 0; j < IK; j++)
            if (f.idx[t * IK + j] >= 0) votes[f.idx[t * IK + j] + f.ks[t]]++;
    int distinct = 0;
    for (int s = 0; s < IS; s++) distinct += votes[s] > 0;
    ASSERT_EQ_INT(count, distinct);
    for (int i = 0; i < count; i++) {
        ASSERT_TRUE(got[i] >= 0 && got[i] < IS && votes[got[i]] > 0);
        if (i > 0) ASSERT_TRUE(votes[got[i - 1]] > votes[got[i]] || (votes[got[i - 1]] == votes[got[i]] && got[i - 1] > got[i]));
    }
    ltk_indexer_state_free(st_ref);
    ltk_indexer_state_free(st_cpu);
    outs_free(&f.o);
}

/* ---- prefill driver arguments ------------------------------------------------------------- */
static void test_prefill_validation(void) {
    float q[8] = {1, 2, 3, 4, 5, 6, 7, 8}, kv[8] = {1, 0, 0, 1, 1, 1, 2, 0}, w[4] = {1, 1, 1, 1};
    outs o = {0};
    int32_t *idx = out_new(&o, sizeof(int32_t) * 4 * 2);
    float *sc = out_new(&o, sizeof(float) * 4 * 2);
    ltk_prefill_args good = {.L = 4, .m = 1, .H = 1, .D = 2, .k = 2, .dtype = LTK_DTYPE_F32, .q = q, .kv = kv,
                             .weights = w, .out_idx = idx, .out_scores = sc};
    ltk_exec e = {.backend = LTK_BACKEND_CPU};
    ASSERT_STATUS(ltk_prefill_run(NULL, &e), LTK_EINVAL, "args");
#define BAD_PREFILL(mutation, msg)                                        \
    do {                                                                  \
        ltk_prefill_args a = good;                                        \
        mutation;                                                         \
        test_ctx("prefill: %s", #mutation);                               \
        ASSERT_STATUS(ltk_prefill_run(&a, &e), LTK_EINVAL, msg);          \
        ASSERT_TRUE(outs_untouched(&o));                                  \
        size_t b_ = 0; /* one validation for the size query and the run */ \
        ASSERT_STATUS(ltk_prefill_workspace_size(&a, &e, &b_), LTK_EINVAL, msg); \
    } while (0)
    BAD_PREFILL(a.L = -1, "L=-1");
    BAD_PREFILL(a.m = 0, "m=0");
    BAD_PREFILL(a.k = 0, "k=0");
    BAD_PREFILL(a.k = 8193, "k=8193");
    BAD_PREFILL(a.chunk = -1, "chunk");
    BAD_PREFILL(a.sample_size = -1, "sample_size");
    BAD_PREFILL(a.flags = LTK_FLAG_ABSOLUTE, "flags");
    BAD_PREFILL(a.out_idx = NULL, "out_scores");
    BAD_PREFILL(a.out_idx = NULL; a.out_scores = NULL, "callback");
    BAD_PREFILL(a.q = NULL, "q and weights");
    BAD_PREFILL(a.weights = NULL, "q and weights");
    BAD_PREFILL(a.kv = NULL, "kv is NULL");
    BAD_PREFILL(a.out_stride = 1, "out_stride=1");
    BAD_PREFILL(a.H = 0, "H=0");
    BAD_PREFILL(a.D = LTK_INDEXER_MAX_D + 1, "D=257");
    BAD_PREFILL(a.dtype = LTK_DTYPE_F16, "dtype");
    BAD_PREFILL(a.q_stride_t = 1, "q_stride_t");
    BAD_PREFILL(a.weights = (const float *)((const char *)w + 2), "aligned");
#undef BAD_PREFILL
    ltk_prefill_args a = good;
    ASSERT_STATUS(ltk_prefill_run(&a, &e), LTK_OK, NULL);
    /* Causal, absolute: token t sees keys [0, t]. */
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 2; j++) {
            int32_t v = idx[t * 2 + j];
            ASSERT_TRUE(j <= t ? (v >= 0 && v <= t) : v == -1);
        }
    outs_free(&o);
}

int main(int argc, char **argv) {
    static const t_test tests[] = {
        T_ENTRY(test_status_codes),         T_ENTRY(test_last_error),
        T_ENTRY(test_backend_queries),      T_ENTRY(test_info),
        T_ENTRY(test_indexer_validation),   T_ENTRY(test_knn_validation),
        T_ENTRY(test_select_validation),    T_ENTRY(test_workspace),
        T_ENTRY(test_cuda_unavailable),     T_ENTRY(test_state_api),
        T_ENTRY(test_state_backend_mismatch), T_ENTRY(test_prefill_validation), T_ENTRY(test_api_edges),
    };
    return T_RUN_ALL(tests);
}
