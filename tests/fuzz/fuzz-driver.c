/* Plain driver for the fuzz targets when libFuzzer is not available (gcc builds, ctest):
 *   fuzz-xxx [--random N] [--seed S] [--keep FILE] [FILE|DIR]...
 * --keep writes each input to FILE before running it, so the one that crashed can be replayed.
 * replays every file (directories: every regular file inside), then N pseudo-random inputs: half of
 * them mutations of the replayed files (bytes flipped, truncated, extended), half fresh bytes. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t **seeds;
static size_t *seed_sizes, nseeds;

static void keep_seed(const uint8_t *data, size_t n) {
    uint8_t **s2 = realloc(seeds, sizeof *seeds * (nseeds + 1));
    size_t *z2 = realloc(seed_sizes, sizeof *seed_sizes * (nseeds + 1));
    if (!s2 || !z2) return;
    seeds = s2, seed_sizes = z2;
    seeds[nseeds] = malloc(n ? n : 1);
    if (!seeds[nseeds]) return;
    memcpy(seeds[nseeds], data, n);
    seed_sizes[nseeds++] = n;
}

static const char *keep_path;

static void run_one(const uint8_t *data, size_t n) {
    if (keep_path) {
        FILE *f = fopen(keep_path, "wb");
        if (f) {
            if (n) fwrite(data, 1, n, f);
            fclose(f);
        }
    }
    LLVMFuzzerTestOneInput(data, n);
}

static unsigned long long next_rand(unsigned long long *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *bigger = realloc(buf, cap * 2);
            if (!bigger) break;
            buf = bigger, cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return 1;
    /* Exact-size copy so out-of-bounds reads are caught by sanitizers. */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    run_one(exact, n);
    keep_seed(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv) {
    long long random_n = 0;
    unsigned long long seed = 0x2545f4914f6cdd1dull;
    int files = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--random") && i + 1 < argc) {
            random_n = atoll(argv[++i]);
            continue;
        }
        if (!strcmp(argv[i], "--keep") && i + 1 < argc) {
            keep_path = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0) | 1;
            continue;
        }
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.') continue;
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
                if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) errors += replay_file(path), files++;
            }
            if (d) closedir(d);
        } else {
            errors += replay_file(argv[i]), files++;
        }
    }
    for (long long r = 0; r < random_n; r++) {
        unsigned long long pick = next_rand(&seed);
        size_t n;
        uint8_t *buf;
        if (nseeds && pick % 2) {
            size_t which = (size_t)(next_rand(&seed) % nseeds), base_n = seed_sizes[which];
            n = base_n;
            switch (next_rand(&seed) % 4) {
            case 0: n = base_n ? (size_t)(next_rand(&seed) % base_n) : 0; break; /* truncate */
            case 1: n = base_n + 1 + (size_t)(next_rand(&seed) % 16); break;      /* extend */
            default: break;
            }
            buf = malloc(n ? n : 1);
            for (size_t i = 0; i < n; i++) buf[i] = i < base_n ? seeds[which][i] : (uint8_t)next_rand(&seed);
            int flips = 1 + (int)(next_rand(&seed) % 4);
            for (int i = 0; i < flips && n; i++) buf[next_rand(&seed) % n] ^= (uint8_t)(1u << (next_rand(&seed) % 8));
        } else {
            n = (size_t)(next_rand(&seed) % 600);
            buf = malloc(n ? n : 1);
            for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(next_rand(&seed) >> 24);
        }
        run_one(buf, n);
        free(buf);
    }
    for (size_t i = 0; i < nseeds; i++) free(seeds[i]);
    free(seeds), free(seed_sizes);
    printf("%s: replayed %d files and %lld random inputs\n", argv[0], files, random_n);
    return errors ? 1 : 0;
}
