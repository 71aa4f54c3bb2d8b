/* Option parsing, enum names, JSON records and result comparison for the CLI. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "ltk-commit.h" /* generated at build time: LTK_BUILD_COMMIT */
#include "num.h"

/* ---- options ------------------------------------------------------------------------------ */
int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "litetopk %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'litetopk %s --help')\n", cmd);
    return CLI_EXIT_USAGE;
}

int cli_parse_int(const char *s, int64_t *out) {
    if (!s || !*s) return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s) return -1;
    int64_t mult = 1;
    if (*end == 'k' || *end == 'K') mult = 1024, end++;
    else if (*end == 'm' || *end == 'M') mult = 1024 * 1024, end++;
    else if (*end == 'g' || *end == 'G') mult = 1024 * 1024 * 1024, end++;
    if (*end != '\0') return -1;
    if (v > INT64_MAX / mult || v < INT64_MIN / mult) return -1;
    *out = (int64_t)v * mult;
    return 0;
}

void cli_print_help(FILE *f, const char *cmd, const char *usage, const char *about, const cli_opt *opts, int nopts) {
    fprintf(f, "usage: litetopk %s\n\n%s\n", usage, about);
    if (nopts == 0) return;
    fprintf(f, "\noptions:\n");
    for (int i = 0; i < nopts; i++) {
        char left[64];
        if (opts[i].alias)
            snprintf(left, sizeof left, "%s, %s%s%s", opts[i].alias, opts[i].name, opts[i].metavar ? " " : "",
                     opts[i].metavar ? opts[i].metavar : "");
        else
            snprintf(left, sizeof left, "%s%s%s", opts[i].name, opts[i].metavar ? " " : "",
                     opts[i].metavar ? opts[i].metavar : "");
        fprintf(f, "  %-26s %s\n", left, opts[i].help);
    }
    fprintf(f, "  %-26s %s\n", "-h, --help", "show this help");
    (void)cmd;
}

int cli_parse(const char *cmd, const char *usage, const char *about, int argc, char **argv, int first, cli_opt *opts,
              int nopts) {
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            cli_print_help(stdout, cmd, usage, about, opts, nopts);
            return -1;
        }
        /* --name=value or --name value */
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        cli_opt *o = NULL;
        for (int j = 0; j < nopts && !o; j++) {
            if ((strlen(opts[j].name) == name_len && !strncmp(opts[j].name, arg, name_len)) ||
                (opts[j].alias && !eq && !strcmp(opts[j].alias, arg)))
                o = &opts[j];
        }
        if (!o) {
            if (arg[0] == '-') return cli_usage_error(cmd, "unknown option '%s'", arg);
            return cli_usage_error(cmd, "unexpected argument '%s'", arg);
        }
        if (o->given) return cli_usage_error(cmd, "%s given twice", o->name);
        o->given = 1;
        if (o->kind == CLI_FLAG) {
            if (eq) return cli_usage_error(cmd, "%s takes no value", o->name);
            *(int *)o->dest = 1;
            continue;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) return cli_usage_error(cmd, "%s needs a value (%s)", o->name, o->metavar ? o->metavar : "VALUE");
        if (o->kind == CLI_STR) {
            if (!*value) return cli_usage_error(cmd, "%s: empty value", o->name);
            *(const char **)o->dest = value;
        } else {
            int64_t v;
            if (cli_parse_int(value, &v) != 0) return cli_usage_error(cmd, "%s: '%s' is not an integer", o->name, value);
            if (v < o->min || v > o->max)
                return cli_usage_error(cmd, "%s=%" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", o->name, v,
                                       o->min, o->max);
            *(int64_t *)o->dest = v;
        }
    }
    return CLI_EXIT_OK;
}

/* ---- names -------------------------------------------------------------------------------- */
int cli_parse_backend(const char *s, ltk_backend *out) {
    static const struct { const char *n; ltk_backend b; } t[] = {
        {"auto", LTK_BACKEND_AUTO}, {"ref", LTK_BACKEND_REF}, {"cpu", LTK_BACKEND_CPU}, {"cuda", LTK_BACKEND_CUDA}};
    for (size_t i = 0; i < 4; i++)
        if (!strcmp(s, t[i].n)) return *out = t[i].b, 1;
    return 0;
}

static const char *const algo_names[] = {"fused", "materialize", "score_only"};
int cli_parse_algo(const char *s, ltk_algo *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, algo_names[i])) return *out = (ltk_algo)i, 1;
    return 0;
}
const char *cli_algo_name(ltk_algo a) { return (unsigned)a < 3 ? algo_names[a] : "unknown"; }

static const char *const dtype_names[] = {"f32", "f16", "bf16", "e4m3"};
int cli_parse_dtype(const char *s, ltk_dtype *out) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, dtype_names[i])) return *out = (ltk_dtype)i, 1;
    if (!strcmp(s, "float32")) return *out = LTK_DTYPE_F32, 1;
    if (!strcmp(s, "float16")) return *out = LTK_DTYPE_F16, 1;
    if (!strcmp(s, "fp8")) return *out = LTK_DTYPE_E4M3, 1;
    return 0;
}
const char *cli_dtype_name(ltk_dtype d) { return (unsigned)d < 4 ? dtype_names[d] : "unknown"; }

static const char *const metric_names[] = {"ip", "l2", "cos"};
int cli_parse_metric(const char *s, ltk_metric *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, metric_names[i])) return *out = (ltk_metric)i, 1;
    return 0;
}
const char *cli_metric_name(ltk_metric m) { return (unsigned)m < 3 ? metric_names[m] : "unknown"; }

int cli_resolve_backend(const char *cmd, ltk_backend want, ltk_backend *out) {
    ltk_backend b = ltk_backend_resolve(want);
    if (!ltk_backend_available(b)) {
        fprintf(stderr, "litetopk %s: backend '%s' is not available (%s); see 'litetopk info'\n", cmd,
                ltk_backend_name(b), b == LTK_BACKEND_CUDA ? "not built with CUDA, or no GPU" : "not built");
        return 0;
    }
    *out = b;
    return 1;
}

const char *cli_commit(void) {
    const char *env = getenv("LTK_COMMIT");
    if (env && *env) return env;
    return LTK_BUILD_COMMIT[0] ? LTK_BUILD_COMMIT : "unknown";
}

const char *cli_bytes(double bytes, char *buf, size_t cap) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) bytes /= 1024.0, u++;
    if (u == 0) snprintf(buf, cap, "%.0f B", bytes);
    else snprintf(buf, cap, "%.1f %s", bytes, unit[u]);
    return buf;
}

/* Within 1%: "as fast as" / "the same"; a ratio of 1.00x would read as either. */
static int cli_about_equal(double a, double b) { return a > 0 && b > 0 && fabs(a - b) <= 0.01 * (a > b ? a : b); }

const char *cli_speed_words(double a_ms, const char *a, double b_ms, const char *b, char *buf, size_t cap) {
    if (!(a_ms > 0) || !(b_ms > 0)) snprintf(buf, cap, "%s vs %s: not timed", a, b);
    else if (cli_about_equal(a_ms, b_ms)) snprintf(buf, cap, "%s is as fast as %s (within 1%%)", a, b);
    else if (a_ms < b_ms) snprintf(buf, cap, "%s is %.2fx faster than %s", a, b_ms / a_ms, b);
    else snprintf(buf, cap, "%s is %.2fx slower than %s", a, a_ms / b_ms, b);
    return buf;
}

const char *cli_size_words(double a_bytes, const char *a, double b_bytes, const char *b, const char *what, char *buf,
                           size_t cap) {
    if (a_bytes == b_bytes || cli_about_equal(a_bytes, b_bytes)) snprintf(buf, cap, "%s uses the same %s as %s", a, what, b);
    else if (!(a_bytes > 0)) snprintf(buf, cap, "%s uses no %s, %s does", a, what, b);
    else if (a_bytes < b_bytes) snprintf(buf, cap, "%s uses %.1fx less %s than %s", a, b_bytes / a_bytes, what, b);
    else snprintf(buf, cap, "%s uses %.1fx more %s than %s", a, a_bytes / b_bytes, what, b);
    return buf;
}

/* ---- JSON --------------------------------------------------------------------------------- */
void cli_utc_now(char *buf, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void json_raw(cli_json *j, const char *s) {
    size_t n = strlen(s);
    if (j->len + n + 1 < sizeof j->buf) {
        memcpy(j->buf + j->len, s, n + 1);
        j->len += n;
    }
}

static void json_key(cli_json *j, const char *key) {
    if (j->fields++) json_raw(j, ", ");
    json_raw(j, "\"");
    json_raw(j, key);
    json_raw(j, "\": ");
}

void cli_json_begin(cli_json *j) {
    j->len = 0;
    j->fields = 0;
    j->buf[0] = '\0';
    json_raw(j, "{");
}

void cli_json_str(cli_json *j, const char *key, const char *value) {
    char esc[512];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)value; *p && n + 8 < sizeof esc; p++) {
        if (*p == '"' || *p == '\\') esc[n++] = '\\', esc[n++] = (char)*p;
        else if (*p < 0x20) n += (size_t)snprintf(esc + n, sizeof esc - n, "\\u%04x", *p);
        else esc[n++] = (char)*p;
    }
    esc[n] = '\0';
    json_key(j, key);
    json_raw(j, "\"");
    json_raw(j, esc);
    json_raw(j, "\"");
}

void cli_json_int(cli_json *j, const char *key, int64_t value) {
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, value);
    json_key(j, key);
    json_raw(j, b);
}

void cli_json_num(cli_json *j, const char *key, double value) {
    char b[40];
    if (isfinite(value)) snprintf(b, sizeof b, "%.6g", value);
    else snprintf(b, sizeof b, "null"); /* JSON has no inf/nan */
    json_key(j, key);
    json_raw(j, b);
}

void cli_json_bool(cli_json *j, const char *key, int value) {
    json_key(j, key);
    json_raw(j, value ? "true" : "false");
}

void cli_json_end(cli_json *j) { json_raw(j, "}"); }

int cli_json_append(const char *path, const cli_json *j) {
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "litetopk: cannot open '%s' for appending: %s\n", path, strerror(errno));
        return -1;
    }
    int bad = fprintf(f, "%s\n", j->buf) < 0;
    bad |= fclose(f) != 0;
    if (bad) fprintf(stderr, "litetopk: write to '%s' failed\n", path);
    return bad ? -1 : 0;
}

/* ---- results ------------------------------------------------------------------------------ */
typedef struct {
    uint32_t key; /* rank key of the score: larger is better */
    uint32_t bits;
    int64_t idx;
} ranked;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    if (a->idx != b->idx) return a->idx < b->idx ? -1 : 1;
    return (a->bits > b->bits) - (a->bits < b->bits);
}

static void load_row(ranked *r, int32_t k, int idx_size, const void *idx, const float *score, int64_t row) {
    for (int32_t j = 0; j < k; j++) {
        int64_t o = row * k + j;
        r[j].idx = idx_size == 8 ? ((const int64_t *)idx)[o] : ((const int32_t *)idx)[o];
        float s = score ? score[o] : 0.0f;
        r[j].key = num_rank_key(s);
        r[j].bits = num_f32_bits(s);
    }
    qsort(r, (size_t)k, sizeof *r, cmp_ranked);
}

int64_t cli_compare_topk(int64_t rows, int32_t k, int idx_size, const void *idx_a, const float *score_a,
                         const void *idx_b, const float *score_b, char *what, size_t what_cap) {
    ranked *ra = malloc(sizeof *ra * (size_t)k), *rb = malloc(sizeof *rb * (size_t)k);
    int64_t bad = 0;
    if (what && what_cap) what[0] = '\0';
    if (!ra || !rb) {
        free(ra), free(rb);
        if (what) snprintf(what, what_cap, "out of memory while comparing");
        return rows > 0 ? rows : 1;
    }
    for (int64_t r = 0; r < rows; r++) {
        load_row(ra, k, idx_size, idx_a, score_a, r);
        load_row(rb, k, idx_size, idx_b, score_b, r);
        for (int32_t j = 0; j < k; j++) {
            if (ra[j].idx != rb[j].idx || ra[j].bits != rb[j].bits) {
                if (bad == 0 && what)
                    snprintf(what, what_cap, "row %lld, rank %d: index %lld score %.9g vs index %lld score %.9g",
                             (long long)r, j, (long long)ra[j].idx, (double)num_bits_f32(ra[j].bits),
                             (long long)rb[j].idx, (double)num_bits_f32(rb[j].bits));
                bad++;
                break;
            }
        }
    }
    free(ra), free(rb);
    return bad;
}

double cli_stats_mean(int64_t total, const ltk_stats *s) {
    int64_t scanned = s->rows - s->short_rows;
    return scanned > 0 ? (double)total / (double)scanned : 0.0;
}
