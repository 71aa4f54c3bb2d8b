/* Error reporting for builds of the select / kNN kernels without the front end (litetopk.c):
 * tests/cuda/standalone.sh links it into the standalone GPU tests and into libltk_cuda_sk.so,
 * which bench/gpu_*_torch.py load with ctypes when the full library is not built. */
#include <stdarg.h>
#include <stdio.h>

#include "../../src/ltk-impl.h"

static _Thread_local char shim_err[512];

LTK_API ltk_status ltk_error(ltk_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(shim_err, sizeof shim_err, fmt, ap);
    va_end(ap);
    return status;
}
LTK_API void ltk_clear_error(void) { shim_err[0] = '\0'; }
LTK_API const char *ltk_last_error(void) { return shim_err; }

/* No driver entry point here: the kNN's sm_90a main loop (TMA) is not used in this build. */
void *ltk_cuda_tmap_encoder(void);
void *ltk_cuda_tmap_encoder(void) { return NULL; }
