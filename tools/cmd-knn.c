/* `litetopk knn`: brute-force exact k nearest neighbours between two vector files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "devmem.h"
#include "io.h"

static const char knn_usage[] =
    "knn --base FILE --queries FILE -k K [--metric ip|l2|cos] [--out FILE] [--backend auto|cpu|cuda|ref]\n"
    "                    [--algo fused|materialize]";
static const char knn_about[] =
    "Exact top-k neighbours of every query among the base vectors (ltk_knn_topk).\n"
    "Inputs: .fvecs .bvecs .fbin .u8bin .npy (2-D float32/float16/uint8, C order); uint8 is converted to\n"
    "float32, float16 stays float16 when both files are float16.\n"
    "Output (--out): .ivecs or .ibin (int32 indices) or .npy (int64); the scores go beside it as\n"
    "STEM.scores.fbin (.npy for .npy). Without --out the neighbours are printed as 'index:score'.\n"
    "For l2 the scores are squared distances (smaller first); for ip and cos larger is better.\n"
    "A query row holding NaN or inf scores NaN everywhere and returns 0..k-1 (NaN ranks last); the tool\n"
    "warns once per file. Queries are processed in batches; a progress line goes to stderr for long runs.\n"
    "File layouts: 'litetopk help formats' (docs/file-formats.md).";

/* Loads a vector file and checks it is usable as kNN input. */
static int load_vectors(const char *what, const char *path, io_matrix *m) {
    io_format fmt = io_format_from_path(path);
    if (fmt == IO_FORMAT_IVECS || fmt == IO_FORMAT_IBIN) {
        fprintf(stderr, "litetopk knn: %s '%s': .%s holds int32 indices, not vectors (use .fvecs .bvecs .fbin .u8bin "
                        ".npy)\n", what, path, io_format_name(fmt));
        return 0;
    }
    ltk_status st = io_read(path, m);
    if (st) {
        fprintf(stderr, "litetopk knn: %s: %s\n", what, tool_last_error());
        return 0;
    }
    if (m->elem == IO_ELEM_I32 || m->elem == IO_ELEM_I64) {
        fprintf(stderr, "litetopk knn: %s '%s': integer arrays are not vectors (float32, float16 or uint8)\n", what,
                path);
        io_matrix_free(m);
        return 0;
    }
    if (m->rows == 0 || m->cols == 0) {
        fprintf(stderr, "litetopk knn: %s '%s' holds no vectors (%lld x %lld)\n", what, path, (long long)m->rows,
                (long long)m->cols);
        io_matrix_free(m);
        return 0;
    }
    if (m->cols > LTK_KNN_MAX_D) {
        fprintf(stderr, "litetopk knn: %s '%s': dimension %lld exceeds the limit %d\n", what, path,
                (long long)m->cols, LTK_KNN_MAX_D);
        io_matrix_free(m);
        return 0;
    }
    return 1;
}

/* "out.ivecs" -> "out.scores.fbin" */
static void scores_path(const char *out, io_format fmt, char *buf, size_t cap) {
    size_t n = strlen(out), ext = strlen(io_format_name(fmt)) + 1;
    snprintf(buf, cap, "%.*s.scores.%s", (int)(n - ext), out, fmt == IO_FORMAT_NPY ? "npy" : "fbin");
}

/* Rows of m (float32 or float16) holding a NaN or an infinity; *first is the first such row. */
static int64_t nonfinite_rows(const io_matrix *m, int64_t *first) {
    int64_t n = 0;
    *first = -1;
    for (int64_t r = 0; r < m->rows; r++) {
        int bad = 0;
        if (m->elem == IO_ELEM_F16) {
            const uint16_t *x = (const uint16_t *)m->data + r * m->cols;
            for (int64_t c = 0; c < m->cols && !bad; c++) bad = (x[c] & 0x7c00u) == 0x7c00u;
        } else {
            const float *x = (const float *)m->data + r * m->cols;
            for (int64_t c = 0; c < m->cols && !bad; c++) bad = !isfinite(x[c]);
        }
        if (bad && n++ == 0) *first = r;
    }
    return n;
}

/* One warning per file: a NaN/inf query gets NaN scores for every key, and NaN ranks last, so its
 * row is the lowest indices 0..k-1 with NaN scores; a NaN/inf base vector ranks last for all. */
static void warn_nonfinite(const char *what, const char *path, const io_matrix *m) {
    int64_t first, n = nonfinite_rows(m, &first);
    if (n == 0) return;
    if (!strcmp(what, "queries"))
        fprintf(stderr,
                "litetopk knn: warning: %s: %lld of %lld query rows hold NaN or inf (first: row %lld); their scores are\n"
                "  NaN (or inf) for every base vector, so those rows return indices 0..k-1 by the NaN-last order\n",
                path, (long long)n, (long long)m->rows, (long long)first);
    else
        fprintf(stderr,
                "litetopk knn: warning: %s: %lld of %lld base vectors hold NaN or inf (first: row %lld); their scores\n"
                "  are NaN or inf for every query (NaN ranks last)\n",
                path, (long long)n, (long long)m->rows, (long long)first);
}

int cmd_knn(int argc, char **argv) {
    const char *base_path = NULL, *query_path = NULL, *out_path = NULL, *metric_s = "ip", *backend_s = "auto",
               *algo_s = "fused";
    int64_t k = 0, threads = 0, batch = 0;
    int quiet = 0;
    cli_opt opts[] = {
        {"--base", NULL, CLI_STR, &base_path, "FILE", "base vectors", 0, 0, 0},
        {"--queries", NULL, CLI_STR, &query_path, "FILE", "query vectors (same dimension)", 0, 0, 0},
        {"--k", "-k", CLI_INT, &k, "K", "neighbours per query, 1..16384 (k > base rows pads with -1)", 1, LTK_KNN_MAX_K, 0},
        {"--metric", NULL, CLI_STR, &metric_s, "M", "ip (default), l2 or cos", 0, 0, 0},
        {"--out", "-o", CLI_STR, &out_path, "FILE", "write indices (.ivecs .ibin .npy) and scores beside", 0, 0, 0},
        {"--backend", NULL, CLI_STR, &backend_s, "NAME", "auto (default), cpu, cuda or ref", 0, 0, 0},
        {"--algo", NULL, CLI_STR, &algo_s, "A", "fused (default) or materialize", 0, 0, 0},
        {"--threads", NULL, CLI_INT, &threads, "N", "CPU threads (0 = all cores)", 0, 4096, 0},
        {"--batch", NULL, CLI_INT, &batch, "N", "queries per call (default: bounded by base size)", 1, INT32_MAX, 0},
        {"--quiet", "-q", CLI_FLAG, &quiet, NULL, "no progress lines", 0, 0, 0},
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse("knn", knn_usage, knn_about, argc, argv, 2, opts, nopts);
    if (rc < 0) return CLI_EXIT_OK;
    if (rc) return rc;
    if (!base_path) return cli_usage_error("knn", "--base FILE is required");
    if (!query_path) return cli_usage_error("knn", "--queries FILE is required");
    if (!opts[2].given) return cli_usage_error("knn", "-k K is required");
    ltk_metric metric;
    ltk_backend want, backend;
    ltk_algo algo;
    if (!cli_parse_metric(metric_s, &metric)) return cli_usage_error("knn", "unknown metric '%s' (ip, l2, cos)", metric_s);
    if (!cli_parse_backend(backend_s, &want)) return cli_usage_error("knn", "unknown backend '%s'", backend_s);
    if (!cli_parse_algo(algo_s, &algo) || algo == LTK_ALGO_SCORE_ONLY)
        return cli_usage_error("knn", "unknown algo '%s' (fused, materialize)", algo_s);
    io_format out_fmt = IO_FORMAT_UNKNOWN;
    if (out_path) {
        out_fmt = io_format_from_path(out_path);
        if (out_fmt != IO_FORMAT_IVECS && out_fmt != IO_FORMAT_IBIN && out_fmt != IO_FORMAT_NPY)
            return cli_usage_error("knn", "--out '%s': unknown extension for indices (use .ivecs, .ibin or .npy)",
                                   out_path);
    }
    for (int i = 0; i < 2; i++) {
        const char *p = i ? query_path : base_path;
        io_format f = io_format_from_path(p);
        if (f == IO_FORMAT_UNKNOWN)
            return cli_usage_error("knn", "'%s': unknown extension (expected .fvecs .bvecs .fbin .u8bin .npy)", p);
    }
    if (!cli_resolve_backend("knn", want, &backend)) return CLI_EXIT_FAIL;
    const int on_device = backend == LTK_BACKEND_CUDA;

    io_matrix base = {0}, queries = {0}, tmp = {0};
    int exit_code = CLI_EXIT_FAIL;
    void *d_base = NULL, *d_q = NULL, *ws = NULL;
    int64_t *d_idx = NULL, *h_idx = NULL;
    float *d_sc = NULL, *h_sc = NULL;
    ltk_status st;
    if (!load_vectors("base", base_path, &base) || !load_vectors("queries", query_path, &queries)) goto done;
    if (base.cols != queries.cols) {
        fprintf(stderr, "litetopk knn: dimension mismatch: base '%s' has D=%lld, queries '%s' have D=%lld\n",
                base_path, (long long)base.cols, query_path, (long long)queries.cols);
        goto done;
    }
    /* float16 stays float16 only when both sides are; everything else computes in float32. */
    ltk_dtype dtype = (base.elem == IO_ELEM_F16 && queries.elem == IO_ELEM_F16) ? LTK_DTYPE_F16 : LTK_DTYPE_F32;
    io_elem want_elem = dtype == LTK_DTYPE_F16 ? IO_ELEM_F16 : IO_ELEM_F32;
    io_matrix *mats[2] = {&base, &queries};
    for (int i = 0; i < 2; i++) {
        if (mats[i]->elem == want_elem) continue;
        st = io_convert(mats[i], want_elem, &tmp);
        if (st) {
            fprintf(stderr, "litetopk knn: %s\n", tool_last_error());
            goto done;
        }
        io_matrix_free(mats[i]);
        *mats[i] = tmp;
        memset(&tmp, 0, sizeof tmp);
    }
    warn_nonfinite("base", base_path, &base);
    warn_nonfinite("queries", query_path, &queries);
    const int64_t N = base.rows, B = queries.rows, D = base.cols;
    const size_t es = ltk_dtype_size(dtype);
    if (k > N && !quiet)
        fprintf(stderr, "litetopk knn: note: k=%lld exceeds the %lld base vectors; rows are padded with -1\n",
                (long long)k, (long long)N);
    /* Batches keep the materialize path's [batch, N] score buffer near 256 MiB. */
    if (batch <= 0) {
        batch = (int64_t)(256ll << 20) / (4 * N);
        if (batch < 64) batch = 64;
        if (batch > 65536) batch = 65536;
    }
    if (batch > B) batch = B;

    if (on_device) {
        st = devmem_clone(1, base.data, (size_t)(N * D) * es, &d_base);
        if (!st) st = devmem_alloc(1, (size_t)(batch * D) * es, &d_q);
        if (!st) st = devmem_alloc(1, (size_t)(batch * k) * sizeof(int64_t), (void **)&d_idx);
        if (!st) st = devmem_alloc(1, (size_t)(batch * k) * sizeof(float), (void **)&d_sc);
        if (st) {
            fprintf(stderr, "litetopk knn: %s\n", tool_last_error());
            goto done;
        }
    }
    h_idx = malloc((size_t)(B * k) * sizeof(int64_t));
    h_sc = malloc((size_t)(B * k) * sizeof(float));
    if (!h_idx || !h_sc) {
        fprintf(stderr, "litetopk knn: out of memory for %lld x %lld results\n", (long long)B, (long long)k);
        goto done;
    }

    ltk_exec exec;
    memset(&exec, 0, sizeof exec);
    exec.backend = backend;
    exec.algo = algo;
    exec.num_threads = (int32_t)threads;
    ltk_knn_args a;
    memset(&a, 0, sizeof a);
    a.B = batch, a.N = N, a.D = (int32_t)D, a.k = (int32_t)k, a.dtype = dtype, a.metric = metric;
    a.base = on_device ? d_base : base.data;
    a.queries = on_device ? d_q : queries.data; /* the batch buffers, for the size query */
    a.out_idx = on_device ? d_idx : h_idx;
    a.out_scores = on_device ? d_sc : h_sc;
    size_t ws_bytes = 0;
    st = ltk_knn_workspace_size(&a, &exec, &ws_bytes);
    if (st) {
        fprintf(stderr, "litetopk knn: %s: %s\n", ltk_status_str(st), ltk_last_error());
        goto done;
    }
    if (ws_bytes) {
        st = devmem_alloc(on_device, ws_bytes, &ws);
        if (st) {
            fprintf(stderr, "litetopk knn: workspace of %zu bytes: %s\n", ws_bytes, tool_last_error());
            goto done;
        }
        exec.workspace = ws, exec.workspace_bytes = ws_bytes;
    }
    const double t0 = devmem_now_s();
    double last_print = t0;
    const int64_t nbatches = (B + batch - 1) / batch;
    for (int64_t b0 = 0; b0 < B && !st; b0 += batch) {
        int64_t rows = B - b0 < batch ? B - b0 : batch;
        const char *qsrc = (const char *)queries.data + (size_t)(b0 * D) * es;
        a.B = rows;
        if (on_device) {
            st = devmem_upload(1, d_q, qsrc, (size_t)(rows * D) * es);
            if (st) break;
            a.queries = d_q, a.out_idx = d_idx, a.out_scores = d_sc;
        } else {
            a.queries = qsrc, a.out_idx = h_idx + b0 * k, a.out_scores = h_sc + b0 * k;
        }
        st = ltk_knn_topk(&a, &exec);
        if (st) {
            st = tool_fail(st, "ltk_knn_topk: %s: %s", ltk_status_str(st), ltk_last_error());
            break;
        }
        if (on_device) {
            st = devmem_download(1, h_idx + b0 * k, d_idx, (size_t)(rows * k) * sizeof(int64_t));
            if (!st) st = devmem_download(1, h_sc + b0 * k, d_sc, (size_t)(rows * k) * sizeof(float));
        }
        double now = devmem_now_s();
        if (!quiet && nbatches > 1 && (now - last_print >= 1.0 || b0 + rows == B)) {
            double done_frac = (double)(b0 + rows) / (double)B;
            fprintf(stderr, "knn: %lld/%lld queries (%.1f%%), %.1f s elapsed, ~%.1f s left\n", (long long)(b0 + rows),
                    (long long)B, 100.0 * done_frac, now - t0, (now - t0) * (1.0 - done_frac) / done_frac);
            last_print = now;
        }
    }
    if (st) {
        fprintf(stderr, "litetopk knn: %s\n", tool_last_error());
        goto done;
    }
    if (!quiet && nbatches > 1)
        fprintf(stderr, "knn: %lld queries x %lld base vectors (D=%lld, %s) in %.2f s on %s\n", (long long)B,
                (long long)N, (long long)D, cli_metric_name(metric), devmem_now_s() - t0, ltk_backend_name(backend));

    if (out_path) {
        io_matrix mi = {B, k, IO_ELEM_I64, h_idx}, ms = {B, k, IO_ELEM_F32, h_sc};
        char spath[4096];
        scores_path(out_path, out_fmt, spath, sizeof spath);
        st = io_write_format(out_path, out_fmt, &mi);
        if (!st) st = io_write_format(spath, out_fmt == IO_FORMAT_NPY ? IO_FORMAT_NPY : IO_FORMAT_FBIN, &ms);
        if (st) {
            fprintf(stderr, "litetopk knn: %s\n", tool_last_error());
            goto done;
        }
        if (!quiet) fprintf(stderr, "knn: wrote %s and %s\n", out_path, spath);
    } else {
        for (int64_t q = 0; q < B; q++) {
            printf("%lld:", (long long)q);
            for (int64_t j = 0; j < k; j++) printf(" %lld:%.7g", (long long)h_idx[q * k + j], (double)h_sc[q * k + j]);
            printf("\n");
        }
    }
    exit_code = CLI_EXIT_OK;
done:
    io_matrix_free(&base), io_matrix_free(&queries);
    devmem_free(on_device, ws);
    devmem_free(1, d_base), devmem_free(1, d_q), devmem_free(1, d_idx), devmem_free(1, d_sc);
    free(h_idx), free(h_sc);
    return exit_code;
}
