/* test-harness: the isolated runner of harness.h reports what it must. Run plainly, this binary
 * re-runs itself with LTK_HARNESS_INNER=1, where one test passes, one hangs and one crashes, under a
 * 2-second limit, and checks that the hang is killed and reported "[ TIME ]", the crash "[ CRASH]",
 * both counted as failures with the pass counted once, and the exit status 1; and that a skip()
 * that holds makes the whole run exit 77. Also the dtype helpers against their formats. */
#include "harness.h"

#include <signal.h>

static void inner_pass(void) { ASSERT_TRUE(1 + 1 == 2); }
static void inner_hang(void) {
    for (;;) pause();
}
static void inner_crash(void) { abort(); } /* SIGABRT: sanitizers leave it to the runner (they catch SIGSEGV) */
static int inner_skip(void) { return getenv("LTK_HARNESS_SKIP") != NULL; }

static const t_test inner[] = {T_ENTRY(inner_pass), T_ENTRY(inner_hang), T_ENTRY(inner_crash)};

static char self[4096];

static int run_inner(const char *extra_env, char *out, size_t cap) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "LTK_HARNESS_INNER=1 LTK_TEST_TIMEOUT_S=2 %s '%s' 2>&1", extra_env, self);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_isolated_runner_reports_hang_and_crash(void) {
    char out[8192];
    int rc = run_inner("", out, sizeof out);
    ASSERT_EQ_INT(rc, 1);
    ASSERT_STR_CONTAINS(out, "[ TIME ] inner_hang");
    ASSERT_STR_CONTAINS(out, "[ CRASH] inner_crash");
    ASSERT_STR_CONTAINS(out, "[   OK ] inner_pass");
    ASSERT_STR_CONTAINS(out, "1 passed, 2 failed");
}

static void test_isolated_runner_skip(void) {
    char out[8192];
    ASSERT_EQ_INT(run_inner("LTK_HARNESS_SKIP=1", out, sizeof out), 77);
    ASSERT_STR_CONTAINS(out, "0 passed, 0 failed");
}

static void test_dtypes_round_trip(void) {
    for (int v = 0; v < 256; v++) { /* every finite e4m3 code comes back to itself */
        if ((v & 0x7f) == 0x7f) continue;
        const float f = t_e4m3_f32((uint8_t)v);
        if (f == 0.0f) continue; /* -0 encodes as +0's code or its own: both are zero */
        ASSERT_EQ_INT(t_f32_e4m3(f), v);
    }
    for (uint32_t h = 0; h < 65536; h++) { /* f16 and bf16 likewise, NaNs apart */
        const float f16 = t_f16_f32((uint16_t)h), b16 = t_bf16_f32((uint16_t)h);
        if (f16 == f16) ASSERT_EQ_INT(t_f32_f16(f16), (int)h);
        if (b16 == b16) ASSERT_EQ_INT(t_f32_bf16(b16), (int)h);
    }
    ASSERT_TRUE(t_e4m3_f32(0x7e) == 448.0f && t_f32_e4m3(1e9f) == 0x7e && t_f32_e4m3(NAN) == 0x7f);
}

static const t_test tests[] = {T_ENTRY(test_isolated_runner_reports_hang_and_crash), T_ENTRY(test_isolated_runner_skip),
                               T_ENTRY(test_dtypes_round_trip)};

int main(int argc, char **argv) {
    if (getenv("LTK_HARNESS_INNER")) return T_RUN_ISOLATED(inner, 2, inner_skip);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        printf("cannot find this binary\n0 passed, 1 failed\n");
        return 1;
    }
    self[n] = '\0';
    return T_RUN_ALL(tests);
}
