/* Tests of tools/io.c (every format round-trips, bad files are rejected with the right status) and
 * of the number conversions in num.h.
 *
 *   test-io DIR                       runs the tests, scratch files in DIR
 *   test-io --write-knn-fixture DIR   writes small kNN inputs with a known answer for test-cli.sh
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <omp.h>

#include "gen.h"
#include "harness.h"
#include "io.h"
#include "num.h"

static char dir[2048];

static const char *path_in(const char *name) {
    static char buf[4][4096];
    static int slot = 0;
    slot = (slot + 1) % 4;
    snprintf(buf[slot], sizeof buf[slot], "%s/%s", dir, name);
    return buf[slot];
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
        exit(2);
    }
    if (n && fwrite(data, 1, n, f) != n) exit(2);
    fclose(f);
}


static io_matrix random_matrix(int64_t rows, int64_t cols, io_elem elem) {
    io_matrix m = {rows, cols, elem, NULL};
    size_t n = (size_t)(rows * cols), es = io_elem_size(elem);
    m.data = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_u64();
        switch (elem) {
        case IO_ELEM_F32: ((float *)m.data)[i] = (float)((double)(int64_t)(r % 2000001) / 1000.0 - 1000.0); break;
        case IO_ELEM_F16: ((uint16_t *)m.data)[i] = num_f32_to_f16((float)((double)(r % 20001) / 100.0 - 100.0)); break;
        case IO_ELEM_U8: ((uint8_t *)m.data)[i] = (uint8_t)r; break;
        case IO_ELEM_I32: ((int32_t *)m.data)[i] = (int32_t)(uint32_t)r; break;
        case IO_ELEM_I64: ((int64_t *)m.data)[i] = (int64_t)r; break;
        }
    }
    return m;
}

/* ---- round trips -------------------------------------------------------------------------- */
static void round_trip(const char *ext, io_elem elem, int64_t rows, int64_t cols) {
    char name[64];
    snprintf(name, sizeof name, "rt-%s-%lld-%lld-%s.%s", io_elem_name(elem), (long long)rows, (long long)cols, ext, ext);
    const char *p = path_in(name);
    io_matrix m = random_matrix(rows, cols, elem), r;
    ltk_status st = io_write(p, &m);
    CHECK(st == LTK_OK, "write %s: %s", p, tool_last_error());
    st = io_read(p, &r);
    CHECK(st == LTK_OK, "read %s: %s", p, tool_last_error());
    if (st == LTK_OK) {
        io_format fmt = io_format_from_path(p);
        int vecs = fmt == IO_FORMAT_FVECS || fmt == IO_FORMAT_BVECS || fmt == IO_FORMAT_IVECS;
        int64_t want_cols = (vecs && rows == 0) ? 0 : cols; /* an empty .*vecs file has no dimension */
        CHECK(r.rows == rows && r.cols == want_cols, "%s: shape %lld x %lld, wrote %lld x %lld", p, (long long)r.rows,
              (long long)r.cols, (long long)rows, (long long)cols);
        CHECK(r.elem == elem, "%s: elem %s, wrote %s", p, io_elem_name(r.elem), io_elem_name(elem));
        size_t bytes = (size_t)(rows * cols) * io_elem_size(elem);
        CHECK(bytes == 0 || (r.data && memcmp(r.data, m.data, bytes) == 0), "%s: data differs", p);
    }
    io_matrix_free(&r);
    io_matrix_free(&m);
}

static void test_round_trips(void) {
    static const int64_t shapes[][2] = {{0, 3}, {1, 1}, {3, 17}, {2, 3}, {7, 1000}, {65, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t r = shapes[s][0], c = shapes[s][1];
        round_trip("fvecs", IO_ELEM_F32, r, c);
        round_trip("bvecs", IO_ELEM_U8, r, c);
        round_trip("ivecs", IO_ELEM_I32, r, c);
        round_trip("fbin", IO_ELEM_F32, r, c);
        round_trip("u8bin", IO_ELEM_U8, r, c);
        round_trip("ibin", IO_ELEM_I32, r, c);
        for (int e = IO_ELEM_F32; e <= IO_ELEM_I64; e++) round_trip("npy", (io_elem)e, r, c);
    }
    /* Upper-case extensions are recognised. */
    round_trip("FBIN", IO_ELEM_F32, 2, 2);
}

/* int64 indices narrow to .ivecs/.ibin when they fit, and are refused when they do not. */
static void test_narrowing(void) {
    int64_t ok[4] = {0, -1, 5, INT32_MAX}, bad[2] = {1, (int64_t)INT32_MAX + 1};
    io_matrix m = {2, 2, IO_ELEM_I64, ok}, r;
    CHECK(io_write(path_in("narrow.ivecs"), &m) == LTK_OK, "%s", tool_last_error());
    CHECK(io_read(path_in("narrow.ivecs"), &r) == LTK_OK, "%s", tool_last_error());
    CHECK(r.elem == IO_ELEM_I32 && ((int32_t *)r.data)[1] == -1 && ((int32_t *)r.data)[3] == INT32_MAX, "narrowed");
    io_matrix_free(&r);
    io_matrix mb = {1, 2, IO_ELEM_I64, bad};
    CHECK(io_write(path_in("narrow-bad.ibin"), &mb) == LTK_EINVAL, "out-of-range int64 accepted");
    io_matrix f = {1, 2, IO_ELEM_F32, ok};
    CHECK(io_write(path_in("wrong-elem.ivecs"), &f) == LTK_EINVAL, "float32 written to .ivecs");
    CHECK(io_write(path_in("wrong-elem.u8bin"), &f) == LTK_EINVAL, "float32 written to .u8bin");
    CHECK(io_write(path_in("no-such-dir/x.fbin"), &f) == LTK_EIO, "write into a missing directory");
    CHECK(io_write(path_in("x.txt"), &f) == LTK_EINVAL, "unknown extension on write");
}

/* ---- malformed inputs --------------------------------------------------------------------- */
static void expect_read(const char *name, const void *bytes, size_t n, ltk_status want, const char *why) {
    const char *p = path_in(name);
    write_bytes(p, bytes, n);
    io_matrix m;
    ltk_status st = io_read(p, &m);
    CHECK(st == want, "%s (%s): got %d (%s), want %d", name, why, (int)st, tool_last_error(), (int)want);
    CHECK(st != LTK_OK || m.data != NULL || m.rows * m.cols == 0, "%s: ok without data", name);
    CHECK(st == LTK_OK || (m.data == NULL && m.rows == 0), "%s: failure left data behind", name);
    if (st != LTK_OK) CHECK(strlen(tool_last_error()) > 0, "%s: no message", name);
    io_matrix_free(&m);
}

static size_t npy_bytes(unsigned char *buf, const char *dict, const void *data, size_t data_bytes, int version) {
    size_t n = strlen(dict), pre = version == 1 ? 10 : 12;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)version, buf[7] = 0;
    if (version == 1) buf[8] = (unsigned char)n, buf[9] = (unsigned char)(n >> 8);
    else buf[8] = (unsigned char)n, buf[9] = (unsigned char)(n >> 8), buf[10] = 0, buf[11] = 0;
    memcpy(buf + pre, dict, n);
    if (data_bytes) memcpy(buf + pre + n, data, data_bytes);
    return pre + n + data_bytes;
}

static void test_malformed(void) {
    io_matrix m;
    CHECK(io_read(path_in("does-not-exist.fvecs"), &m) == LTK_EIO, "missing file");
    CHECK(io_read(path_in("whatever.txt"), &m) == LTK_EINVAL, "unknown extension");
    CHECK(io_read(path_in("noext"), &m) == LTK_EINVAL, "no extension");
    CHECK(io_read(dir, &m) != LTK_OK, "a directory");

    /* *vecs */
    int32_t rec[6] = {2, 0, 0, 2, 0, 0}; /* two 2-d float vectors */
    expect_read("ok.fvecs", rec, sizeof rec, LTK_OK, "valid");
    expect_read("empty.fvecs", rec, 0, LTK_OK, "empty file = 0 vectors");
    expect_read("trunc.fvecs", rec, sizeof rec - 1, LTK_EFORMAT, "truncated last vector");
    expect_read("short-hdr.fvecs", rec, 3, LTK_EFORMAT, "shorter than a header");
    int32_t zero_dim[1] = {0};
    expect_read("zero-dim.fvecs", zero_dim, 4, LTK_EFORMAT, "dimension 0");
    int32_t neg_dim[3] = {-2, 0, 0};
    expect_read("neg-dim.fvecs", neg_dim, sizeof neg_dim, LTK_EFORMAT, "negative dimension");
    int32_t huge_dim[2] = {INT32_MAX, 0};
    expect_read("huge-dim.fvecs", huge_dim, sizeof huge_dim, LTK_EFORMAT, "dimension larger than the file");
    int32_t mixed[6] = {1, 0, 3, 0, 0, 0}; /* 2 records of 8 bytes by the first header; the 2nd says dim 3 */
    expect_read("mixed.fvecs", mixed, 16, LTK_EFORMAT, "mixed dimensions");
    unsigned char bvec[5] = {4, 0, 0, 0, 9};
    expect_read("trunc.bvecs", bvec, 5, LTK_EFORMAT, "bvecs shorter than its dimension");
    int32_t ivec[3] = {2, 7, 8};
    expect_read("ok.ivecs", ivec, sizeof ivec, LTK_OK, "valid ivecs");

    /* *bin */
    int32_t bin[8] = {2, 3, 0, 0, 0, 0, 0, 0};
    expect_read("ok.fbin", bin, sizeof bin, LTK_OK, "valid");
    expect_read("empty.fbin", bin, 0, LTK_EFORMAT, "empty file has no header");
    expect_read("hdr-only.fbin", bin, 8, LTK_EFORMAT, "header without data");
    expect_read("trunc.fbin", bin, sizeof bin - 2, LTK_EFORMAT, "truncated data");
    int32_t extra[9] = {2, 3, 0, 0, 0, 0, 0, 0, 0};
    expect_read("trailing.fbin", extra, sizeof extra, LTK_EFORMAT, "trailing bytes");
    int32_t negative[2] = {-1, 4};
    expect_read("neg.fbin", negative, sizeof negative, LTK_EFORMAT, "negative rows");
    int32_t giant[2] = {INT32_MAX, INT32_MAX};
    expect_read("giant.u8bin", giant, sizeof giant, LTK_EFORMAT, "a giant header on a tiny file");
    int32_t zero_rows[2] = {0, 5};
    expect_read("zero-rows.ibin", zero_rows, sizeof zero_rows, LTK_OK, "0 x 5 is a valid empty matrix");
    int32_t zero_cols[2] = {5, 0};
    expect_read("zero-cols.fbin", zero_cols, sizeof zero_cols, LTK_EFORMAT, "rows of dimension 0");

    /* npy */
    unsigned char buf[512];
    float data[6] = {1, 2, 3, 4, 5, 6};
    size_t n;
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", data, 24, 1);
    expect_read("ok.npy", buf, n, LTK_OK, "valid v1");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", data, 24, 2);
    expect_read("ok-v2.npy", buf, n, LTK_OK, "valid v2, no trailing comma");
    n = npy_bytes(buf, "{\"shape\": (3,2), \"fortran_order\": False, \"descr\": \"<f4\"}", data, 24, 3);
    expect_read("ok-v3.npy", buf, n, LTK_OK, "valid v3, other key order and quotes");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", data, 20, 1);
    expect_read("trunc.npy", buf, n, LTK_EFORMAT, "truncated data");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", data, 24, 1);
    expect_read("trunc-hdr.npy", buf, 30, LTK_EFORMAT, "truncated header");
    expect_read("tiny.npy", buf, 7, LTK_EFORMAT, "shorter than the preamble");
    expect_read("empty.npy", buf, 0, LTK_EFORMAT, "empty file");
    memcpy(buf, "\x93NUMPZ", 6);
    expect_read("magic.npy", buf, n, LTK_EFORMAT, "bad magic");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", data, 24, 9);
    expect_read("version.npy", buf, n, LTK_EUNSUPPORTED, "unknown version");
    n = npy_bytes(buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 3), }\n", data, 24, 1);
    expect_read("f8.npy", buf, n, LTK_EUNSUPPORTED, "float64");
    n = npy_bytes(buf, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }\n", data, 24, 1);
    expect_read("be.npy", buf, n, LTK_EUNSUPPORTED, "big-endian");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", data, 24, 1);
    expect_read("fortran.npy", buf, n, LTK_EUNSUPPORTED, "Fortran order");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }\n", data, 24, 1);
    expect_read("1d.npy", buf, n, LTK_EUNSUPPORTED, "1-D");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }\n", data, 24, 1);
    expect_read("3d.npy", buf, n, LTK_EUNSUPPORTED, "3-D");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}\n", data, 24, 1);
    expect_read("extra-key.npy", buf, n, LTK_EFORMAT, "unknown key");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3) junk", data, 24, 1);
    expect_read("junk.npy", buf, n, LTK_EFORMAT, "junk in the header");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3)}", data, 24, 1);
    expect_read("overflow.npy", buf, n, LTK_EFORMAT, "shape overflows int64");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}", data, 24, 1);
    expect_read("product.npy", buf, n, LTK_EFORMAT, "rows*cols*4 overflows");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3)}", data, 24, 1);
    expect_read("maybe.npy", buf, n, LTK_EFORMAT, "bad boolean");
    n = npy_bytes(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", data, 24, 1);
    buf[8] = 0xff, buf[9] = 0x7f; /* header length far beyond the file */
    expect_read("hlen.npy", buf, n, LTK_EFORMAT, "header length beyond the file");
}

/* ---- streams (the fuzz target's entry point) ---------------------------------------------- */
static void test_stream(void) {
    int32_t bin[4] = {1, 2, 0, 0};
    FILE *f = fmemopen(bin, sizeof bin, "rb");
    io_matrix m;
    CHECK(f && io_read_stream(f, sizeof bin, IO_FORMAT_FBIN, "mem", &m) == LTK_OK && m.rows == 1 && m.cols == 2,
          "%s", tool_last_error());
    if (f) fclose(f);
    io_matrix_free(&m);
    CHECK(io_read_stream(NULL, 0, IO_FORMAT_FBIN, NULL, &m) == LTK_EINVAL, "NULL stream");
    CHECK(io_read_stream(stdin, 4, IO_FORMAT_UNKNOWN, NULL, &m) == LTK_EINVAL, "unknown format");
}

/* ---- conversions -------------------------------------------------------------------------- */
/* Reference e4m3 encoder: nearest of the 127 positive codes by search, ties to the even code. */
static uint8_t e4m3_by_search(float x) {
    if (isnan(x)) return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0x00;
    float a = fabsf(x);
    if (a >= 448.0f) return (uint8_t)(sign | 0x7e);
    int best = 0;
    for (int c = 1; c <= 126; c++) {
        float dc = fabsf(num_e4m3_to_f32((uint8_t)c) - a), db = fabsf(num_e4m3_to_f32((uint8_t)best) - a);
        if (dc < db || (dc == db && (c & 1) == 0)) best = c;
    }
    return (uint8_t)(sign | best);
}

static void test_conversions(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = num_f16_to_f32((uint16_t)h);
        uint16_t back = num_f32_to_f16(f);
        if (isnan(f) ? !isnan(num_f16_to_f32(back)) : back != h) bad++;
    }
    CHECK(bad == 0, "%d f16 values do not round-trip", bad);
    bad = 0;
    for (uint32_t v = 0; v < 256; v++) {
        float f = num_e4m3_to_f32((uint8_t)v);
        uint8_t back = num_f32_to_e4m3(f);
        if (isnan(f) ? !isnan(num_e4m3_to_f32(back)) : (back != v && !(f == 0.0f && (back & 0x7f) == 0))) bad++;
    }
    CHECK(bad == 0, "%d e4m3 values do not round-trip", bad);
    bad = 0;
    /* Every code, the midpoints between neighbours (the ties) and their float neighbours, plus a
     * sweep of float bit patterns: the encoder agrees with the search. */
    for (uint32_t c = 0; c < 126; c++) {
        float lo = num_e4m3_to_f32((uint8_t)c), hi = num_e4m3_to_f32((uint8_t)(c + 1)), mid = 0.5f * (lo + hi);
        float probe[5] = {lo, mid, nextafterf(mid, 0.0f), nextafterf(mid, 1e9f), -mid};
        for (int i = 0; i < 5; i++) bad += num_f32_to_e4m3(probe[i]) != e4m3_by_search(probe[i]);
    }
    for (uint64_t u = 0; u < 0x100000000ull; u += 7919) {
        float f = num_bits_f32((uint32_t)u);
        if (num_f32_to_e4m3(f) != e4m3_by_search(f)) bad++;
    }
    CHECK(bad == 0, "%d floats encode to e4m3 differently from the nearest-even search", bad);
    CHECK(num_f32_to_e4m3(448.0f) == 0x7e && num_f32_to_e4m3(1e9f) == 0x7e && num_f32_to_e4m3(-500.0f) == 0xfe,
          "e4m3 saturation");
    CHECK(num_f32_to_e4m3(0.5f) == 0x30 && num_f32_to_e4m3(1.0625f) == 0x38 && num_f32_to_e4m3(1.1875f) == 0x3a,
          "e4m3 ties to even");
    CHECK(num_f32_to_e4m3(ldexpf(1.0f, -10)) == 0x00 && num_f32_to_e4m3(ldexpf(3.0f, -10)) == 0x02,
          "e4m3 subnormal rounding");
    CHECK(num_f32_to_f16(65519.0f) == 0x7bff && num_f32_to_f16(65520.0f) == 0x7c00, "f16 overflow boundary");
    CHECK(num_f32_to_f16(ldexpf(1.0f, -25)) == 0 && num_f32_to_f16(ldexpf(3.0f, -25)) == 2, "f16 subnormal ties");
    CHECK(num_f32_to_bf16(1.0f) == 0x3f80 && num_bf16_to_f32(num_f32_to_bf16(1.00390625f)) == 1.0f, "bf16 ties");
    CHECK(num_rank_key(-0.0f) == num_rank_key(0.0f) && num_rank_key(NAN) == 0 &&
              num_rank_key(-INFINITY) > num_rank_key(NAN) && num_rank_key(1.0f) > num_rank_key(-1.0f),
          "rank key order");
}

/* ---- fixture for the CLI test ------------------------------------------------------------- */
/* base[i] = (i + 1) * e_(i mod D), queries[j] = e_(j mod D): query j's inner products are i + 1 for
 * i = j (mod D), else 0, all exact in float16, float32 and uint8, so the top-k is known: the largest
 * i with i = j (mod D), descending. */
static int write_fixture(void) {
    enum { N = 20, B = 6, D = 4, K = 3 };
    float base[N * D] = {0}, queries[B * D] = {0};
    uint8_t base8[N * D] = {0};
    uint16_t base16[N * D] = {0}, queries16[B * D] = {0};
    int32_t expect[B * K];
    int64_t expect64[B * K];
    for (int i = 0; i < N; i++) {
        base[i * D + i % D] = (float)(i + 1);
        base8[i * D + i % D] = (uint8_t)(i + 1);
        base16[i * D + i % D] = num_f32_to_f16((float)(i + 1));
    }
    for (int j = 0; j < B; j++) {
        queries[j * D + j % D] = 1.0f;
        queries16[j * D + j % D] = num_f32_to_f16(1.0f);
        int last = N - 1;
        while (last % D != j % D) last--;
        for (int r = 0; r < K; r++) expect[j * K + r] = last - r * D, expect64[j * K + r] = last - r * D;
    }
    struct {
        const char *name;
        io_matrix m;
    } files[] = {
        {"base.fvecs", {N, D, IO_ELEM_F32, base}},     {"queries.fvecs", {B, D, IO_ELEM_F32, queries}},
        {"base.bvecs", {N, D, IO_ELEM_U8, base8}},     {"queries.fbin", {B, D, IO_ELEM_F32, queries}},
        {"base.u8bin", {N, D, IO_ELEM_U8, base8}},     {"base16.npy", {N, D, IO_ELEM_F16, base16}},
        {"queries16.npy", {B, D, IO_ELEM_F16, queries16}}, {"queries3.fvecs", {B, 3, IO_ELEM_F32, queries}},
        {"expect.ivecs", {B, K, IO_ELEM_I32, expect}}, {"expect.ibin", {B, K, IO_ELEM_I32, expect}},
        {"expect.npy", {B, K, IO_ELEM_I64, expect64}},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (io_write(path_in(files[i].name), &files[i].m) != LTK_OK) {
            fprintf(stderr, "fixture: %s\n", tool_last_error());
            return 1;
        }
    }
    /* A truncated copy of the base. */
    write_bytes(path_in("truncated.fvecs"), base, 4 * 7);
    return 0;
}

/* The DSA generator makes the same data whatever the number of threads (blocks of tokens with
 * their own random streams), and different data for another seed. */
static void test_generator_threads(void) {
    gen_dsa_spec spec = {1000, 3000, 8, 64, LTK_DTYPE_E4M3, 42, 0.95, NULL, 0};
    gen_dsa a, b, c;
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    ltk_status s1 = gen_dsa_make(&spec, &a);
    omp_set_num_threads(3);
    ltk_status s2 = gen_dsa_make(&spec, &b);
    spec.seed = 43;
    ltk_status s3 = gen_dsa_make(&spec, &c);
    omp_set_num_threads(nt);
    CHECK(s1 == LTK_OK && s2 == LTK_OK && s3 == LTK_OK, "generator failed");
    if (s1 || s2 || s3) return;
    size_t nq = (size_t)3000 * 8 * 64, nk = (size_t)4000 * 64;
    CHECK(!memcmp(a.q, b.q, nq) && !memcmp(a.kv, b.kv, nk), "q/kv differ between 1 and 3 threads");
    CHECK(!memcmp(a.kv_scale, b.kv_scale, 4000 * sizeof(float)), "kv_scale differs between 1 and 3 threads");
    CHECK(!memcmp(a.weights, b.weights, (size_t)3000 * 8 * sizeof(float)), "weights differ between 1 and 3 threads");
    CHECK(memcmp(a.q, c.q, nq) != 0 && memcmp(a.kv, c.kv, nk) != 0, "another seed gave the same data");
    CHECK(a.ke[0] == 1001 && a.ke[2999] == 4000 && a.ks[5] == 0, "causal ranges");
    gen_dsa_free(&a);
    gen_dsa_free(&b);
    gen_dsa_free(&c);
}

int main(int argc, char **argv) {
    int fixture = argc == 3 && !strcmp(argv[1], "--write-knn-fixture");
    if (argc != 2 && !fixture) {
        fprintf(stderr, "usage: test-io DIR | test-io --write-knn-fixture DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[argc - 1]);
    mkdir(dir, 0777);
    if (fixture) return write_fixture();
    static const t_test tests[] = {T_ENTRY(test_round_trips), T_ENTRY(test_narrowing),   T_ENTRY(test_malformed),
                                   T_ENTRY(test_stream),      T_ENTRY(test_conversions), T_ENTRY(test_generator_threads)};
    return t_main(1, argv, tests, sizeof tests / sizeof tests[0]); /* argv[1] is DIR, not a filter */
}
