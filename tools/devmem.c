/* Host/device buffers for the tool. The CUDA runtime is used only when built with LTK_WITH_CUDA,
 * so the CPU build needs no CUDA headers. */
#define _POSIX_C_SOURCE 200809L
#include "devmem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef LTK_WITH_CUDA
#include <cuda_runtime.h>

static ltk_status cuda_fail(cudaError_t e, const char *what) {
    return tool_fail(LTK_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}
#define CUDA_TRY(expr, what)                            \
    do {                                                \
        cudaError_t e_ = (expr);                        \
        if (e_ != cudaSuccess) return cuda_fail(e_, what); \
    } while (0)
#endif

#ifndef LTK_WITH_CUDA
static ltk_status no_device(void) { return tool_fail(LTK_ENOBACKEND, "no device (this build has no CUDA support)"); }
#endif

#ifdef LTK_WITH_CUDA
static int cmp_ms(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}
#endif

ltk_status devmem_copy_gbps(size_t bytes, double *gbps) {
    *gbps = 0.0;
#ifdef LTK_WITH_CUDA
    void *src = NULL, *dst = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float ms[10];
    cudaError_t e = cudaMalloc(&src, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&dst, bytes);
    if (e == cudaSuccess) e = cudaMemset(src, 0x5a, bytes);
    if (e == cudaSuccess) e = cudaEventCreate(&a);
    if (e == cudaSuccess) e = cudaEventCreate(&b);
    for (int i = -2; i < 10 && e == cudaSuccess; i++) {
        e = cudaEventRecord(a, 0);
        if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
        if (e == cudaSuccess) e = cudaEventRecord(b, 0);
        if (e == cudaSuccess) e = cudaEventSynchronize(b);
        if (e == cudaSuccess && i >= 0) e = cudaEventElapsedTime(&ms[i], a, b);
    }
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    cudaFree(src);
    cudaFree(dst);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* a failed allocation must not reach the library's next launch check */
        return cuda_fail(e, "device copy bandwidth");
    }
    qsort(ms, 10, sizeof ms[0], cmp_ms);
    const double med = 0.5 * ((double)ms[4] + (double)ms[5]);
    *gbps = med > 0 ? 2.0 * (double)bytes / (med * 1e6) : 0.0;
    return LTK_OK;
#else
    (void)bytes;
    return no_device();
#endif
}

double devmem_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int devmem_device_count(void) {
#ifdef LTK_WITH_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

static void cpu_model(char *buf, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(buf, cap, "unknown CPU");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t') colon++;
                colon[strcspn(colon, "\n")] = '\0';
                snprintf(buf, cap, "%s", colon);
            }
            break;
        }
    }
    fclose(f);
}

void devmem_device_name(int on_device, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    if (!on_device) {
        cpu_model(buf, cap);
        return;
    }
#ifdef LTK_WITH_CUDA
    struct cudaDeviceProp prop;
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
        snprintf(buf, cap, "%s", prop.name);
        return;
    }
    (void)cudaGetLastError();
#endif
    snprintf(buf, cap, "no device");
}

ltk_status devmem_alloc(int on_device, size_t bytes, void **ptr) {
    if (!ptr) return tool_fail(LTK_EINVAL, "devmem_alloc: ptr is NULL");
    *ptr = NULL;
    size_t n = bytes ? bytes : 1;
    if (!on_device) {
        void *p = NULL;
        if (posix_memalign(&p, 64, (n + 63) & ~(size_t)63) != 0)
            return tool_fail(LTK_ENOMEM, "host allocation of %zu bytes failed", bytes);
        memset(p, 0, n);
        *ptr = p;
        return LTK_OK;
    }
#ifdef LTK_WITH_CUDA
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tool_fail(e == cudaErrorMemoryAllocation ? LTK_ENOMEM : LTK_ECUDA, "cudaMalloc(%zu bytes): %s", bytes,
                         cudaGetErrorString(e));
    }
    CUDA_TRY(cudaMemset(p, 0, n), "cudaMemset");
    *ptr = p;
    return LTK_OK;
#else
    return no_device();
#endif
}

void devmem_free(int on_device, void *ptr) {
    if (!ptr) return;
    if (!on_device) {
        free(ptr);
        return;
    }
#ifdef LTK_WITH_CUDA
    cudaFree(ptr);
#endif
}

ltk_status devmem_upload(int on_device, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return LTK_OK;
    if (!on_device) {
        memcpy(dst, src, bytes);
        return LTK_OK;
    }
#ifdef LTK_WITH_CUDA
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    return LTK_OK;
#else
    return no_device();
#endif
}

ltk_status devmem_download(int on_device, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return LTK_OK;
    if (!on_device) {
        memcpy(dst, src, bytes);
        return LTK_OK;
    }
#ifdef LTK_WITH_CUDA
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return LTK_OK;
#else
    return no_device();
#endif
}

ltk_status devmem_clone(int on_device, const void *src, size_t bytes, void **ptr) {
    ltk_status st = devmem_alloc(on_device, bytes, ptr);
    if (st) return st;
    st = devmem_upload(on_device, *ptr, src, bytes);
    if (st) {
        devmem_free(on_device, *ptr);
        *ptr = NULL;
    }
    return st;
}

#ifdef LTK_WITH_CUDA
static void CUDART_CB hold_fn(void *arg) {
    const double ms = *(const double *)arg;
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}
#endif

ltk_status devmem_hold(double ms) {
#ifdef LTK_WITH_CUDA
    static double held;
    held = ms;
    CUDA_TRY(cudaLaunchHostFunc(0, hold_fn, &held), "cudaLaunchHostFunc");
    return LTK_OK;
#else
    (void)ms;
    return no_device();
#endif
}

ltk_status devmem_sync(int on_device) {
    if (!on_device) return LTK_OK;
#ifdef LTK_WITH_CUDA
    CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return LTK_OK;
#else
    return no_device();
#endif
}

ltk_status devmem_timer_init(devmem_timer *t, int on_device) {
    memset(t, 0, sizeof *t);
    t->on_device = on_device;
    if (!on_device) return LTK_OK;
#ifdef LTK_WITH_CUDA
    cudaEvent_t a, b;
    CUDA_TRY(cudaEventCreate(&a), "cudaEventCreate");
    cudaError_t e = cudaEventCreate(&b);
    if (e != cudaSuccess) {
        cudaEventDestroy(a);
        return cuda_fail(e, "cudaEventCreate");
    }
    t->start_event = (void *)a;
    t->stop_event = (void *)b;
    return LTK_OK;
#else
    return no_device();
#endif
}

ltk_status devmem_timer_start(devmem_timer *t) {
    if (!t->on_device) {
        t->start_s = devmem_now_s();
        return LTK_OK;
    }
#ifdef LTK_WITH_CUDA
    CUDA_TRY(cudaEventRecord((cudaEvent_t)t->start_event, 0), "cudaEventRecord");
    return LTK_OK;
#else
    return no_device();
#endif
}

ltk_status devmem_timer_stop(devmem_timer *t, double *ms) {
    if (!t->on_device) {
        *ms = (devmem_now_s() - t->start_s) * 1e3;
        return LTK_OK;
    }
#ifdef LTK_WITH_CUDA
    float elapsed = 0.0f;
    CUDA_TRY(cudaEventRecord((cudaEvent_t)t->stop_event, 0), "cudaEventRecord");
    CUDA_TRY(cudaEventSynchronize((cudaEvent_t)t->stop_event), "cudaEventSynchronize (a kernel failed?)");
    CUDA_TRY(cudaEventElapsedTime(&elapsed, (cudaEvent_t)t->start_event, (cudaEvent_t)t->stop_event),
             "cudaEventElapsedTime");
    *ms = elapsed;
    return LTK_OK;
#else
    return no_device();
#endif
}

void devmem_timer_free(devmem_timer *t) {
#ifdef LTK_WITH_CUDA
    if (t->on_device) {
        if (t->start_event) cudaEventDestroy((cudaEvent_t)t->start_event);
        if (t->stop_event) cudaEventDestroy((cudaEvent_t)t->stop_event);
    }
#endif
    t->start_event = t->stop_event = NULL;
}
