/* `litetopk bench dsa|knn|select`: the fused path against the materialize(+select) path of the same
 * backend on the same inputs, in one process. Each operation is one file (bench-dsa.c, bench-knn.c,
 * bench-select.c) over the shared runner of bench.c. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "commands.h"

static const char bench_usage[] =
    "bench dsa|knn|select|decode|blocks|merge [shape options] [--backend auto|cpu|cuda|ref] [--algos fused,materialize,score_only]\n"
    "                      [--reps N] [--json FILE]";
static const char bench_about[] =
    "Runs the fused path and the materialize(+select) path of one backend on the same generated inputs,\n"
    "checks that they agree bit for bit, then reports the median of --reps timed runs (CUDA: cudaEvents on\n"
    "device buffers; CPU: a monotonic clock) and appends one JSON object per line and algo to --json.\n"
    "  bench dsa     the DSA indexer: T queries at the end of an S-key causal context, in calls of --chunk\n"
    "                rows with the hot set carried between calls (--cold: none)\n"
    "  bench knn     brute-force kNN on clustered unit-norm embeddings (or --base/--queries files);\n"
    "                --dump PREFIX writes PREFIX.base.fbin and PREFIX.queries.fbin (--reps 0: only that);\n"
    "                on CUDA also the device copy rate and each time over one read of the corpus\n"
    "  bench select  top-k of a given score matrix (--dist dsa|normal|offset|ties)\n"
    "  bench decode  one decode step of B requests over a paged FP8 cache (next_n rows a request)\n"
    "  bench blocks  DeepSeek-V4.1's candidate indexer: block publication, the listed blocks' top-k, and the\n"
    "                plain indexer beside them\n"
    "  bench merge   the exact merge of G ranks' local top-k lists (key sharding) into the global top-k\n"
    "Run 'litetopk bench <op> --help' for the options of one operation.";

int cmd_bench(int argc, char **argv) {
    if (argc < 3 || !strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) {
        cli_print_help(argc < 3 ? stderr : stdout, "bench", bench_usage, bench_about, NULL, 0);
        return argc < 3 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[2], "dsa")) return bench_dsa_main(argc, argv);
    if (!strcmp(argv[2], "knn")) return bench_knn_main(argc, argv);
    if (!strcmp(argv[2], "select")) return bench_select_main(argc, argv);
    if (!strcmp(argv[2], "decode")) return bench_decode_main(argc, argv);
    if (!strcmp(argv[2], "blocks")) return bench_blocks_main(argc, argv);
    if (!strcmp(argv[2], "merge")) return bench_merge_main(argc, argv);
    return cli_usage_error("bench", "unknown operation '%s' (dsa, knn, select, decode, blocks, merge)", argv[2]);
}
