/* A framework-free C11 test harness for the litetopk ctest binaries (one translation unit each).
 *
 *   ASSERT_*(...)   record a failure with the expression and both values, then `return;` from the
 *                   current (void) function: use them in test functions.
 *   CHECK(cond, fmt, ...)  records a failure with a formatted message and evaluates to 0 (1 when
 *                   the condition holds); never returns: use it in helpers that report and go on.
 *   test_ctx(fmt, ...)     a line describing the case being run, printed with every failure.
 *   rng_*()         a seeded splitmix64 generator. The run seed comes from env LTK_TEST_SEED
 *                   (decimal or 0x hex) or, by default, from the clock, so every run draws fresh
 *                   inputs; it is printed first and again after a failure. Each test reseeds from
 *                   (run seed, test name), so `LTK_TEST_SEED=<seed> ./test-x <name>` replays one test.
 *   rng_stream_*()  the same generator on a state the caller keeps: independent streams for data
 *                   made in parallel (one stream per block, so the data do not depend on the number
 *                   of threads).
 *   t_guarded_*()   heap blocks with canary bytes before and after (ggml-style guard regions).
 *   dec_*()         the float64 decoders of tests/decode.h (included here), checked on every code
 *                   against the ref backend by test-ref; t_e4m3_f32() ... the same values as float.
 *   t_f32_e4m3() ... the encoders: nearest code (ties to even for f16/bf16, to the lower code for
 *                   e4m3, which saturates at 448); test-harness round-trips every code.
 *   T_RUN_ALL(table)        runs the tests in this process.
 *   T_RUN_ISOLATED(table, limit_s, skip)  runs each test in its own child process with a time limit
 *                   (LTK_TEST_TIMEOUT_S overrides limit_s; 0 runs in-process): a hung test is killed
 *                   and reported "[ TIME ]", a crash "[ CRASH]", any other exit status "[ ERROR]",
 *                   each counted as a failure, and the next test starts fresh (a GPU test gets a new
 *                   CUDA context). skip() (or NULL) is asked where tests run (the child, or this
 *                   process when in-process), never by the runner: when it is true (it prints why)
 *                   every test is skipped and the binary exits 77.
 *
 * Every binary ends with one line "N passed, N failed" (tests, not assertions) and exits non-zero
 * when a test failed, 77 when every test was skipped. An optional argument runs only the tests whose
 * name contains it.
 */
#ifndef LTK_TEST_HARNESS_H
#define LTK_TEST_HARNESS_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode.h"

#if defined(__GNUC__)
#define T_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define T_UNUSED __attribute__((unused))
#else
#define T_PRINTF(a, b)
#define T_UNUSED
#endif

typedef struct {
    const char *name;
    void (*fn)(void);
} t_test;

static uint64_t t_seed;
static uint64_t t_rng;
static int t_failures;        /* failures recorded in the current test */
static int t_printed;         /* failure messages printed in the current test */
static char t_ctx_buf[768];
enum { T_MAX_PRINTED = 25 };

/* ---- failure reporting -------------------------------------------------------------------- */
T_UNUSED T_PRINTF(1, 2) static void test_ctx(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_ctx_buf, sizeof t_ctx_buf, fmt, ap);
    va_end(ap);
}

static void t_vfailf(const char *file, int line, const char *fmt, va_list ap) {
    t_failures++;
    if (++t_printed > T_MAX_PRINTED) {
        if (t_printed == T_MAX_PRINTED + 1) fprintf(stderr, "    (further failures of this test not printed)\n");
        return;
    }
    fprintf(stderr, "    FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    if (t_ctx_buf[0]) fprintf(stderr, "         case: %s\n", t_ctx_buf);
}

T_UNUSED T_PRINTF(3, 4) static void t_failf(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    t_vfailf(file, line, fmt, ap);
    va_end(ap);
}

/* CHECK's body: a call, so that a CHECK used as a statement is no unused value. */
T_UNUSED T_PRINTF(4, 5) static int t_check(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) return 1;
    va_list ap;
    va_start(ap, fmt);
    t_vfailf(file, line, fmt, ap);
    va_end(ap);
    return 0;
}

/* Failures recorded so far in this test (to stop a loop after its first bad row). */
#define T_FAILURES() (t_failures)

#define CHECK(cond, ...) t_check((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

#define ASSERT_TRUE(c)                                                    \
    do {                                                                  \
        if (!(c)) {                                                       \
            t_failf(__FILE__, __LINE__, "ASSERT_TRUE(%s) failed", #c);    \
            return;                                                       \
        }                                                                 \
    } while (0)

#define ASSERT_EQ_INT(a, b)                                                                              \
    do {                                                                                                 \
        long long t_a_ = (long long)(a), t_b_ = (long long)(b);                                          \
        if (t_a_ != t_b_) {                                                                              \
            t_failf(__FILE__, __LINE__, "ASSERT_EQ_INT(%s, %s) failed: %lld != %lld", #a, #b, t_a_, t_b_); \
            return;                                                                                      \
        }                                                                                                \
    } while (0)

#define ASSERT_NE_INT(a, b)                                                                              \
    do {                                                                                                 \
        long long t_a_ = (long long)(a), t_b_ = (long long)(b);                                          \
        if (t_a_ == t_b_) {                                                                              \
            t_failf(__FILE__, __LINE__, "ASSERT_NE_INT(%s, %s) failed: both %lld", #a, #b, t_a_);        \
            return;                                                                                      \
        }                                                                                                \
    } while (0)

#define ASSERT_LE_INT(a, b)                                                                              \
    do {                                                                                                 \
        long long t_a_ = (long long)(a), t_b_ = (long long)(b);                                          \
        if (!(t_a_ <= t_b_)) {                                                                           \
            t_failf(__FILE__, __LINE__, "ASSERT_LE_INT(%s, %s) failed: %lld > %lld", #a, #b, t_a_, t_b_); \
            return;                                                                                      \
        }                                                                                                \
    } while (0)

#define ASSERT_EQ_STR(a, b)                                                                              \
    do {                                                                                                 \
        const char *t_a_ = (a), *t_b_ = (b);                                                             \
        if (t_a_ == NULL || t_b_ == NULL || strcmp(t_a_, t_b_) != 0) {                                   \
            t_failf(__FILE__, __LINE__, "ASSERT_EQ_STR(%s, %s) failed: \"%s\" != \"%s\"", #a, #b,        \
                    t_a_ ? t_a_ : "(null)", t_b_ ? t_b_ : "(null)");                                     \
            return;                                                                                      \
        }                                                                                                \
    } while (0)

#define ASSERT_STR_CONTAINS(hay, needle)                                                                 \
    do {                                                                                                 \
        const char *t_h_ = (hay), *t_n_ = (needle);                                                      \
        if (t_h_ == NULL || strstr(t_h_, t_n_) == NULL) {                                                \
            t_failf(__FILE__, __LINE__, "ASSERT_STR_CONTAINS(%s, %s) failed: \"%s\" lacks \"%s\"", #hay, \
                    #needle, t_h_ ? t_h_ : "(null)", t_n_);                                              \
            return;                                                                                      \
        }                                                                                                \
    } while (0)

/* Float equality by bits (NaN == NaN of any payload; -0 and +0 differ). */
static inline uint32_t t_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static inline float t_bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static inline int t_same_f32(float a, float b) { return (isnan(a) && isnan(b)) || t_f32_bits(a) == t_f32_bits(b); }

#define ASSERT_SAME_F32(a, b)                                                                            \
    do {                                                                                                 \
        float t_a_ = (a), t_b_ = (b);                                                                    \
        if (!t_same_f32(t_a_, t_b_)) {                                                                   \
            t_failf(__FILE__, __LINE__, "ASSERT_SAME_F32(%s, %s) failed: %.9g (0x%08x) != %.9g (0x%08x)", \
                    #a, #b, t_a_, t_f32_bits(t_a_), t_b_, t_f32_bits(t_b_));                             \
            return;                                                                                      \
        }                                                                                                \
    } while (0)

/* 1 if `needle` occurs in `hay` as a word: not glued to an identifier character on a side where
 * the needle itself begins or ends with one ("k=0" matches "k=0 out of", "q" does not match "required"). */
static inline int t_is_ident(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }
T_UNUSED static int t_has_word(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    if (n == 0) return 1;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) {
        int left_ok = p == hay || !t_is_ident(needle[0]) || !t_is_ident(p[-1]);
        int right_ok = !t_is_ident(needle[n - 1]) || !t_is_ident(p[n]);
        if (left_ok && right_ok) return 1;
    }
    return 0;
}

/* Status check: `expr` must return `want`; ltk_last_error() must contain `msg` as a word (pass
 * NULL to skip the message check). Uses the library's own ltk_status_str/ltk_last_error. */
#define ASSERT_STATUS(expr, want, msg)                                                                   \
    do {                                                                                                 \
        ltk_status t_s_ = (expr);                                                                        \
        const char *t_m_ = (msg);                                                                        \
        if (t_s_ != (want)) {                                                                            \
            t_failf(__FILE__, __LINE__, "ASSERT_STATUS(%s) failed: got %d (%s), want %d (%s); last error \"%s\"", \
                    #expr, (int)t_s_, ltk_status_str(t_s_), (int)(want), ltk_status_str(want), ltk_last_error()); \
            return;                                                                                      \
        }                                                                                                \
        if (t_m_ != NULL && !t_has_word(ltk_last_error(), t_m_)) {                                    \
            t_failf(__FILE__, __LINE__, "ASSERT_STATUS(%s): last error \"%s\" does not name \"%s\"", #expr, \
                    ltk_last_error(), t_m_);                                                             \
            return;                                                                                      \
        }                                                                                                \
    } while (0)

/* ---- random numbers ----------------------------------------------------------------------- */
static inline uint64_t t_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* A stream: any 64-bit state (t_mix64 of a seed and a block number gives independent ones). */
static inline uint64_t rng_stream_u64(uint64_t *st) {
    *st += 0x9e3779b97f4a7c15ull;
    return t_mix64(*st);
}
/* Uniform in [0, 1). */
static inline double rng_stream_unit(uint64_t *st) {
    return (double)(rng_stream_u64(st) >> 11) * (1.0 / 9007199254740992.0);
}
/* Standard normal (Box-Muller, a pair of draws each). */
static inline double rng_stream_normal(uint64_t *st) {
    double u = rng_stream_unit(st), v = rng_stream_unit(st);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* The current test's stream (t_reseed'ed before every test). */
T_UNUSED static uint64_t rng_u64(void) { return rng_stream_u64(&t_rng); }
T_UNUSED static uint32_t rng_u32(void) { return (uint32_t)(rng_u64() >> 32); }
/* Uniform in [0, n) (n > 0). */
T_UNUSED static int64_t rng_below(int64_t n) { return (int64_t)(rng_u64() % (uint64_t)n); }
/* Uniform integer in [lo, hi]. */
T_UNUSED static int64_t rng_range(int64_t lo, int64_t hi) { return lo + rng_below(hi - lo + 1); }
/* Uniform in [0, 1). */
T_UNUSED static double rng_unit(void) { return rng_stream_unit(&t_rng); }
T_UNUSED static double rng_normal(void) { return rng_stream_normal(&t_rng); }
T_UNUSED static void t_reseed(const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    t_rng = t_mix64(t_seed ^ h);
}

/* ---- guarded heap blocks ------------------------------------------------------------------ */
enum { T_GUARD = 64, T_HEAD = 64 };
static inline uint8_t t_guard_byte(size_t i) { return (uint8_t)(0xA5u + 37u * (unsigned)i); }

/* `bytes` usable bytes, starting `misalign` bytes after a 64-byte boundary (to catch code that
 * assumes aligned outputs), with T_GUARD canary bytes on both sides. */
T_UNUSED static void *t_guarded_alloc(size_t bytes, size_t misalign) {
    size_t total = T_HEAD + misalign + 2 * T_GUARD + bytes;
    uint8_t *base = NULL;
    if (posix_memalign((void **)&base, 64, (total + 63) & ~(size_t)63) != 0) return NULL;
    uint8_t *data = base + T_HEAD + T_GUARD + misalign;
    size_t hdr[2] = {bytes, misalign};
    memcpy(data - T_GUARD - sizeof hdr, hdr, sizeof hdr); /* just before the front guard */
    for (size_t i = 0; i < T_GUARD; i++) {
        data[-1 - (ptrdiff_t)i] = t_guard_byte(i);
        data[bytes + i] = t_guard_byte(i + 1000);
    }
    return data;
}
static inline uint8_t *t_guarded_base(void *p, size_t *bytes, size_t *misalign) {
    uint8_t *data = p;
    size_t hdr[2];
    memcpy(hdr, data - T_GUARD - sizeof hdr, sizeof hdr);
    *bytes = hdr[0];
    *misalign = hdr[1];
    return data - T_GUARD - hdr[1] - T_HEAD;
}
/* 1 if both canary regions are intact. */
T_UNUSED static int t_guarded_ok(const void *p) {
    if (!p) return 1;
    size_t bytes, mis;
    t_guarded_base((void *)p, &bytes, &mis);
    const uint8_t *data = p;
    for (size_t i = 0; i < T_GUARD; i++)
        if (data[-1 - (ptrdiff_t)i] != t_guard_byte(i) || data[bytes + i] != t_guard_byte(i + 1000)) return 0;
    return 1;
}
T_UNUSED static size_t t_guarded_size(const void *p) {
    size_t bytes, mis;
    t_guarded_base((void *)p, &bytes, &mis);
    return bytes;
}
T_UNUSED static void t_guarded_free(void *p) {
    if (!p) return;
    size_t bytes, mis;
    free(t_guarded_base(p, &bytes, &mis));
}

/* ---- dtypes ------------------------------------------------------------------------------- */
/* The decoders are decode.h's (every value of these formats is a float: the casts are exact; NaN
 * payloads are not kept, and no test tells NaNs apart). f16 and bf16 through tables of every code,
 * filled by the runner before the first test: the GPU oracles decode in their innermost loops, where
 * an ldexp a value (decode.h's way) costs a kNN run minutes. */
static float t_f16_tab[65536], t_bf16_tab[65536];
static int t_tabs_ready;
static void t_fill_tabs(void) {
    for (uint32_t c = 0; c < 65536; c++) {
        t_f16_tab[c] = (float)dec_f16((uint16_t)c);
        t_bf16_tab[c] = (float)dec_bf16((uint16_t)c);
    }
    t_tabs_ready = 1;
}
static inline float t_e4m3_f32(uint8_t v) { return (float)dec_e4m3(v); }
static inline float t_bf16_f32(uint16_t v) {
    if (!t_tabs_ready) t_fill_tabs();
    return t_bf16_tab[v];
}
static inline float t_f16_f32(uint16_t h) {
    if (!t_tabs_ready) t_fill_tabs();
    return t_f16_tab[h];
}
/* Nearest e4m3fn code (OCP FP8: bias 7, no inf, S.1111.111 NaN), ties to the lower magnitude,
 * saturating at 448 (inf included); NaN -> 0x7f; -0 -> 0x80. Positive codes 0x00..0x7e are
 * increasing. */
T_UNUSED static uint8_t t_f32_e4m3(float x) {
    if (x != x) return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    float a = fabsf(x);
    int lo = 0, hi = 0x7e;
    if (a >= 448.0f) return (uint8_t)(sign | 0x7e);
    while (lo < hi) { /* first code with value >= a */
        int mid = (lo + hi) >> 1;
        if (t_e4m3_f32((uint8_t)mid) < a) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && a - t_e4m3_f32((uint8_t)(lo - 1)) <= t_e4m3_f32((uint8_t)lo) - a) lo--;
    return (uint8_t)(sign | lo);
}
/* Round to nearest even; NaN stays a quiet NaN. */
T_UNUSED static uint16_t t_f32_bf16(float x) {
    uint32_t u = t_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
/* Round to nearest even, overflow to inf, NaN stays NaN. */
T_UNUSED static uint16_t t_f32_f16(float x) {
    uint32_t u = t_f32_bits(x), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* subnormal or zero: x / 2^-24, rounded */
        float m = t_bits_f32(a) * 16777216.0f;
        return (uint16_t)(sign | (uint32_t)lrintf(m));
    }
    uint32_t e = ((a >> 23) - 112u) << 10, man = (a >> 13) & 0x3ffu, rest = a & 0x1fffu;
    uint32_t h = e | man;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

/* ---- runner ------------------------------------------------------------------------------- */
static double t_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void t_init_seed(void) {
    const char *env = getenv("LTK_TEST_SEED");
    if (env && *env) t_seed = strtoull(env, NULL, 0);
    else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        t_seed = t_mix64((uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)clock() << 32));
    }
}

/* Runs the tests whose name contains argv[1] (or equals it, in an isolated child). */
T_UNUSED static int t_main(int argc, char **argv, const t_test *tests, size_t n) {
    t_init_seed();
    t_fill_tabs(); /* here, before any test can decode from threads of its own */
    const char *filter = argc > 1 ? argv[1] : NULL;
    const char *child = getenv("LTK_TEST_CHILD");
    const int exact = child && *child;
    if (!exact || !strcmp(child, "1"))
        printf("seed 0x%016" PRIx64 " (reproduce with LTK_TEST_SEED=0x%016" PRIx64 ")\n", t_seed, t_seed);
    fflush(stdout);
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (filter && (exact ? strcmp(tests[i].name, filter) != 0 : !strstr(tests[i].name, filter))) continue;
        t_failures = 0;
        t_printed = 0;
        t_ctx_buf[0] = '\0';
        t_reseed(tests[i].name);
        printf("[ RUN  ] %s\n", tests[i].name);
        fflush(stdout);
        double t0 = t_now();
        tests[i].fn();
        double ms = 1e3 * (t_now() - t0);
        fflush(stderr);
        if (t_failures == 0) {
            passed++;
            printf("[   OK ] %s (%.0f ms)\n", tests[i].name, ms);
        } else {
            failed++;
            printf("[ FAIL ] %s (%d failures, %.0f ms)\n", tests[i].name, t_failures, ms);
        }
        fflush(stdout);
    }
    if (exact) return failed != 0; /* the parent prints the totals */
    if (failed) printf("seed was 0x%016" PRIx64 "\n", t_seed);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}

#if defined(__unix__) || defined(__APPLE__)
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

extern char **environ;

/* The isolated runner: every test a child process (this binary re-executed with the test's name and
 * LTK_TEST_CHILD set) under a time limit. The runner itself runs neither a test nor skip(), so it
 * never initialises CUDA; all children share its seed, so the inputs are those of a one-process
 * run. */
T_UNUSED static int t_main_isolated(int argc, char **argv, const t_test *tests, size_t n, double limit_s,
                                    int (*skip)(void)) {
    setvbuf(stdout, NULL, _IONBF, 0); /* a killed child keeps everything it printed */
    setvbuf(stderr, NULL, _IONBF, 0);
    const char *child = getenv("LTK_TEST_CHILD");
    const char *lim = getenv("LTK_TEST_TIMEOUT_S");
    const double limit = lim && *lim ? atof(lim) : limit_s;
    if ((child && *child) || !(limit > 0)) {
        if (skip && skip()) {
            if (!(child && *child)) printf("0 passed, 0 failed\n");
            return 77;
        }
        return t_main(argc, argv, tests, n);
    }
    t_init_seed();
    char seed_var[48], child_var[24] = "LTK_TEST_CHILD=1";
    snprintf(seed_var, sizeof seed_var, "LTK_TEST_SEED=0x%016" PRIx64, t_seed);
    printf("isolated tests (one process each, limit %.0f s; LTK_TEST_TIMEOUT_S), seed %s\n", limit, seed_var + 14);
    /* The children's environment and arguments, made before any fork: between fork and exec a child
     * of a threaded process may only make async-signal-safe calls (no setenv, no malloc). */
    size_t ne = 0;
    for (char **e = environ; *e; e++) ne++;
    char **envp = (char **)malloc((ne + 3) * sizeof *envp);
    if (!envp) return 2;
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LTK_TEST_SEED=", 14) != 0 && strncmp(*e, "LTK_TEST_CHILD=", 15) != 0) envp[k++] = *e;
    envp[k++] = seed_var;
    envp[k++] = child_var;
    envp[k] = NULL;
    const pid_t runner = getpid();
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0, skipped = 0;
    char failed_names[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        char *args[3] = {argv[0], (char *)tests[i].name, NULL};
        double t0 = t_now();
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            free(envp);
            return 2;
        }
        if (pid == 0) {
#ifdef __linux__
            /* a runner killed from outside (ctest's timeout, timeout(1)) takes its test with it */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != runner) _exit(2);
#endif
            execve("/proc/self/exe", args, envp);
            static const char msg[] = "harness: execve /proc/self/exe failed\n";
            ssize_t w = write(2, msg, sizeof msg - 1);
            (void)w;
            _exit(2);
        }
        child_var[15] = '2'; /* "1" for the first child only: where a once-a-run banner goes */
        int status = 0, done = 0;
        long nap_us = 1000; /* polls from 1 ms up to 20 ms: a short test costs no 20 ms wait */
        while (!done) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) {
                done = 1;
                break;
            }
            if (r < 0 && errno != EINTR) {
                perror("waitpid");
                free(envp);
                return 2;
            }
            if (t_now() - t0 > limit) {
                kill(pid, SIGKILL);
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
                }
                printf("[ TIME ] %s: killed after %.0f s (LTK_TEST_TIMEOUT_S=%.0f); the next test starts fresh\n",
                       tests[i].name, t_now() - t0, limit);
                failed++;
                snprintf(failed_names + strlen(failed_names), sizeof failed_names - strlen(failed_names), " %s(time)",
                         tests[i].name);
                break;
            }
            struct timespec nap = {0, nap_us * 1000};
            nanosleep(&nap, NULL);
            nap_us = nap_us * 2 > 20000 ? 20000 : nap_us * 2;
        }
        if (!done) continue;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
            skipped++;
            if (passed + failed == 0) break; /* skip() is the same in every child: it holds for all */
            continue;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            passed++;
        } else {
            failed++;
            if (WIFSIGNALED(status)) printf("[ CRASH] %s: signal %d\n", tests[i].name, WTERMSIG(status));
            else if (WEXITSTATUS(status) != 1) printf("[ ERROR] %s: exit status %d\n", tests[i].name, WEXITSTATUS(status));
            snprintf(failed_names + strlen(failed_names), sizeof failed_names - strlen(failed_names), " %s",
                     tests[i].name);
        }
    }
    free(envp);
    if (passed + failed == 0 && skipped > 0) {
        printf("0 passed, 0 failed\n");
        return 77;
    }
    if (failed) printf("failed:%s\nseed was %s\n", failed_names, seed_var + 14);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#define T_RUN_ISOLATED(table, limit_s, skip) \
    t_main_isolated(argc, argv, table, sizeof(table) / sizeof((table)[0]), (limit_s), (skip))
#endif

#define T_ENTRY(fn) {#fn, fn}
#define T_RUN_ALL(table) t_main(argc, argv, table, sizeof(table) / sizeof((table)[0]))

#endif
