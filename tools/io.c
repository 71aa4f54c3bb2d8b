/* Readers and writers for the vector file formats in io.h.
 * Every size in a header is checked against the real file size before anything is allocated, so a
 * corrupt header cannot make us allocate or read past the end. */
#define _FILE_OFFSET_BITS 64
#include "io.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "num.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the file readers assume a little-endian host"
#endif

size_t io_elem_size(io_elem elem) {
    switch (elem) {
    case IO_ELEM_F32: return 4;
    case IO_ELEM_F16: return 2;
    case IO_ELEM_U8: return 1;
    case IO_ELEM_I32: return 4;
    case IO_ELEM_I64: return 8;
    }
    return 0;
}

const char *io_elem_name(io_elem elem) {
    switch (elem) {
    case IO_ELEM_F32: return "float32";
    case IO_ELEM_F16: return "float16";
    case IO_ELEM_U8: return "uint8";
    case IO_ELEM_I32: return "int32";
    case IO_ELEM_I64: return "int64";
    }
    return "unknown";
}

static const struct {
    const char *ext;
    io_format fmt;
} format_table[] = {
    {".fvecs", IO_FORMAT_FVECS}, {".bvecs", IO_FORMAT_BVECS}, {".ivecs", IO_FORMAT_IVECS},
    {".fbin", IO_FORMAT_FBIN},   {".u8bin", IO_FORMAT_U8BIN}, {".ibin", IO_FORMAT_IBIN},
    {".npy", IO_FORMAT_NPY},
};
#define FORMAT_COUNT (sizeof format_table / sizeof format_table[0])

io_format io_format_from_path(const char *path) {
    if (!path) return IO_FORMAT_UNKNOWN;
    size_t n = strlen(path);
    for (size_t i = 0; i < FORMAT_COUNT; i++) {
        size_t e = strlen(format_table[i].ext);
        if (n > e && strcasecmp(path + n - e, format_table[i].ext) == 0) return format_table[i].fmt;
    }
    return IO_FORMAT_UNKNOWN;
}

const char *io_format_name(io_format fmt) {
    for (size_t i = 0; i < FORMAT_COUNT; i++)
        if (format_table[i].fmt == fmt) return format_table[i].ext + 1;
    return "unknown";
}

const char *io_format_list(void) { return ".fvecs, .bvecs, .ivecs, .fbin, .u8bin, .ibin, .npy"; }

void io_matrix_free(io_matrix *m) {
    if (!m) return;
    free(m->data);
    m->data = NULL;
    m->rows = m->cols = 0;
}

/* Element type each non-npy format stores. */
static io_elem format_elem(io_format fmt) {
    switch (fmt) {
    case IO_FORMAT_FVECS:
    case IO_FORMAT_FBIN: return IO_ELEM_F32;
    case IO_FORMAT_BVECS:
    case IO_FORMAT_U8BIN: return IO_ELEM_U8;
    default: return IO_ELEM_I32;
    }
}

/* rows*cols*esize in bytes, or -1 when it does not fit in int64/size_t. */
static int64_t matrix_bytes(int64_t rows, int64_t cols, size_t esize) {
    if (rows < 0 || cols < 0) return -1;
    if (rows == 0 || cols == 0) return 0;
    if (rows > INT64_MAX / cols) return -1;
    int64_t n = rows * cols;
    if (n > INT64_MAX / (int64_t)esize) return -1;
    n *= (int64_t)esize;
    if ((uint64_t)n > (uint64_t)SIZE_MAX) return -1;
    return n;
}

static ltk_status read_exact(FILE *f, void *dst, size_t bytes, const char *name, const char *what) {
    if (bytes == 0) return LTK_OK;
    size_t got = fread(dst, 1, bytes, f);
    if (got == bytes) return LTK_OK;
    if (ferror(f)) return tool_fail(LTK_EIO, "%s: read error in %s: %s", name, what, strerror(errno));
    return tool_fail(LTK_EFORMAT, "%s: truncated %s (%zu of %zu bytes present)", name, what, got, bytes);
}

static int32_t load_i32(const unsigned char *p) {
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    int32_t v;
    memcpy(&v, &u, 4);
    return v;
}

/* ---- *vecs -------------------------------------------------------------------------------- */
static ltk_status read_vecs(FILE *f, int64_t size, io_format fmt, const char *name, io_matrix *out) {
    io_elem elem = format_elem(fmt);
    size_t esize = io_elem_size(elem);
    out->elem = elem;
    if (size == 0) return LTK_OK; /* empty file: 0 vectors */
    unsigned char hdr[4];
    ltk_status st = read_exact(f, hdr, 4, name, "dimension of vector 0");
    if (st) return st;
    int32_t dim = load_i32(hdr);
    if (dim <= 0) return tool_fail(LTK_EFORMAT, "%s: vector 0 has dimension %d (must be >= 1)", name, dim);
    int64_t record = 4 + (int64_t)dim * (int64_t)esize;
    if (size % record != 0)
        return tool_fail(LTK_EFORMAT,
                         "%s: size %lld is not a multiple of the record size %lld (4 + %d x %zu bytes): "
                         "truncated or mixed dimensions",
                         name, (long long)size, (long long)record, dim, esize);
    int64_t rows = size / record;
    int64_t bytes = matrix_bytes(rows, dim, esize);
    if (bytes < 0) return tool_fail(LTK_ENOMEM, "%s: %lld x %d does not fit in memory", name, (long long)rows, dim);
    unsigned char *data = malloc((size_t)bytes);
    if (!data) return tool_fail(LTK_ENOMEM, "%s: cannot allocate %lld bytes", name, (long long)bytes);
    size_t row_bytes = (size_t)dim * esize;
    for (int64_t r = 0; r < rows; r++) {
        if (r > 0) {
            st = read_exact(f, hdr, 4, name, "vector header");
            if (st) goto fail;
            int32_t d = load_i32(hdr);
            if (d != dim) {
                st = tool_fail(LTK_EFORMAT, "%s: vector %lld has dimension %d, vector 0 has %d", name, (long long)r, d,
                               dim);
                goto fail;
            }
        }
        st = read_exact(f, data + (size_t)r * row_bytes, row_bytes, name, "vector data");
        if (st) goto fail;
    }
    out->rows = rows;
    out->cols = dim;
    out->data = data;
    return LTK_OK;
fail:
    free(data);
    return st;
}

/* ---- *bin --------------------------------------------------------------------------------- */
static ltk_status read_payload(FILE *f, int64_t avail, int64_t rows, int64_t cols, io_elem elem, const char *name,
                               io_matrix *out) {
    size_t esize = io_elem_size(elem);
    int64_t bytes = matrix_bytes(rows, cols, esize);
    if (bytes < 0)
        return tool_fail(LTK_EFORMAT, "%s: shape %lld x %lld is too large", name, (long long)rows, (long long)cols);
    if (bytes > avail)
        return tool_fail(LTK_EFORMAT, "%s: truncated: shape %lld x %lld needs %lld data bytes, the file has %lld", name,
                         (long long)rows, (long long)cols, (long long)bytes, (long long)avail);
    if (bytes < avail)
        return tool_fail(LTK_EFORMAT, "%s: %lld trailing bytes after the %lld x %lld %s data", name,
                         (long long)(avail - bytes), (long long)rows, (long long)cols, io_elem_name(elem));
    void *data = NULL;
    if (bytes > 0) {
        data = malloc((size_t)bytes);
        if (!data) return tool_fail(LTK_ENOMEM, "%s: cannot allocate %lld bytes", name, (long long)bytes);
        ltk_status st = read_exact(f, data, (size_t)bytes, name, "data");
        if (st) {
            free(data);
            return st;
        }
    }
    out->rows = rows;
    out->cols = cols;
    out->elem = elem;
    out->data = data;
    return LTK_OK;
}

static ltk_status read_bin(FILE *f, int64_t size, io_format fmt, const char *name, io_matrix *out) {
    unsigned char hdr[8];
    if (size < 8)
        return tool_fail(LTK_EFORMAT, "%s: %lld bytes is too short for the 8-byte rows/cols header", name,
                         (long long)size);
    ltk_status st = read_exact(f, hdr, 8, name, "header");
    if (st) return st;
    int32_t rows = load_i32(hdr), cols = load_i32(hdr + 4);
    if (rows < 0 || cols < 0) return tool_fail(LTK_EFORMAT, "%s: negative shape %d x %d in the header", name, rows, cols);
    if (rows > 0 && cols == 0) return tool_fail(LTK_EFORMAT, "%s: %d rows of dimension 0", name, rows);
    return read_payload(f, size - 8, rows, cols, format_elem(fmt), name, out);
}

/* ---- npy ---------------------------------------------------------------------------------- */
/* A tiny parser for the header dict, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } */
typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Quoted string ('..' or ".."), copied to buf. */
static int parse_str(cursor *c, char *buf, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= cap) return 0;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    buf[n] = '\0';
    return 1;
}

static int parse_word(cursor *c, const char *word) {
    skip_ws(c);
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* Tuple of non-negative ints; returns the count or -1. */
static int parse_shape(cursor *c, int64_t *dims, int cap) {
    if (!eat(c, '(')) return -1;
    int n = 0;
    for (;;) {
        if (eat(c, ')')) return n;
        skip_ws(c);
        if (c->p >= c->end || !isdigit((unsigned char)*c->p)) return -1;
        int64_t v = 0;
        while (c->p < c->end && isdigit((unsigned char)*c->p)) {
            int digit = *c->p++ - '0';
            if (v > (INT64_MAX - digit) / 10) return -1;
            v = v * 10 + digit;
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 long suffix */
        if (n >= cap) return -1;
        dims[n++] = v;
        if (!eat(c, ',')) {
            if (eat(c, ')')) return n;
            return -1;
        }
    }
}

static ltk_status read_npy(FILE *f, int64_t size, const char *name, io_matrix *out) {
    unsigned char pre[12];
    if (size < 10) return tool_fail(LTK_EFORMAT, "%s: %lld bytes is too short for a .npy header", name, (long long)size);
    ltk_status st = read_exact(f, pre, 10, name, "npy preamble");
    if (st) return st;
    if (memcmp(pre, "\x93NUMPY", 6) != 0) return tool_fail(LTK_EFORMAT, "%s: missing the \\x93NUMPY magic", name);
    int major = pre[6];
    int64_t hlen, consumed;
    if (major == 1) {
        hlen = (int64_t)pre[8] | (int64_t)pre[9] << 8;
        consumed = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return tool_fail(LTK_EFORMAT, "%s: truncated npy %d.x preamble", name, major);
        st = read_exact(f, pre + 10, 2, name, "npy preamble");
        if (st) return st;
        hlen = (int64_t)(uint32_t)load_i32(pre + 8);
        consumed = 12;
    } else {
        return tool_fail(LTK_EUNSUPPORTED, "%s: npy format version %d.%d is not supported (1.0-3.0)", name, major,
                         pre[7]);
    }
    if (hlen > size - consumed)
        return tool_fail(LTK_EFORMAT, "%s: truncated: header length %lld exceeds the file", name, (long long)hlen);
    if (hlen > (1 << 20)) return tool_fail(LTK_EFORMAT, "%s: implausible header length %lld", name, (long long)hlen);
    char *hdr = malloc((size_t)hlen + 1);
    if (!hdr) return tool_fail(LTK_ENOMEM, "%s: cannot allocate the header", name);
    st = read_exact(f, hdr, (size_t)hlen, name, "npy header");
    if (st) {
        free(hdr);
        return st;
    }
    hdr[hlen] = '\0';

    cursor c = {hdr, hdr + hlen};
    char descr[32] = "", key[32];
    int fortran = -1, ndim = -1;
    int64_t dims[8];
    int ok = eat(&c, '{');
    while (ok && !eat(&c, '}')) {
        ok = parse_str(&c, key, sizeof key) && eat(&c, ':');
        if (!ok) break;
        if (!strcmp(key, "descr")) ok = parse_str(&c, descr, sizeof descr);
        else if (!strcmp(key, "fortran_order")) {
            if (parse_word(&c, "True")) fortran = 1;
            else if (parse_word(&c, "False")) fortran = 0;
            else ok = 0;
        } else if (!strcmp(key, "shape")) {
            ndim = parse_shape(&c, dims, 8);
            ok = ndim >= 0;
        } else ok = 0;
        if (ok && !eat(&c, ',')) ok = eat(&c, '}') ? (c.p--, 1) : 0; /* last entry may omit the comma */
    }
    skip_ws(&c);
    if (ok && c.p != c.end) ok = 0;
    free(hdr);
    if (!ok || !descr[0] || fortran < 0 || ndim < 0)
        return tool_fail(LTK_EFORMAT, "%s: malformed npy header (expected descr, fortran_order and shape)", name);

    io_elem elem;
    if (!strcmp(descr, "<f4")) elem = IO_ELEM_F32;
    else if (!strcmp(descr, "<f2")) elem = IO_ELEM_F16;
    else if (!strcmp(descr, "|u1") || !strcmp(descr, "<u1") || !strcmp(descr, "u1")) elem = IO_ELEM_U8;
    else if (!strcmp(descr, "<i4")) elem = IO_ELEM_I32;
    else if (!strcmp(descr, "<i8")) elem = IO_ELEM_I64;
    else
        return tool_fail(LTK_EUNSUPPORTED,
                         "%s: npy dtype '%s' is not supported (float32 '<f4', float16 '<f2', uint8 '|u1', int32 "
                         "'<i4', int64 '<i8'); convert with arr.astype('float32')",
                         name, descr);
    if (fortran) return tool_fail(LTK_EUNSUPPORTED, "%s: Fortran-order arrays are not supported (use np.ascontiguousarray)", name);
    if (ndim != 2) return tool_fail(LTK_EUNSUPPORTED, "%s: a %d-D array; expected 2-D (rows, dim)", name, ndim);
    return read_payload(f, size - consumed - hlen, dims[0], dims[1], elem, name, out);
}

ltk_status io_read_stream(FILE *f, int64_t size, io_format fmt, const char *name, io_matrix *out) {
    if (!out) return tool_fail(LTK_EINVAL, "io_read_stream: out is NULL");
    memset(out, 0, sizeof *out);
    if (!f || size < 0) return tool_fail(LTK_EINVAL, "%s: no stream or unknown size", name ? name : "(stream)");
    if (!name) name = "(stream)";
    switch (fmt) {
    case IO_FORMAT_FVECS:
    case IO_FORMAT_BVECS:
    case IO_FORMAT_IVECS: return read_vecs(f, size, fmt, name, out);
    case IO_FORMAT_FBIN:
    case IO_FORMAT_U8BIN:
    case IO_FORMAT_IBIN: return read_bin(f, size, fmt, name, out);
    case IO_FORMAT_NPY: return read_npy(f, size, name, out);
    default: break;
    }
    return tool_fail(LTK_EINVAL, "%s: unknown file format (expected one of %s)", name, io_format_list());
}

ltk_status io_read_format(const char *path, io_format fmt, io_matrix *out) {
    if (!out) return tool_fail(LTK_EINVAL, "io_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path) return tool_fail(LTK_EINVAL, "io_read: path is NULL");
    if (fmt == IO_FORMAT_UNKNOWN)
        return tool_fail(LTK_EINVAL, "%s: unknown file extension (expected one of %s)", path, io_format_list());
    /* Non-blocking open, then a regular-file check before any read: a FIFO with no writer would
     * block in open() and a device (a symlink to /dev/zero) has no size to trust. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tool_fail(LTK_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return tool_fail(LTK_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        const char *kind = S_ISFIFO(sb.st_mode)  ? "a FIFO"
                           : S_ISCHR(sb.st_mode) ? "a character device"
                           : S_ISBLK(sb.st_mode) ? "a block device"
                           : S_ISDIR(sb.st_mode) ? "a directory"
                           : S_ISSOCK(sb.st_mode) ? "a socket"
                                                  : "not a regular file";
        close(fd);
        return tool_fail(LTK_EIO, "'%s' is %s: the readers take regular files only (write the data to a file first)",
                         path, kind);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return tool_fail(LTK_EIO, "cannot open '%s': %s", path, strerror(errno));
    }
    ltk_status st;
    off_t size = -1;
    if (fseeko(f, 0, SEEK_END) == 0) size = ftello(f);
    if (size < 0 || fseeko(f, 0, SEEK_SET) != 0) {
        st = tool_fail(LTK_EIO, "%s: cannot determine the file size (not a regular file?)", path);
    } else {
        st = io_read_stream(f, (int64_t)size, fmt, path, out);
    }
    fclose(f);
    return st;
}

ltk_status io_read(const char *path, io_matrix *out) { return io_read_format(path, io_format_from_path(path), out); }

/* ---- writers ------------------------------------------------------------------------------ */
static void store_i32(unsigned char *p, int32_t v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    p[0] = (unsigned char)u, p[1] = (unsigned char)(u >> 8), p[2] = (unsigned char)(u >> 16),
    p[3] = (unsigned char)(u >> 24);
}

static ltk_status write_all(FILE *f, const void *src, size_t bytes, const char *path) {
    if (bytes && fwrite(src, 1, bytes, f) != bytes)
        return tool_fail(LTK_EIO, "%s: write failed: %s", path, strerror(errno));
    return LTK_OK;
}

static ltk_status write_body(FILE *f, io_format fmt, const io_matrix *m, const char *path) {
    size_t row_bytes = (size_t)m->cols * io_elem_size(m->elem);
    unsigned char hdr[128];
    ltk_status st = LTK_OK;
    switch (fmt) {
    case IO_FORMAT_FVECS:
    case IO_FORMAT_BVECS:
    case IO_FORMAT_IVECS:
        store_i32(hdr, (int32_t)m->cols);
        for (int64_t r = 0; r < m->rows && st == LTK_OK; r++) {
            st = write_all(f, hdr, 4, path);
            if (!st) st = write_all(f, (const unsigned char *)m->data + (size_t)r * row_bytes, row_bytes, path);
        }
        return st;
    case IO_FORMAT_FBIN:
    case IO_FORMAT_U8BIN:
    case IO_FORMAT_IBIN:
        store_i32(hdr, (int32_t)m->rows);
        store_i32(hdr + 4, (int32_t)m->cols);
        st = write_all(f, hdr, 8, path);
        break;
    case IO_FORMAT_NPY: {
        static const char *descr[] = {"<f4", "<f2", "|u1", "<i4", "<i8"};
        char dict[96];
        int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%lld, %lld), }",
                         descr[m->elem], (long long)m->rows, (long long)m->cols);
        /* Pad with spaces so the data starts at a multiple of 64 bytes, newline last (the spec's layout). */
        size_t total = ((size_t)10 + (size_t)n + 1 + 63) / 64 * 64;
        size_t hlen = total - 10;
        memcpy(hdr, "\x93NUMPY\x01\x00", 8);
        hdr[8] = (unsigned char)(hlen & 0xff), hdr[9] = (unsigned char)(hlen >> 8);
        memcpy(hdr + 10, dict, (size_t)n);
        memset(hdr + 10 + n, ' ', hlen - (size_t)n - 1);
        hdr[total - 1] = '\n';
        st = write_all(f, hdr, total, path);
        break;
    }
    default: return tool_fail(LTK_EINVAL, "%s: unknown format", path);
    }
    if (!st) st = write_all(f, m->data, (size_t)m->rows * row_bytes, path);
    return st;
}

ltk_status io_write_format(const char *path, io_format fmt, const io_matrix *m) {
    if (!path || !m) return tool_fail(LTK_EINVAL, "io_write: path or matrix is NULL");
    if (fmt == IO_FORMAT_UNKNOWN)
        return tool_fail(LTK_EINVAL, "%s: unknown file extension (expected one of %s)", path, io_format_list());
    if (m->rows < 0 || m->cols < 0 || (m->rows > 0 && m->cols > 0 && !m->data) || io_elem_size(m->elem) == 0)
        return tool_fail(LTK_EINVAL, "%s: invalid matrix %lld x %lld", path, (long long)m->rows, (long long)m->cols);
    if (matrix_bytes(m->rows, m->cols, io_elem_size(m->elem)) < 0)
        return tool_fail(LTK_EINVAL, "%s: matrix too large", path);
    io_matrix narrowed = {0};
    const io_matrix *src = m;
    if (fmt != IO_FORMAT_NPY) {
        io_elem want = format_elem(fmt);
        if (m->rows > INT32_MAX || m->cols > INT32_MAX)
            return tool_fail(LTK_EINVAL, "%s: %lld x %lld does not fit the int32 header of .%s", path,
                             (long long)m->rows, (long long)m->cols, io_format_name(fmt));
        if (m->rows > 0 && m->cols == 0)
            return tool_fail(LTK_EINVAL, "%s: rows of dimension 0 cannot be stored in .%s", path, io_format_name(fmt));
        if (m->elem != want) {
            if (!(want == IO_ELEM_I32 && m->elem == IO_ELEM_I64))
                return tool_fail(LTK_EINVAL, "%s: .%s holds %s, the matrix is %s", path, io_format_name(fmt),
                                 io_elem_name(want), io_elem_name(m->elem));
            ltk_status st = io_convert(m, IO_ELEM_I32, &narrowed);
            if (st) return tool_fail(st, "%s: %s", path, tool_last_error());
            src = &narrowed;
        }
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        io_matrix_free(&narrowed);
        return tool_fail(LTK_EIO, "cannot create '%s': %s", path, strerror(errno));
    }
    ltk_status st = write_body(f, fmt, src, path);
    if (fclose(f) != 0 && st == LTK_OK) st = tool_fail(LTK_EIO, "%s: close failed: %s", path, strerror(errno));
    io_matrix_free(&narrowed);
    return st;
}

ltk_status io_write(const char *path, const io_matrix *m) {
    return io_write_format(path, io_format_from_path(path), m);
}

/* ---- conversion --------------------------------------------------------------------------- */
static double load_elem(const void *p, io_elem e, size_t i) {
    switch (e) {
    case IO_ELEM_F32: return ((const float *)p)[i];
    case IO_ELEM_F16: return num_f16_to_f32(((const uint16_t *)p)[i]);
    case IO_ELEM_U8: return ((const uint8_t *)p)[i];
    case IO_ELEM_I32: return ((const int32_t *)p)[i];
    case IO_ELEM_I64: return (double)((const int64_t *)p)[i];
    }
    return 0.0;
}

ltk_status io_convert(const io_matrix *in, io_elem to, io_matrix *out) {
    if (!in || !out || io_elem_size(to) == 0) return tool_fail(LTK_EINVAL, "io_convert: bad arguments");
    memset(out, 0, sizeof *out);
    int64_t bytes = matrix_bytes(in->rows, in->cols, io_elem_size(to));
    if (bytes < 0) return tool_fail(LTK_EINVAL, "io_convert: matrix too large");
    void *dst = bytes ? malloc((size_t)bytes) : NULL;
    if (bytes && !dst) return tool_fail(LTK_ENOMEM, "cannot allocate %lld bytes for a conversion", (long long)bytes);
    size_t n = (size_t)(in->rows * in->cols);
    if (in->elem == to && n) memcpy(dst, in->data, (size_t)bytes);
    for (size_t i = 0; i < n && in->elem != to; i++) {
        if (in->elem == IO_ELEM_I64 && (to == IO_ELEM_I32 || to == IO_ELEM_U8)) {
            int64_t v = ((const int64_t *)in->data)[i];
            int64_t hi = to == IO_ELEM_I32 ? INT32_MAX : 255, lo = to == IO_ELEM_I32 ? INT32_MIN : 0;
            if (v < lo || v > hi) goto range;
            if (to == IO_ELEM_I32) ((int32_t *)dst)[i] = (int32_t)v;
            else ((uint8_t *)dst)[i] = (uint8_t)v;
            continue;
        }
        if (to == IO_ELEM_I64 && in->elem == IO_ELEM_I32) {
            ((int64_t *)dst)[i] = ((const int32_t *)in->data)[i];
            continue;
        }
        double v = load_elem(in->data, in->elem, i);
        switch (to) {
        case IO_ELEM_F32: ((float *)dst)[i] = (float)v; break;
        case IO_ELEM_F16: ((uint16_t *)dst)[i] = num_f32_to_f16((float)v); break;
        case IO_ELEM_U8:
            if (!(v >= 0.0 && v <= 255.0) || v != (double)(int)v) goto range;
            ((uint8_t *)dst)[i] = (uint8_t)v;
            break;
        case IO_ELEM_I32:
            if (!(v >= INT32_MIN && v <= INT32_MAX) || v != (double)(int64_t)v) goto range;
            ((int32_t *)dst)[i] = (int32_t)v;
            break;
        case IO_ELEM_I64:
            if (!(v >= -9.2e18 && v <= 9.2e18) || v != (double)(int64_t)v) goto range;
            ((int64_t *)dst)[i] = (int64_t)v;
            break;
        }
        continue;
    range:
        free(dst);
        return tool_fail(LTK_EINVAL, "element %zu (%g) does not fit %s", i, load_elem(in->data, in->elem, i),
                         io_elem_name(to));
    }
    out->rows = in->rows;
    out->cols = in->cols;
    out->elem = to;
    out->data = dst;
    return LTK_OK;
}
