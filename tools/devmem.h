/* Buffers and timers in the memory space of a backend, so the tool can drive the CUDA backend with
 * device pointers through the public API alone. `on_device` = 0 means host memory (ref/cpu
 * backends); 1 means CUDA device memory, which needs a build with LTK_WITH_CUDA and a device —
 * otherwise the calls return LTK_ENOBACKEND ("no device"). No CUDA header leaks out of devmem.c. */
#ifndef LTK_TOOLS_DEVMEM_H
#define LTK_TOOLS_DEVMEM_H

#include <stddef.h>

#include "err.h"
#include "litetopk.h"

/* Number of CUDA devices usable by this build (0 without CUDA). */
int devmem_device_count(void);
/* Device 0's name, or the CPU model from /proc/cpuinfo when on_device is 0. */
void devmem_device_name(int on_device, char *buf, size_t cap);

/* Zero-filled buffer of `bytes` (64-byte aligned on the host). */
ltk_status devmem_alloc(int on_device, size_t bytes, void **ptr);
void devmem_free(int on_device, void *ptr);
ltk_status devmem_upload(int on_device, void *dst, const void *src, size_t bytes);
ltk_status devmem_download(int on_device, void *dst, const void *src, size_t bytes);
/* Allocates and uploads in one step. */
ltk_status devmem_clone(int on_device, const void *src, size_t bytes, void **ptr);
ltk_status devmem_sync(int on_device);
/* Holds the default stream for `ms` (a host function that sleeps): work enqueued meanwhile waits,
 * so the host time of enqueuing it is measured with no call waiting for the GPU. */
ltk_status devmem_hold(double ms);

/* Wall time of enqueued work: cudaEvents on the default stream on the device, a monotonic clock on
 * the host. stop() waits for the work and returns milliseconds. */
typedef struct devmem_timer {
    int on_device;
    void *start_event, *stop_event;
    double start_s;
} devmem_timer;

ltk_status devmem_timer_init(devmem_timer *t, int on_device);
ltk_status devmem_timer_start(devmem_timer *t);
ltk_status devmem_timer_stop(devmem_timer *t, double *ms);
void devmem_timer_free(devmem_timer *t);

/* Device-to-device copy bandwidth of device 0 (bytes read + written per second, GB/s): the median
 * of 10 event-timed copies of `bytes` after 2 warm-up copies. The floor that kNN and select
 * benchmarks compare with (one read of their input at this rate). LTK_ENOBACKEND without CUDA. */
ltk_status devmem_copy_gbps(size_t bytes, double *gbps);
/* The sustained FP8 GEMM rate (cuBLASLt e4m3 8192^3, `seconds` timed after 0.5 s of warm-up), in
 * TFLOP/s: the ceiling of an FP8 scan (tools/ceiling.c). LTK_EUNSUPPORTED without cuBLASLt. */
ltk_status devmem_fp8_gemm_tflops(double seconds, double *tflops);

/* Monotonic host clock in seconds. */
double devmem_now_s(void);

#endif
