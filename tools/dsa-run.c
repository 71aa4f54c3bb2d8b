/* Chunked DSA runs for the demo and the DSA benchmark. */
#include "dsa-run.h"

#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "err.h"

ltk_status dsa_inputs_make(const gen_dsa_spec *spec, int64_t chunk, int32_t k, uint32_t flags, int on_device,
                           dsa_inputs *in) {
    memset(in, 0, sizeof *in);
    ltk_status st = gen_dsa_make(spec, &in->host);
    if (st) return st;
    const gen_dsa *h = &in->host;
    in->on_device = on_device;
    in->ctx = spec->ctx;
    in->chunk = chunk > 0 && chunk < h->T ? chunk : (h->T > 0 ? h->T : 1);
    in->nchunks = (h->T + in->chunk - 1) / in->chunk;
    in->k = k;
    in->flags = flags;
    size_t es = ltk_dtype_size(h->dtype);
    size_t T = (size_t)h->T, S = (size_t)h->S, H = (size_t)h->H, D = (size_t)h->D;
    st = devmem_clone(on_device, h->q, T * H * D * es, &in->q);
    if (!st) st = devmem_clone(on_device, h->kv, S * D * es, &in->kv);
    if (!st && h->kv_scale) st = devmem_clone(on_device, h->kv_scale, S * sizeof(float), (void **)&in->kv_scale);
    if (!st) st = devmem_clone(on_device, h->weights, T * H * sizeof(float), (void **)&in->weights);
    if (!st) st = devmem_clone(on_device, h->ks, T * sizeof(int32_t), (void **)&in->ks);
    if (!st) st = devmem_clone(on_device, h->ke, T * sizeof(int32_t), (void **)&in->ke);
    if (st) dsa_inputs_free(in);
    return st;
}

void dsa_inputs_free(dsa_inputs *in) {
    int d = in->on_device;
    devmem_free(d, in->q), devmem_free(d, in->kv), devmem_free(d, in->kv_scale);
    devmem_free(d, in->weights), devmem_free(d, in->ks), devmem_free(d, in->ke);
    gen_dsa_free(&in->host);
    memset(in, 0, sizeof *in);
}

/* Arguments of chunk c; pointers offset into the whole-workload arrays. */
static ltk_indexer_args chunk_args(const dsa_inputs *in, const dsa_path *p, int64_t c) {
    const gen_dsa *h = &in->host;
    int64_t t0 = c * in->chunk, rows = h->T - t0 < in->chunk ? h->T - t0 : in->chunk;
    size_t es = ltk_dtype_size(h->dtype);
    ltk_indexer_args a;
    memset(&a, 0, sizeof a);
    a.T = rows;
    a.S = in->ctx + t0 + rows; /* keys cached when this chunk runs */
    a.H = h->H;
    a.D = h->D;
    a.k = in->k;
    a.dtype = h->dtype;
    a.q = (const char *)in->q + (size_t)t0 * (size_t)h->H * (size_t)h->D * es;
    a.kv = in->kv;
    a.kv_scale = in->kv_scale;
    a.weights = in->weights + t0 * h->H;
    a.ks = in->ks + t0;
    a.ke = in->ke + t0;
    a.out_idx = p ? p->out_idx + t0 * in->k : NULL;
    a.out_scores = p ? p->out_scores + t0 * in->k : NULL;
    a.flags = in->flags;
    a.state = p && p->use_state ? p->state : NULL;
    return a;
}

/* k' = 3k hot keys, as the LiteTopK paper samples, capped by the API limit (1 << 20). */
int32_t dsa_hot_capacity(int32_t k) {
    int64_t sample = 3 * (int64_t)k;
    return (int32_t)(sample < LTK_STATE_MAX_SIZE ? sample : LTK_STATE_MAX_SIZE);
}

ltk_status dsa_path_init(const dsa_inputs *in, ltk_backend backend, ltk_algo algo, int32_t threads, int use_state,
                         dsa_path *p) {
    memset(p, 0, sizeof *p);
    p->exec.backend = backend;
    p->exec.algo = algo;
    p->exec.num_threads = threads;
    p->use_state = use_state;
    size_t out_n = (size_t)in->host.T * (size_t)in->k;
    ltk_status st = devmem_alloc(in->on_device, out_n * sizeof(int32_t), (void **)&p->out_idx);
    if (!st) st = devmem_alloc(in->on_device, out_n * sizeof(float), (void **)&p->out_scores);
    if (!st && use_state) {
        st = ltk_indexer_state_create(backend, dsa_hot_capacity(in->k), &p->state);
        if (st) st = tool_fail(st, "ltk_indexer_state_create: %s", ltk_last_error());
    }
    size_t need = 0;
    for (int64_t c = 0; c < in->nchunks && !st; c++) {
        ltk_indexer_args a = chunk_args(in, p, c);
        size_t bytes = 0;
        st = ltk_indexer_workspace_size(&a, &p->exec, &bytes);
        if (st) st = tool_fail(st, "ltk_indexer_workspace_size: %s", ltk_last_error());
        if (bytes > need) need = bytes;
    }
    if (!st && need) st = devmem_alloc(in->on_device, need, &p->exec.workspace);
    p->exec.workspace_bytes = p->exec.workspace ? need : 0;
    if (st) dsa_path_free(in, p);
    return st;
}

void dsa_path_free(const dsa_inputs *in, dsa_path *p) {
    devmem_free(in->on_device, p->out_idx);
    devmem_free(in->on_device, p->out_scores);
    devmem_free(in->on_device, p->exec.workspace);
    ltk_indexer_state_free(p->state);
    memset(p, 0, sizeof *p);
}

void dsa_stats_add(ltk_stats *total, const ltk_stats *s) {
    total->rows += s->rows;
    total->short_rows += s->short_rows;
    total->candidates += s->candidates;
    total->bin_entries += s->bin_entries;
    total->compactions += s->compactions;
    total->fallback_rows += s->fallback_rows;
    if (s->candidates_max > total->candidates_max) total->candidates_max = s->candidates_max;
    if (s->bin_entries_max > total->bin_entries_max) total->bin_entries_max = s->bin_entries_max;
}

/* Share of chunk c's output entries that lie in `hot` (absolute indices, sorted bitmap). */
static ltk_status hot_hit_rate(const dsa_inputs *in, const dsa_path *p, int64_t c, const uint8_t *in_hot,
                               double *rate) {
    const gen_dsa *h = &in->host;
    int64_t t0 = c * in->chunk, rows = h->T - t0 < in->chunk ? h->T - t0 : in->chunk;
    size_t n = (size_t)rows * (size_t)in->k;
    int32_t *idx = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!idx) return tool_fail(LTK_ENOMEM, "out of memory");
    ltk_status st = devmem_download(in->on_device, idx, p->out_idx + t0 * in->k, n * sizeof(int32_t));
    int64_t hit = 0, valid = 0;
    for (int64_t r = 0; r < rows && !st; r++)
        for (int32_t j = 0; j < in->k; j++) {
            int32_t v = idx[r * in->k + j];
            if (v < 0) continue;
            int64_t abs_idx = (in->flags & LTK_FLAG_ABSOLUTE) ? v : (int64_t)v + h->ks[t0 + r];
            valid++;
            hit += in_hot[abs_idx];
        }
    *rate = valid ? (double)hit / (double)valid : 0.0;
    free(idx);
    return st;
}

ltk_status dsa_path_run(const dsa_inputs *in, dsa_path *p, ltk_stats *total, dsa_chunk_report *per_chunk) {
    ltk_status st = LTK_OK;
    if (p->state) {
        st = ltk_indexer_state_reset(p->state);
        if (st) return tool_fail(st, "ltk_indexer_state_reset: %s", ltk_last_error());
    }
    if (total) memset(total, 0, sizeof *total);
    uint8_t *in_hot = NULL;
    int32_t *hot = NULL;
    if (per_chunk && p->state) {
        in_hot = calloc((size_t)in->host.S + 1, 1);
        hot = malloc(sizeof(int32_t) * (size_t)dsa_hot_capacity(in->k));
        if (!in_hot || !hot) {
            free(in_hot), free(hot);
            return tool_fail(LTK_ENOMEM, "out of memory");
        }
    }
    for (int64_t c = 0; c < in->nchunks && !st; c++) {
        ltk_indexer_args a = chunk_args(in, p, c);
        ltk_stats s;
        memset(&s, 0, sizeof s);
        ltk_exec e = p->exec;
        e.stats = (total || per_chunk) ? &s : NULL;
        int32_t hot_n = 0;
        if (in_hot) {
            int32_t cap = dsa_hot_capacity(in->k);
            st = ltk_indexer_state_get(p->state, hot, cap, &hot_n);
            if (st) {
                st = tool_fail(st, "ltk_indexer_state_get: %s", ltk_last_error());
                break;
            }
            if (hot_n > cap) hot_n = cap;
            memset(in_hot, 0, (size_t)in->host.S + 1);
            for (int32_t i = 0; i < hot_n; i++)
                if (hot[i] >= 0 && hot[i] < in->host.S) in_hot[hot[i]] = 1;
        }
        st = ltk_indexer_topk(&a, &e);
        if (st) {
            st = tool_fail(st, "ltk_indexer_topk (chunk %lld): %s", (long long)c, ltk_last_error());
            break;
        }
        if (total) dsa_stats_add(total, &s);
        if (per_chunk) {
            per_chunk[c].stats = s;
            per_chunk[c].hot_size = hot_n;
            per_chunk[c].hot_hit = -1.0;
            if (in_hot && hot_n > 0) st = hot_hit_rate(in, p, c, in_hot, &per_chunk[c].hot_hit);
        }
    }
    free(in_hot), free(hot);
    return st;
}
