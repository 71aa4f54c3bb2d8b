/* Shared pieces of the `litetopk` command-line tool: option parsing, names of enums, JSON records,
 * result comparison. Exit codes: 0 success, 1 failure at run time (I/O, library error, an
 * exactness check that failed), 2 bad usage. */
#ifndef LTK_TOOLS_CLI_H
#define LTK_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "litetopk.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* ---- options ------------------------------------------------------------------------------ */
typedef enum cli_kind {
    CLI_FLAG, /* int, set to 1 */
    CLI_INT,  /* int64_t, range-checked; accepts K/M/G binary suffixes (64K = 65536) */
    CLI_STR,  /* const char * */
} cli_kind;

typedef struct cli_opt {
    const char *name;  /* "--base" */
    const char *alias; /* "-k", or NULL */
    cli_kind kind;
    void *dest;
    const char *metavar;
    const char *help;
    int64_t min, max;  /* CLI_INT only */
    int given;         /* set by cli_parse */
} cli_opt;

/* Parses argv[first..argc). Returns CLI_EXIT_OK, or CLI_EXIT_USAGE after printing a message
 * ("--help" prints the help to stdout and returns -1: the caller exits 0). */
int cli_parse(const char *cmd, const char *usage, const char *about, int argc, char **argv, int first, cli_opt *opts,
              int nopts);
void cli_print_help(FILE *f, const char *cmd, const char *usage, const char *about, const cli_opt *opts, int nopts);
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Parses an integer with optional K/M/G suffix; 0 on success. */
int cli_parse_int(const char *s, int64_t *out);

/* ---- names -------------------------------------------------------------------------------- */
int cli_parse_backend(const char *s, ltk_backend *out);
int cli_parse_algo(const char *s, ltk_algo *out);
int cli_parse_dtype(const char *s, ltk_dtype *out);
int cli_parse_metric(const char *s, ltk_metric *out);
const char *cli_algo_name(ltk_algo a);
const char *cli_dtype_name(ltk_dtype d);
const char *cli_metric_name(ltk_metric m);
/* Resolves AUTO, checks availability; prints a message and returns 0 when unusable. */
int cli_resolve_backend(const char *cmd, ltk_backend want, ltk_backend *out);

/* Git sha: $LTK_COMMIT, else the one recorded at build time, else "unknown". */
const char *cli_commit(void);
/* Bytes as "12.0 MiB". */
const char *cli_bytes(double bytes, char *buf, size_t cap);
/* A comparison in plain words, never a bare ratio: "fused is 1.19x faster than materialize",
 * "... slower than ...", "... as fast as ... (within 1%)". */
const char *cli_speed_words(double a_ms, const char *a, double b_ms, const char *b, char *buf, size_t cap);
/* "fused uses 15.2x less workspace than materialize", "... more ...", "... the same ...". */
const char *cli_size_words(double a_bytes, const char *a, double b_bytes, const char *b, const char *what, char *buf,
                           size_t cap);

/* ---- JSON lines --------------------------------------------------------------------------- */
typedef struct cli_json {
    char buf[4096];
    size_t len;
    int fields;
} cli_json;

/* "2026-12-01T19:53:30Z" */
void cli_utc_now(char *buf, size_t cap);
void cli_json_begin(cli_json *j);
void cli_json_str(cli_json *j, const char *key, const char *value);
void cli_json_int(cli_json *j, const char *key, int64_t value);
void cli_json_num(cli_json *j, const char *key, double value);
void cli_json_bool(cli_json *j, const char *key, int value);
void cli_json_end(cli_json *j);
/* Appends the record as one line; 0 on success (message printed otherwise). */
int cli_json_append(const char *path, const cli_json *j);

/* ---- results ------------------------------------------------------------------------------ */
/* Compares two top-k outputs row by row as SETS of (index, score bits), canonicalised by the
 * ORDER of litetopk.h, so sorted and unsorted outputs compare alike. Indices are int32 or int64
 * (idx_size 4 or 8). Returns the number of differing rows; the first one is described in `what`. */
int64_t cli_compare_topk(int64_t rows, int32_t k, int idx_size, const void *idx_a, const float *score_a,
                         const void *idx_b, const float *score_b, char *what, size_t what_cap);

/* Mean of a per-row counter over the rows that were scanned (rows - short_rows). */
double cli_stats_mean(int64_t total, const ltk_stats *s);

#endif
