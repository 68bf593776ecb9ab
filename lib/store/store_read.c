/* The result store's reads: the run list, lookups by id or label, the
 * noise series, and a whole run loaded back with every row checked against
 * what its readers index with it; each cell's histograms. */
#include "caliper/keep.h"
#include "lib/util/c_locale.h"
#include "store_sql.h"

/* ---- reads ------------------------------------------------------------ */
#define RUN_COLS "r.id, r.label, r.started_wall_ns, r.ended_wall_ns, r.t0_mono_ns, r.status," \
                 " r.build, r.host, r.target, r.protocol, r.telemetry, r.verdicts," \
                 " (SELECT count(*) FROM cells c WHERE c.run_id = r.id)"

/* A stored timestamp readers may subtract: within [0, TS_MAX), or -1 where
 * the column may be unknown (opt). */
static int ts_ok(int64_t v, int opt) { return (v >= 0 && v < TS_MAX) || (opt && v == -1); }

/* A non-NULL text column copied; CAL_ENOMEM when the copy failed. */
static int col_dup_into(sqlite3_stmt *s, int i, char **dst)
{
    *dst = col_dup(s, i);
    return *dst || sqlite3_column_type(s, i) == SQLITE_NULL ? CAL_OK : CAL_ENOMEM;
}

static int read_run_row(cal_store *st, sqlite3_stmt *s, cal_run *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(s, 0);
    int rc = col_dup_into(s, 1, &r->label);
    r->started_wall_ns = sqlite3_column_int64(s, 2);
    r->ended_wall_ns = col_opt(s, 3);
    r->t0_mono_ns = sqlite3_column_int64(s, 4);
    r->status = (cal_run_status)lookup(RUN_STATUS, 4, (const char *)sqlite3_column_text(s, 5), 0);
    char **text[] = {&r->build, &r->host_json, &r->target_json, &r->protocol_json,
                     &r->telemetry_json, &r->verdicts_json};
    for (int i = 0; i < 6; i++) {
        int e = col_dup_into(s, 6 + i, text[i]);
        if (!rc) rc = e;
    }
    r->n_cells = sqlite3_column_int(s, 12);
    if (rc) return cal_st_fail(st, rc, "run %lld: out of memory", (long long)r->id);
    if (!ts_ok(r->started_wall_ns, 0) || !ts_ok(r->ended_wall_ns, 1) || !ts_ok(r->t0_mono_ns, 0))
        return cal_st_fail(st, CAL_ESTORE, "run %lld: a start or end time outside [0, 2^62) ns: the "
                    "store is damaged", (long long)r->id);
    return CAL_OK;
}

int cal_store_list_runs(cal_store *st, size_t limit, cal_run **runs, size_t *n)
{
    if (!st || !runs || !n) return CAL_EINVAL;
    st->why[0] = '\0';
    *runs = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT " RUN_COLS " FROM runs r ORDER BY r.id DESC LIMIT %lld",
             limit ? (long long)limit : -1LL);
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    size_t cap = 0;
    int rc = CAL_OK, step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            cal_run *g = realloc(*runs, nc * sizeof *g);
            if (!g) { rc = cal_st_fail(st, CAL_ENOMEM, "listing runs: out of memory"); break; }
            *runs = g;
            cap = nc;
        }
        rc = read_run_row(st, s, &(*runs)[(*n)++]);
        if (rc) break;
    }
    if (rc == CAL_OK && step != SQLITE_DONE) rc = CAL_ESTORE;
    sqlite3_finalize(s);
    if (rc) {
        cal_store_runs_free(*runs, *n);
        *runs = NULL;
        *n = 0;
    }
    return rc;
}

void cal_store_runs_free(cal_run *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) cal_run_clear(&runs[i]);
    free(runs);
}

int cal_store_put_noise(cal_store *st, int64_t run_id, const cal_store_noise_row *r)
{
    if (!st || !r || !r->series[0] || !isfinite(r->level) || r->shots < 1) return CAL_EINVAL;
    st->why[0] = '\0';
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, "INSERT INTO noise(run_id, series, level, shot_sd, shots, "
                           "first_dev, wall) VALUES (?,?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK) {
        cal_st_note(st);
        return CAL_ESTORE;
    }
    bind_i64(s, 1, run_id);
    bind_text(s, 2, r->series);
    bind_real(s, 3, r->level);
    bind_real(s, 4, r->shot_sd);
    sqlite3_bind_int(s, 5, r->shots);
    bind_real(s, 6, r->first_dev);
    if (r->wall >= 0) sqlite3_bind_int(s, 7, r->wall ? 1 : 0);
    else sqlite3_bind_null(s, 7);
    int step = sqlite3_step(s);
    if (step != SQLITE_DONE) cal_st_note(st);
    sqlite3_finalize(s);
    return step == SQLITE_DONE ? CAL_OK : CAL_ESTORE;
}

int cal_store_noise(cal_store *st, const char *series, int64_t before_run_id,
                    cal_store_noise_row *rows, size_t cap, size_t *n)
{
    if (!st || !series || !n || (cap && !rows)) return CAL_EINVAL;
    *n = 0;
    st->why[0] = '\0';
    sqlite3_stmt *s = NULL;
    /* a store written before schema 4 has no noise table: no evidence */
    /* a store read as it is (read-only, before schema 7 or 8) has no
     * first_dev or wall */
    if (sqlite3_prepare_v2(st->db, st->version >= 8
                           ? "SELECT run_id, level, shot_sd, shots, first_dev, wall FROM noise "
                             "WHERE series=? AND run_id<? ORDER BY run_id DESC LIMIT ?"
                           : st->version >= 7
                           ? "SELECT run_id, level, shot_sd, shots, first_dev, NULL FROM noise "
                             "WHERE series=? AND run_id<? ORDER BY run_id DESC LIMIT ?"
                           : "SELECT run_id, level, shot_sd, shots, NULL, NULL FROM noise "
                             "WHERE series=? AND run_id<? ORDER BY run_id DESC LIMIT ?",
                           -1, &s, NULL) != SQLITE_OK)
        return st->version >= 4 ? (cal_st_note(st), CAL_ESTORE) : CAL_OK;
    bind_text(s, 1, series);
    bind_i64(s, 2, before_run_id > 0 ? before_run_id : INT64_MAX);
    bind_i64(s, 3, (int64_t)cap);
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW && *n < cap) {
        cal_store_noise_row *r = &rows[(*n)++];
        memset(r, 0, sizeof *r);
        r->run_id = sqlite3_column_int64(s, 0);
        snprintf(r->series, sizeof r->series, "%s", series);
        r->level = col_real(s, 1);
        r->shot_sd = col_real(s, 2);
        r->shots = sqlite3_column_int(s, 3);
        r->first_dev = col_real(s, 4);
        r->wall = sqlite3_column_type(s, 5) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 5) != 0;
    }
    if (step != SQLITE_DONE && step != SQLITE_ROW) cal_st_note(st);
    sqlite3_finalize(s);
    return step == SQLITE_DONE || step == SQLITE_ROW ? CAL_OK : CAL_ESTORE;
}

int cal_store_find_run(cal_store *st, const char *ref, int64_t *run_id)
{
    if (!st || !ref || !run_id) return CAL_EINVAL;
    st->why[0] = '\0';
    if (!*ref) return cal_st_fail(st, CAL_EINVAL, "the run reference is empty: give an id, a label or latest");
    sqlite3_stmt *s = NULL;
    const char *sql;
    char *end = NULL;
    long long id = strtoll(ref, &end, 10);
    int by_id = end && *end == '\0' && id > 0;
    if (by_id) sql = "SELECT id FROM runs WHERE id=?";
    else if (!strcmp(ref, "latest") || !strcmp(ref, "last"))
        sql = "SELECT id FROM runs ORDER BY id DESC LIMIT 1";
    else sql = "SELECT id FROM runs WHERE label=? ORDER BY id DESC LIMIT 1";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    if (by_id) sqlite3_bind_int64(s, 1, id);
    else if (sqlite3_bind_parameter_count(s) == 1) bind_text(s, 1, ref);
    int step = sqlite3_step(s);
    int rc = step == SQLITE_ROW ? CAL_OK : step == SQLITE_DONE ? CAL_ENOTFOUND : CAL_ESTORE;
    if (rc == CAL_OK) *run_id = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc;
}

static int read_cell_row(cal_store *st, sqlite3_stmt *s, cal_cell *c)
{
    memset(c, 0, sizeof *c);
    int k = 0;
    c->id = sqlite3_column_int64(s, k++);
    c->run_id = sqlite3_column_int64(s, k++);
    c->seq = sqlite3_column_int(s, k++);
    c->kind = (cal_cell_kind)lookup(CELL_KIND, 4, (const char *)sqlite3_column_text(s, k++), 0);
    col_copy(s, k++, c->target, sizeof c->target);
    c->concurrency = sqlite3_column_int(s, k++);
    c->rate = col_real(s, k++);
    if (isnan(c->rate)) c->rate = 0;
    c->prompt_tokens = sqlite3_column_int(s, k++);
    c->prompt_exact = sqlite3_column_int(s, k++);
    col_copy(s, k++, c->content, sizeof c->content);
    c->unique_prompts = sqlite3_column_int(s, k++);
    c->max_tokens = sqlite3_column_int(s, k++);
    c->output_fixed = sqlite3_column_int(s, k++);
    c->shot_index = sqlite3_column_int(s, k++);
    c->shot_kind = (cal_shot_kind)lookup_fn(shot_key, CAL_SHOT_CONSECUTIVE + 1, (const char *)sqlite3_column_text(s, k++), 0);
    c->rest_before_ns = sqlite3_column_int64(s, k++);
    c->process_age_ns = col_opt(s, k++);
    c->start_ns = sqlite3_column_int64(s, k++);
    c->end_ns = sqlite3_column_int64(s, k++);
    c->start_wall_ns = sqlite3_column_int64(s, k++);
    c->n_requests = sqlite3_column_int64(s, k++);
    c->cpu_ns = sqlite3_column_int64(s, k++);
    c->chunks = sqlite3_column_int64(s, k++);
    c->send_lag_p99_ms = col_real(s, k++);
    assert(k == CELL_N_FIXED + 1);
    cal_summary_init(&c->sum);
    for (size_t i = 0; i < cal_summary_n_fields; i++, k++) {
        const cal_field *f = &cal_summary_fields[i];
        char *p = (char *)&c->sum + f->offset;
        if (f->type == CAL_FIELD_INT) {
            int64_t v = sqlite3_column_int64(s, k);
            memcpy(p, &v, sizeof v);
        } else {
            double v = col_real(s, k);
            memcpy(p, &v, sizeof v);
        }
    }
    /* schema 9: how the length was made and checked (NULL before: then
     * prompt_exact alone says exact or not) */
    const char *basis = (const char *)sqlite3_column_text(s, k++);
    if (!basis || cal_prompt_basis_parse(basis, &c->prompt_basis)) c->prompt_basis = CAL_PROMPT_UNRECORDED;
    int64_t asked = col_opt(s, k++), offset = col_opt(s, k++);
    c->prompt_asked = asked > 0 && asked <= INT32_MAX ? (int)asked : 0;
    c->prompt_offset = offset >= 0 && offset <= INT32_MAX ? (int)offset : -1;
    assert(k == sqlite3_column_count(s));
    /* what readers index or subtract with */
    const char *bad = c->n_requests < 0 ? "n_requests"
                      : !ts_ok(c->start_ns, 0) || !ts_ok(c->end_ns, 0) ? "start_ns/end_ns"
                      : !ts_ok(c->start_wall_ns, 0) ? "start_wall_ns"
                      : !ts_ok(c->rest_before_ns, 0) ? "rest_before_ns"
                      : !ts_ok(c->process_age_ns, 1) ? "process_age_ns"
                      : c->cpu_ns < 0 || c->chunks < 0 ? "cpu_ns/chunks" : NULL;
    if (bad)
        return cal_st_fail(st, CAL_ESTORE, "run %lld, cell %lld: %s out of range: the store is damaged",
                    (long long)c->run_id, (long long)c->id, bad);
    return CAL_OK;
}

static void free_req(cal_req_result *q)
{
    free(q->error);
    free(q->chunk_ns);
    free(q->chunk_send_ns);
    free(q->text);
    memset(q, 0, sizeof *q);
}

int cal_run_data_read_protocol(cal_run_data *d)
{
    cal_protocol_clear(&d->proto);
    /* a damaged text still loads: the record holds what the rest gave and
     * names the damage (d->proto.n_damaged), for every reader to show */
    int rc = cal_protocol_from_json(d->run.protocol_json, d->run.target_json, &d->proto);
    return rc == CAL_ENOMEM ? CAL_ENOMEM : CAL_OK;
}

void cal_run_data_free(cal_run_data **pd)
{
    if (!pd || !*pd) return;
    cal_run_data *d = *pd;
    cal_run_clear(&d->run);
    cal_protocol_clear(&d->proto);
    free(d->cells);
    for (size_t i = 0; i < d->n_reqs; i++) free_req(&d->reqs[i]);
    free(d->reqs);
    free(d->tel);
    for (size_t i = 0; d->itl_hist && i < d->n_cells; i++) free(d->itl_hist[i]);
    free(d->itl_hist);
    free(d);
    *pd = NULL;
}

/* Grow *arr (element size sz) to hold at least need elements. */
static int grow(void **arr, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return CAL_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *g = realloc(*arr, nc * sz);
    if (!g) return CAL_ENOMEM;
    *arr = g;
    *cap = nc;
    return CAL_OK;
}

/* One row of requests into q, checked against what readers index with:
 * q->chunk_ns, when set, holds exactly q->n_chunks timestamps. */
static int read_request_row(cal_store *st, sqlite3_stmt *s, const cal_cell *cell, size_t idx,
                            int flags, cal_req_result *q)
{
    q->status = (cal_req_status)lookup_fn(req_key, CAL_REQ_N_STATUS,
                                          (const char *)sqlite3_column_text(s, 0),
                                          CAL_REQ_STREAM_ERROR);
    q->http_status = sqlite3_column_int(s, 1);
    if (col_dup_into(s, 2, &q->error))
        return cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)cell->run_id);
    q->sched_ns = col_opt(s, 3);
    q->send_ns = sqlite3_column_int64(s, 4);
    q->first_token_ns = sqlite3_column_int64(s, 5);
    q->last_token_ns = sqlite3_column_int64(s, 6);
    q->end_ns = sqlite3_column_int64(s, 7);
    int64_t ptok = col_opt(s, 8), otok = col_opt(s, 9), dtok = col_opt(s, 15);
    q->prompt_tokens = (int)ptok;
    q->output_tokens = (int)otok;
    const char *src = (const char *)sqlite3_column_text(s, 10);
    q->tok_source = src && !strcmp(src, "chunks") ? CAL_TOKSRC_CHUNKS : CAL_TOKSRC_USAGE;
    int64_t nch = sqlite3_column_int64(s, 11);
    double sp = col_real(s, 13), sd = col_real(s, 14);
    q->server_prefill_ms = isnan(sp) ? -1 : sp;
    q->server_decode_ms = isnan(sd) ? -1 : sd;
    q->server_decode_tokens = (int)dtok;
    int64_t ctok = col_opt(s, 16);
    q->cached_tokens = (int)ctok;
    const char *bad = NULL;
    if (!ts_ok(q->sched_ns, 1) || !ts_ok(q->send_ns, 0) || !ts_ok(q->first_token_ns, 0) ||
        !ts_ok(q->last_token_ns, 0) || !ts_ok(q->end_ns, 0))
        bad = "a timestamp outside [0, 2^62) ns";
    else if (ptok < -1 || ptok > INT32_MAX || otok < -1 || otok > INT32_MAX || dtok < -1 ||
             dtok > INT32_MAX || ctok < -1 || ctok > INT32_MAX)
        bad = "a token count out of range";
    else if (nch < 0 || nch > INT32_MAX / 4)
        bad = "n_chunks out of range";
    if (bad)
        return cal_st_fail(st, CAL_ESTORE, "run %lld, cell %lld, request %zu: %s: the store is damaged",
                    (long long)cell->run_id, (long long)cell->id, idx, bad);
    q->n_chunks = (int)nch;
    /* the blob must be exactly the chunks the column counts: readers walk
     * chunk_ns[0 .. n_chunks) */
    int nb = sqlite3_column_bytes(s, 12);
    if (nb != 0 && nb != 4 * q->n_chunks)
        return cal_st_fail(st, CAL_ESTORE, "run %lld, cell %lld, request %zu: n_chunks %d but the chunks "
                    "blob holds %d bytes (4 per chunk): the store is damaged",
                    (long long)cell->run_id, (long long)cell->id, idx, q->n_chunks, nb);
    if ((flags & CAL_LOAD_CHUNKS) && nb > 0) {
        const void *blob = sqlite3_column_blob(s, 12);
        int nn = 0;
        if (!blob) return cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)cell->run_id);
        int rc = cal_store_chunks_decode(q->send_ns, blob, (size_t)nb, &q->chunk_ns, &nn);
        if (rc == CAL_ENOMEM) return cal_st_fail(st, rc, "run %lld: out of memory", (long long)cell->run_id);
        if (rc)
            return cal_st_fail(st, CAL_ESTORE, "run %lld, cell %lld, request %zu: chunk times run past "
                        "2^62 ns: the store is damaged", (long long)cell->run_id,
                        (long long)cell->id, idx);
        assert(nn == q->n_chunks);
    }
    return CAL_OK;
}

static int load_requests(cal_store *st, cal_run_data *d, int flags)
{
    sqlite3_stmt *s = NULL;
    const char *sql =
        "SELECT status, http_status, error, sched_ns, send_ns, first_token_ns, last_token_ns,"
        " end_ns, prompt_tokens, output_tokens, token_source, n_chunks, chunks,"
        " server_prefill_ms, server_decode_ms, server_decode_tokens, %s"
        " FROM requests WHERE cell_id=? ORDER BY idx";
    char sqlv[512];
    snprintf(sqlv, sizeof sqlv, sql, st->version >= 9 ? "cached_tokens" : "NULL");
    sql = sqlv;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    size_t cap = 0;
    int rc = CAL_OK;
    for (size_t c = 0; c < d->n_cells && rc == CAL_OK; c++) {
        cal_cell *cell = &d->cells[c];
        cell->req_first = d->n_reqs;
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, cell->id);
        int step;
        while ((step = sqlite3_step(s)) == SQLITE_ROW) {
            if (grow((void **)&d->reqs, &cap, d->n_reqs + 1, sizeof *d->reqs)) {
                rc = cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)d->run.id);
                break;
            }
            cal_req_result *q = &d->reqs[d->n_reqs];
            memset(q, 0, sizeof *q);
            d->n_reqs++;   /* counted before it is filled, so a failure frees it */
            rc = read_request_row(st, s, cell, d->n_reqs - 1 - cell->req_first, flags, q);
            if (rc) break;
        }
        if (rc == CAL_OK && step != SQLITE_DONE) { cal_st_note(st); rc = CAL_ESTORE; }
        /* readers take this cell's requests as reqs[req_first .. + n_requests) */
        if (rc == CAL_OK && (int64_t)(d->n_reqs - cell->req_first) != cell->n_requests)
            rc = cal_st_fail(st, CAL_ESTORE, "run %lld, cell %lld: n_requests %lld but %zu requests are "
                      "stored: the store is damaged", (long long)d->run.id, (long long)cell->id,
                      (long long)cell->n_requests, d->n_reqs - cell->req_first);
    }
    sqlite3_finalize(s);
    return rc;
}

static int load_telemetry(cal_store *st, cal_run_data *d)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db,
                           "SELECT t_ns, backend, metric, unit, value FROM telemetry"
                           " WHERE run_id=? ORDER BY t_ns, rowid", -1, &s, NULL) != SQLITE_OK)
        return CAL_ESTORE;
    sqlite3_bind_int64(s, 1, d->run.id);
    size_t cap = 0;
    int rc = CAL_OK, step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (grow((void **)&d->tel, &cap, d->n_tel + 1, sizeof *d->tel)) {
            rc = cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)d->run.id);
            break;
        }
        cal_store_tel_row *t = &d->tel[d->n_tel++];
        t->t_ns = sqlite3_column_int64(s, 0);
        col_copy(s, 1, t->backend, sizeof t->backend);
        col_copy(s, 2, t->metric, sizeof t->metric);
        col_copy(s, 3, t->unit, sizeof t->unit);
        t->value = col_real(s, 4);
        if (!ts_ok(t->t_ns, 0)) {
            rc = cal_st_fail(st, CAL_ESTORE, "run %lld: a telemetry time outside [0, 2^62) ns: the store "
                      "is damaged", (long long)d->run.id);
            break;
        }
    }
    if (rc == CAL_OK && step != SQLITE_DONE) { cal_st_note(st); rc = CAL_ESTORE; }
    sqlite3_finalize(s);
    return rc;
}

/* The ITL histograms of the run's cells whose percentiles came from them
 * (itl_source "histogram"), so a pooled view can merge them: the raw chunk
 * times of those requests were not kept. A store before schema 5 has none. */
static int load_itl_hists(cal_store *st, int64_t run_id, cal_run_data *d)
{
    if (st->version < 5 || !d->n_cells) return CAL_OK;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT h.cell_id, h.itl FROM cell_hists h JOIN cells c ON "
                           "c.id = h.cell_id WHERE c.run_id = ? AND h.itl_source = 'histogram'",
                           -1, &s, NULL) != SQLITE_OK)
        return CAL_ESTORE;
    bind_i64(s, 1, run_id);
    int rc = CAL_OK, step;
    while (rc == CAL_OK && (step = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        size_t k = 0;
        while (k < d->n_cells && d->cells[k].id != id) k++;
        if (k == d->n_cells) continue;
        if (!d->itl_hist && !(d->itl_hist = calloc(d->n_cells, sizeof *d->itl_hist))) {
            rc = cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
            break;
        }
        cal_hist *h = malloc(sizeof *h);
        char why[160];
        if (!h) { rc = cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id); break; }
        if (cal_hist_decode(sqlite3_column_blob(s, 1), (size_t)sqlite3_column_bytes(s, 1), h, why,
                            sizeof why) != CAL_OK) {
            free(h);
            rc = cal_st_fail(st, CAL_ESTORE, "cell %lld, cell_hists.itl: %s", (long long)id, why);
            break;
        }
        free(d->itl_hist[k]);
        d->itl_hist[k] = h;
    }
    sqlite3_finalize(s);
    return rc;
}

int cal_store_load_run(cal_store *st, int64_t run_id, int flags, cal_run_data **out)
{
    if (!st || !out) return CAL_EINVAL;
    *out = NULL;
    int rc = st->readonly ? CAL_OK : cal_store_flush(st);
    if (rc) return rc;
    st->why[0] = '\0';
    cal_run_data *d = calloc(1, sizeof *d);
    if (!d) return cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
    sqlite3_stmt *s = NULL;
    rc = CAL_ESTORE;
    /* one read transaction: a consistent snapshot while others write */
    if (cal_st_exec(st, "BEGIN")) { free(d); return CAL_ESTORE; }
    if (sqlite3_prepare_v2(st->db, "SELECT " RUN_COLS " FROM runs r WHERE r.id=?", -1, &s,
                           NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(s, 1, run_id);
    int step = sqlite3_step(s);
    if (step != SQLITE_ROW) {
        rc = step == SQLITE_DONE ? CAL_ENOTFOUND : CAL_ESTORE;
        goto out;
    }
    rc = read_run_row(st, s, &d->run);
    sqlite3_finalize(s);
    s = NULL;
    if (rc) goto out;

    char sql[4096];
    if (cal_st_cell_sql(st, sql, sizeof sql, 1)) { rc = CAL_EINTERNAL; goto out; }
    rc = CAL_ESTORE;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) goto out;
    sqlite3_bind_int64(s, 1, run_id);
    size_t cap = 0;
    rc = CAL_OK;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (grow((void **)&d->cells, &cap, d->n_cells + 1, sizeof *d->cells)) {
            rc = cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
            break;
        }
        rc = read_cell_row(st, s, &d->cells[d->n_cells++]);
        if (rc) break;
    }
    if (rc == CAL_OK && step != SQLITE_DONE) { cal_st_note(st); rc = CAL_ESTORE; }
    sqlite3_finalize(s);
    s = NULL;
    if (rc == CAL_OK && !(flags & CAL_LOAD_NO_REQS)) rc = load_requests(st, d, flags);
    if (rc == CAL_OK && !(flags & CAL_LOAD_NO_REQS)) rc = load_itl_hists(st, run_id, d);
    if (rc == CAL_OK) rc = load_telemetry(st, d);
    if (rc == CAL_OK && cal_run_data_read_protocol(d))
        rc = cal_st_fail(st, CAL_ENOMEM, "run %lld: out of memory", (long long)run_id);
out:
    if (rc != CAL_OK) cal_st_note(st);   /* before COMMIT resets SQLite's message */
    sqlite3_finalize(s);
    cal_st_exec(st, "COMMIT");
    if (rc != CAL_OK) {
        cal_run_data_free(&d);
        return rc;
    }
    *out = d;
    return CAL_OK;
}

int cal_store_load_cell_hists(cal_store *st, int64_t cell_id, cal_cell_hists *ch,
                              char *itl_source, size_t n)
{
    if (!st || !ch) return CAL_EINVAL;
    st->why[0] = '\0';
    cal_cell_hists_init(ch);
    if (itl_source && n) itl_source[0] = '\0';
    sqlite3_stmt *s = NULL;
    /* a store written before the table existed has no histograms */
    if (sqlite3_prepare_v2(st->db,
                           "SELECT itl_source, folded, chunks_dropped, ttft, itl, tpot, e2el "
                           "FROM cell_hists WHERE cell_id = ?", -1, &s, NULL) != SQLITE_OK) {
        sqlite3_finalize(s);
        return CAL_ENOTFOUND;
    }
    bind_i64(s, 1, cell_id);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(s);
        if (rc == SQLITE_DONE) return CAL_ENOTFOUND;
        cal_st_note(st);
        return CAL_ESTORE;
    }
    if (itl_source) col_copy(s, 0, itl_source, n);
    ch->folded = sqlite3_column_int64(s, 1);
    ch->chunks_dropped = sqlite3_column_int64(s, 2);
    rc = CAL_OK;
    for (int m = 0; m < CAL_HIST_N_METRIC && rc == CAL_OK; m++) {
        char why[160];
        const uint8_t *b = sqlite3_column_blob(s, 3 + m);
        size_t nb = (size_t)sqlite3_column_bytes(s, 3 + m);
        if (cal_hist_decode(b, nb, &ch->h[m], why, sizeof why) != CAL_OK)
            rc = cal_st_fail(st, CAL_ESTORE, "cell %lld, cell_hists.%s: %s", (long long)cell_id,
                      cal_hist_metric_name((cal_hist_metric)m), why);
    }
    sqlite3_finalize(s);
    if (rc != CAL_OK) cal_cell_hists_init(ch);
    return rc;
}

