/* Vector and matrix files for the litetopk tool.
 *
 *   .fvecs .bvecs .ivecs   per row: int32 dim, then dim float32 / uint8 / int32 (TEXMEX / ANN_SIFT)
 *   .fbin  .u8bin .ibin    int32 rows, int32 cols, then rows*cols float32 / uint8 / int32
 *                          (big-ann-benchmarks)
 *   .npy                   NumPy 1.0-3.0, 2-D, C order, little-endian float32 / float16 / uint8 /
 *                          int32 / int64
 *
 * All multi-byte values are little-endian. Every function returns an ltk_status and leaves a message
 * naming the file in tool_last_error(): LTK_EIO for open/read/write failures, LTK_EFORMAT for
 * malformed or truncated content, LTK_EUNSUPPORTED for well-formed files this tool does not take
 * (e.g. a float64 or Fortran-order .npy), LTK_EINVAL for an unknown extension or an element type
 * the format cannot hold, LTK_ENOMEM when the data does not fit in memory.
 * An empty .fvecs/.bvecs/.ivecs file is a valid matrix with 0 rows and 0 columns.
 */
#ifndef LTK_TOOLS_IO_H
#define LTK_TOOLS_IO_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "litetopk.h"

typedef enum io_elem {
    IO_ELEM_F32 = 0,
    IO_ELEM_F16 = 1,
    IO_ELEM_U8 = 2,
    IO_ELEM_I32 = 3,
    IO_ELEM_I64 = 4,
} io_elem;

typedef enum io_format {
    IO_FORMAT_UNKNOWN = 0,
    IO_FORMAT_FVECS,
    IO_FORMAT_BVECS,
    IO_FORMAT_IVECS,
    IO_FORMAT_FBIN,
    IO_FORMAT_U8BIN,
    IO_FORMAT_IBIN,
    IO_FORMAT_NPY,
    IO_FORMAT_COUNT_
} io_format;

/* A dense row-major matrix owning its data (malloc'ed; NULL when empty). */
typedef struct io_matrix {
    int64_t rows, cols;
    io_elem elem;
    void *data;
} io_matrix;

size_t io_elem_size(io_elem elem);
const char *io_elem_name(io_elem elem);
/* From the file name's extension (case-insensitive); IO_FORMAT_UNKNOWN if none matches. */
io_format io_format_from_path(const char *path);
const char *io_format_name(io_format fmt);
/* "fvecs, bvecs, ..." for messages. */
const char *io_format_list(void);

/* Reads a whole file; the format comes from the extension. On failure `out` is left empty. */
ltk_status io_read(const char *path, io_matrix *out);
ltk_status io_read_format(const char *path, io_format fmt, io_matrix *out);
/* Reads `size` bytes of `fmt` from a stream positioned at the start (fuzzing, tests).
 * `name` is only used in messages. */
ltk_status io_read_stream(FILE *f, int64_t size, io_format fmt, const char *name, io_matrix *out);

/* Writes a matrix; the format comes from the extension. fvecs/fbin take F32, bvecs/u8bin U8,
 * ivecs/ibin I32 (I64 is narrowed when every value fits), npy any element type. */
ltk_status io_write(const char *path, const io_matrix *m);
ltk_status io_write_format(const char *path, io_format fmt, const io_matrix *m);

/* Converts to another element type into a new matrix. Integer targets reject values that do not fit;
 * float targets round (f16 to nearest even). */
ltk_status io_convert(const io_matrix *in, io_elem to, io_matrix *out);

void io_matrix_free(io_matrix *m);

#endif
