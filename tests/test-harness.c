/* test-harness: the isolated runner of harness.h reports what it must. Run plainly, this binary
 * re-runs itself with LTK_HARNESS_INNER=1, where one test passes, one hangs, one crashes and one
 * exits with a status of its own, under a 2-second limit, and checks that the hang is killed and
 * reported "[ TIME ]", the crash "[ CRASH]", the exit "[ ERROR]", all three counted as failures with
 * the pass counted once, the exit status 1; that the children draw from the runner's seed (the same
 * numbers as a run in one process); and that a skip() that holds makes the whole run exit 77 after
 * one child. Also the dtype encoders against their formats: every code, every midpoint. */
#include "harness.h"

#include <signal.h>
#include <sys/resource.h>

static void inner_pass(void) {
    printf("draw 0x%016" PRIx64 "\n", rng_u64());
    ASSERT_TRUE(1 + 1 == 2);
}
static void inner_hang(void) {
    for (;;) pause();
}
static void inner_crash(void) { /* SIGABRT: sanitizers leave it to the runner (they catch SIGSEGV) */
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none); /* no core file in the build directory */
    abort();
}
static void inner_exit(void) { exit(3); } /* what a CUDA error check does (exit(2)) */
static int inner_skip(void) {
    if (!getenv("LTK_HARNESS_SKIP")) return 0;
    printf("inner: skipped\n");
    return 1;
}

static const t_test inner[] = {T_ENTRY(inner_pass), T_ENTRY(inner_hang), T_ENTRY(inner_crash), T_ENTRY(inner_exit)};
/* in one process a hang or a crash would end the run: the pass alone there */
static const t_test inner_one[] = {T_ENTRY(inner_pass)};

static char self[4096];

static int run_inner(const char *extra_env, char *out, size_t cap) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "LTK_HARNESS_INNER=1 LTK_TEST_TIMEOUT_S=2 %s '%s' 2>&1", extra_env, self);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count(const char *hay, const char *needle) {
    int c = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) c++;
    return c;
}

static void test_isolated_runner_reports_hang_crash_exit(void) {
    char out[8192];
    const double t0 = t_now();
    int rc = run_inner("LTK_TEST_SEED=0x1234", out, sizeof out);
    const double s = t_now() - t0;
    test_ctx("inner output:\n%s", out);
    ASSERT_EQ_INT(rc, 1);
    ASSERT_STR_CONTAINS(out, "[   OK ] inner_pass");
    ASSERT_STR_CONTAINS(out, "[ TIME ] inner_hang");
    ASSERT_STR_CONTAINS(out, "[ CRASH] inner_crash");
    ASSERT_STR_CONTAINS(out, "[ ERROR] inner_exit: exit status 3");
    ASSERT_STR_CONTAINS(out, "failed: inner_hang(time) inner_crash inner_exit");
    ASSERT_STR_CONTAINS(out, "seed was 0x0000000000001234");
    ASSERT_STR_CONTAINS(out, "\n1 passed, 3 failed\n");
    ASSERT_TRUE(s >= 2.0 && s < 30.0); /* the hang ran to the limit, not beyond */
    /* the same seed in one process (the hang left out): the pass draws the same number */
    const char *d = strstr(out, "draw 0x");
    ASSERT_TRUE(d != NULL);
    char want[32];
    snprintf(want, sizeof want, "%.25s", d);
    char one[8192];
    ASSERT_EQ_INT(run_inner("LTK_TEST_SEED=0x1234 LTK_TEST_TIMEOUT_S=0", one, sizeof one), 0);
    ASSERT_STR_CONTAINS(one, "1 passed, 0 failed");
    ASSERT_STR_CONTAINS(one, want);
}

static void test_isolated_runner_skip(void) {
    char out[8192];
    ASSERT_EQ_INT(run_inner("LTK_HARNESS_SKIP=1", out, sizeof out), 77);
    test_ctx("inner output:\n%s", out);
    ASSERT_EQ_INT(count(out, "inner: skipped"), 1); /* the first child says it for all */
    ASSERT_STR_CONTAINS(out, "\n0 passed, 0 failed\n");
    ASSERT_EQ_INT(run_inner("LTK_HARNESS_SKIP=1 LTK_TEST_TIMEOUT_S=0", out, sizeof out), 77);
    ASSERT_EQ_INT(count(out, "inner: skipped"), 1);
    ASSERT_STR_CONTAINS(out, "\n0 passed, 0 failed\n");
}

static void test_dtypes_round_trip(void) {
    for (int v = 0; v < 256; v++) { /* every e4m3 code but the NaNs comes back to itself, -0 included */
        if ((v & 0x7f) == 0x7f) continue;
        ASSERT_EQ_INT(t_f32_e4m3(t_e4m3_f32((uint8_t)v)), v);
    }
    for (uint32_t h = 0; h < 65536; h++) { /* f16 and bf16 likewise, NaNs apart */
        const float f16 = t_f16_f32((uint16_t)h), b16 = t_bf16_f32((uint16_t)h);
        if (f16 == f16) ASSERT_EQ_INT(t_f32_f16(f16), (int)h);
        if (b16 == b16) ASSERT_EQ_INT(t_f32_bf16(b16), (int)h);
    }
    ASSERT_TRUE(t_e4m3_f32(0x7e) == 448.0f && t_f32_e4m3(1e9f) == 0x7e && t_f32_e4m3(-INFINITY) == 0xfe);
    ASSERT_TRUE(t_f32_e4m3(NAN) == 0x7f && isnan(t_e4m3_f32(0x7f)) && isnan(t_e4m3_f32(0xff)));
    ASSERT_TRUE(t_f32_f16(65520.0f) == 0x7c00 && t_f32_f16(65519.0f) == 0x7bff && t_f32_bf16(-INFINITY) == 0xff80);
}

/* Between two neighbouring finite codes a < b (positive, consecutive): a value just above the
 * midpoint goes to b, just below to a, and the midpoint itself to the even code (f16, bf16: ties to
 * even) or to a (e4m3: ties to the lower magnitude). The midpoints are floats: these formats carry
 * far fewer bits than float. */
static void test_dtypes_rounding(void) {
    for (int a = 0; a < 0x7e; a++) {
        const float lo = t_e4m3_f32((uint8_t)a), hi = t_e4m3_f32((uint8_t)(a + 1)), mid = (lo + hi) / 2;
        test_ctx("e4m3 codes 0x%02x 0x%02x", a, a + 1);
        ASSERT_EQ_INT(t_f32_e4m3(mid), a);
        ASSERT_EQ_INT(t_f32_e4m3(nextafterf(mid, INFINITY)), a + 1);
        ASSERT_EQ_INT(t_f32_e4m3(nextafterf(mid, 0.0f)), a);
        ASSERT_EQ_INT(t_f32_e4m3(-nextafterf(mid, INFINITY)), 0x80 | (a + 1));
    }
    for (int f = 0; f < 2; f++) {
        const int last = f ? 0x7f7f : 0x7bff; /* the largest finite code */
        for (int a = 0; a < last; a++) {
            const float lo = f ? t_bf16_f32((uint16_t)a) : t_f16_f32((uint16_t)a);
            const float hi = f ? t_bf16_f32((uint16_t)(a + 1)) : t_f16_f32((uint16_t)(a + 1));
            const float mid = lo + (hi - lo) / 2;
            test_ctx("%s codes 0x%04x 0x%04x", f ? "bf16" : "f16", a, a + 1);
            const int even = (a & 1) ? a + 1 : a;
            ASSERT_EQ_INT(f ? t_f32_bf16(mid) : t_f32_f16(mid), even);
            ASSERT_EQ_INT(f ? t_f32_bf16(nextafterf(mid, INFINITY)) : t_f32_f16(nextafterf(mid, INFINITY)), a + 1);
            ASSERT_EQ_INT(f ? t_f32_bf16(nextafterf(mid, 0.0f)) : t_f32_f16(nextafterf(mid, 0.0f)), a);
            ASSERT_EQ_INT(f ? t_f32_bf16(-mid) : t_f32_f16(-mid), 0x8000 | even);
        }
    }
}

static const t_test tests[] = {T_ENTRY(test_isolated_runner_reports_hang_crash_exit), T_ENTRY(test_isolated_runner_skip),
                               T_ENTRY(test_dtypes_round_trip), T_ENTRY(test_dtypes_rounding)};

int main(int argc, char **argv) {
    if (getenv("LTK_HARNESS_INNER")) {
        const char *lim = getenv("LTK_TEST_TIMEOUT_S");
        if (lim && atof(lim) <= 0) return T_RUN_ISOLATED(inner_one, 2, inner_skip);
        return T_RUN_ISOLATED(inner, 2, inner_skip);
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        printf("cannot find this binary\n0 passed, 1 failed\n");
        return 1;
    }
    self[n] = '\0';
    return T_RUN_ALL(tests);
}
