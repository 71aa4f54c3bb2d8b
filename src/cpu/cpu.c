/* Temporary: the cpu backend forwards to ref until the fused CPU backend lands. */
#include "../ltk-impl.h"
static int cpu_available(void) { return 1; }
static ltk_status iw(const ltk_indexer_args *a, const ltk_exec *e, size_t *b) { return ltk_backend_ref.indexer_workspace(a, e, b); }
static ltk_status ir(const ltk_indexer_args *a, const ltk_exec *e, void *w, size_t n) { return ltk_backend_ref.indexer(a, e, w, n); }
static ltk_status kw(const ltk_knn_args *a, const ltk_exec *e, size_t *b) { return ltk_backend_ref.knn_workspace(a, e, b); }
static ltk_status kr(const ltk_knn_args *a, const ltk_exec *e, void *w, size_t n) { return ltk_backend_ref.knn(a, e, w, n); }
static ltk_status sw(const ltk_select_args *a, const ltk_exec *e, size_t *b) { return ltk_backend_ref.select_workspace(a, e, b); }
static ltk_status sr(const ltk_select_args *a, const ltk_exec *e, void *w, size_t n) { return ltk_backend_ref.select(a, e, w, n); }
static ltk_status ma(size_t b, void **p) { return ltk_backend_ref.mem_alloc(b, p); }
static void mf(void *p) { ltk_backend_ref.mem_free(p); }
static ltk_status mc(void *d, const void *s, size_t b) { return ltk_backend_ref.mem_to_host(d, s, b); }
const ltk_backend_i ltk_backend_cpu = {"cpu", cpu_available, NULL, iw, ir, kw, kr, sw, sr, ma, mf, mc, mc};
