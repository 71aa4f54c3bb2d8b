/* Fuzz target for the file readers in io.c. The first byte picks the format, the rest is the file.
 * Oracles: no crash / sanitizer report; a failure leaves an empty matrix and a message; a success
 * holds consistent data that survives a write + read round trip bit for bit.
 * Build with -DLTK_FUZZ=ON (clang, libFuzzer) or link fuzz-driver.c to replay files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what) {
    fprintf(stderr, "fuzz-io: invariant violated: %s (%s)\n", what, tool_last_error());
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    io_format fmt = (io_format)(1 + data[0] % (IO_FORMAT_COUNT_ - 1));
    const uint8_t *body = data + 1;
    size_t n = size - 1;
    static unsigned char dummy[1];
    /* fmemopen rejects a zero-length buffer on some libcs: give it one byte but claim size 0. */
    FILE *f = fmemopen(n ? (void *)body : (void *)dummy, n ? n : 1, "rb");
    if (!f) return 0;
    io_matrix m;
    ltk_status st = io_read_stream(f, (int64_t)n, fmt, "fuzz", &m);
    fclose(f);
    if (st != LTK_OK) {
        if (m.data || m.rows || m.cols) die("failure left data behind");
        if (!tool_last_error()[0]) die("failure without a message");
        if (st != LTK_EFORMAT && st != LTK_EUNSUPPORTED && st != LTK_ENOMEM && st != LTK_EIO) die("unexpected status");
        return 0;
    }
    size_t es = io_elem_size(m.elem), bytes = (size_t)(m.rows * m.cols) * es;
    if (m.rows < 0 || m.cols < 0 || es == 0 || (bytes && !m.data) || bytes > n) die("inconsistent matrix");
    /* Touch every byte so a short allocation shows up under ASan. */
    unsigned sum = 0;
    for (size_t i = 0; i < bytes; i++) sum += ((const unsigned char *)m.data)[i];
    (void)sum;

    /* Round trip through a file of the same format (npy re-encodes the header canonically). */
    if (bytes <= 1 << 16 && !(m.rows > 0 && m.cols == 0)) {
        char path[128];
        snprintf(path, sizeof path, "/tmp/ltk-fuzz-io-%d.%s", (int)getpid(), io_format_name(fmt));
        io_matrix back;
        if (io_write_format(path, fmt, &m) != LTK_OK) die("cannot write back a matrix that was read");
        if (io_read_format(path, fmt, &back) != LTK_OK) die("cannot read back what was written");
        int vecs = fmt == IO_FORMAT_FVECS || fmt == IO_FORMAT_BVECS || fmt == IO_FORMAT_IVECS;
        if (back.rows != m.rows || back.elem != m.elem || (back.cols != m.cols && !(vecs && m.rows == 0)) ||
            (bytes && memcmp(back.data, m.data, bytes) != 0))
            die("round trip changed the matrix");
        io_matrix_free(&back);
        unlink(path);
    }
    /* Conversions must not fail for float targets. */
    io_matrix conv;
    if (io_convert(&m, IO_ELEM_F32, &conv) != LTK_OK) die("conversion to float32 failed");
    io_matrix_free(&conv);
    io_matrix_free(&m);
    return 0;
}
