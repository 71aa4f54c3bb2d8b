/* The `litetopk` command-line tool: demo, knn, bench, info. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "devmem.h"

static void print_version(void) {
    printf("litetopk %d.%d.%d (commit %s)\n", LTK_VERSION_MAJOR, LTK_VERSION_MINOR, LTK_VERSION_PATCH, cli_commit());
}

/* docs/file-formats.md in short. */
static void print_formats(void) {
    printf("Files (the extension picks the format; little-endian; regular files only):\n"
           "  .fvecs .bvecs .ivecs  per row: int32 dim, then dim float32 / uint8 / int32 values (TEXMEX)\n"
           "  .fbin  .u8bin .ibin   int32 rows, int32 cols, then rows*cols float32 / uint8 / int32, row-major\n"
           "                        (big-ann-benchmarks)\n"
           "  .npy                  NumPy 1.0-3.0, 2-D, C order: float32 / float16 / uint8 in, int64 / float32 out\n"
           "knn reads vectors from .fvecs .bvecs .fbin .u8bin .npy (uint8 becomes float32; float16 stays\n"
           "float16 when both inputs are). --out STEM.ivecs|.ibin (int32) or STEM.npy (int64) gets the\n"
           "indices, best first, ties by the lower index, -1 padding; the scores go to STEM.scores.fbin\n"
           "(STEM.scores.npy). bench --dump PREFIX writes PREFIX.base.fbin and PREFIX.queries.fbin.\n"
           "--json FILE appends JSON Lines (fields: bench/README.md). Details: docs/file-formats.md.\n");
}

static void print_help(FILE *f) {
    fprintf(f,
            "usage: litetopk <command> [options]\n"
            "\n"
            "Exact fused score + top-k (LiteTopK): DSA indexer, brute-force kNN, top-k selection.\n"
            "\n"
            "commands:\n"
            "  demo    DSA indexer prefill, fused vs materialize side by side, checked bit for bit\n"
            "  knn     k nearest neighbours of query vectors in a base file (.fvecs .bvecs .fbin .u8bin .npy)\n"
            "  prefill whole-sequence indexer (DeepSeek V3.2 / V4 CSA) in chunks, fused vs materialize\n"
            "  bench   benchmarks: bench dsa | bench knn | bench select, JSON lines with --json\n"
            "  info    backends, devices and build options\n"
            "  version print the version\n"
            "  help    this help; 'litetopk help <command>' or 'litetopk <command> --help' for details,\n"
            "          'litetopk help formats' for the files knn reads and writes\n"
            "\n"
            "Backends: auto (CUDA when built and a GPU is present, else cpu; env LTK_BACKEND overrides), cpu,\n"
            "cuda, ref (slow oracle). Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int cmd_info(int argc, char **argv) {
    if (argc > 2) {
        if (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help")) {
            printf("usage: litetopk info\n\nPrints ltk_info(): build options, backends and devices.\n");
            return CLI_EXIT_OK;
        }
        return cli_usage_error("info", "unexpected argument '%s'", argv[2]);
    }
    char buf[8192], dev[256];
    ltk_status st = ltk_info(buf, sizeof buf);
    if (st) {
        fprintf(stderr, "litetopk info: %s: %s\n", ltk_status_str(st), ltk_last_error());
        return CLI_EXIT_FAIL;
    }
    fputs(buf, stdout);
    devmem_device_name(0, dev, sizeof dev);
    printf("tool: commit %s, cpu '%s'", cli_commit(), dev);
    if (devmem_device_count() > 0) {
        devmem_device_name(1, dev, sizeof dev);
        printf(", gpu '%s' (%d device%s)", dev, devmem_device_count(), devmem_device_count() > 1 ? "s" : "");
    }
    printf("\n");
    return CLI_EXIT_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    char *help_argv[4] = {NULL, NULL, NULL, NULL}; /* 'help X' is run as 'X --help' */
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "help")) {
        if (argc < 3) {
            print_help(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[2], "formats")) {
            print_formats();
            return CLI_EXIT_OK;
        }
        help_argv[0] = argv[0], help_argv[1] = argv[2], help_argv[2] = "--help";
        argv = help_argv;
        argc = 3;
        cmd = argv[1];
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        print_version();
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "demo")) return cmd_demo(argc, argv);
    if (!strcmp(cmd, "knn")) return cmd_knn(argc, argv);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc, argv);
    if (!strcmp(cmd, "info")) return cmd_info(argc, argv);
    if (!strcmp(cmd, "prefill")) return cmd_prefill(argc, argv);
    fprintf(stderr, "litetopk: unknown command '%s'\n\n", cmd);
    print_help(stderr);
    return CLI_EXIT_USAGE;
}
