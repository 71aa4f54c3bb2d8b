/* Independent decoders for the CPU tests: element values from the bit layouts of the header's
 * dtypes, written from the formats alone (not the library's tables), in float64. */
#ifndef LTK_TEST_DECODE_H
#define LTK_TEST_DECODE_H

#include <math.h>
#include <stdint.h>

#include "litetopk.h"

static inline double dec_e4m3(uint8_t v) {
    int sign = v >> 7, e = (v >> 3) & 15, m = v & 7;
    if (e == 15 && m == 7) return NAN;
    double mag = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return sign ? -mag : mag;
}
static inline double dec_f16(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double mag;
    if (e == 31) mag = m ? NAN : INFINITY;
    else if (e == 0) mag = ldexp(m, -24);
    else mag = ldexp(1.0 + m / 1024.0, e - 15);
    return sign ? -mag : mag;
}
static inline double dec_bf16(uint16_t b) {
    int sign = b >> 15, e = (b >> 7) & 255, m = b & 127;
    double mag;
    if (e == 255) mag = m ? NAN : INFINITY;
    else if (e == 0) mag = ldexp(m / 128.0, -126);
    else mag = ldexp(1.0 + m / 128.0, e - 127);
    return sign ? -mag : mag;
}
/* Element i of a dtype array. */
static inline double dec_val(const void *p, ltk_dtype dt, int64_t i) {
    switch (dt) {
    case LTK_DTYPE_F32: return ((const float *)p)[i];
    case LTK_DTYPE_F16: return dec_f16(((const uint16_t *)p)[i]);
    case LTK_DTYPE_BF16: return dec_bf16(((const uint16_t *)p)[i]);
    case LTK_DTYPE_E4M3: return dec_e4m3(((const uint8_t *)p)[i]);
    }
    return NAN;
}

#endif
