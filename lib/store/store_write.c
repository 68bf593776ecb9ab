/* The result store's writes: runs (begun, finished; target URLs without
 * credentials), cells with their requests and chunk blobs, telemetry rows
 * in batches, and each cell's histograms. */
#include <jansson.h>
#include "caliper/clock.h"
#include "caliper/keep.h"
#include "caliper/url.h"
#include "caliper/utf8.h"
#include "lib/util/c_locale.h"
#include "store_sql.h"

/* ---- runs ------------------------------------------------------------- */
void cal_run_clear(cal_run *r)
{
    if (!r) return;
    free(r->label); free(r->build); free(r->host_json); free(r->target_json);
    free(r->protocol_json); free(r->telemetry_json); free(r->verdicts_json);
    memset(r, 0, sizeof *r);
}

/* Replace each string in j that is a URL carrying credentials by the URL
 * without them; *changed = 1 when any was. A string that curl cannot parse
 * but looks like one (scheme and '@') becomes CAL_URL_UNPARSABLE. */
static int redact_json(json_t *j, int *changed)
{
    if (json_is_string(j)) {
        const char *v = json_string_value(j);
        int cred = cal_url_has_credentials(v);
        if (cred == 0 || (cred < 0 && !(strstr(v, "://") && strchr(v, '@')))) return CAL_OK;
        char clean[2048];
        cal_url_redact(v, clean, sizeof clean);   /* a placeholder on failure */
        *changed = 1;
        return json_string_set(j, clean) ? CAL_ENOMEM : CAL_OK;
    }
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            int rc = redact_json(v, changed);
            if (rc) return rc;
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++) {
            int rc = redact_json(json_array_get(j, i), changed);
            if (rc) return rc;
        }
    }
    return CAL_OK;
}

/* target_json as it may be stored: *out is NULL (keep the given text) or a
 * malloc'd redacted copy. */
static int redacted_target(cal_store *st, const char *target_json, char **out)
{
    *out = NULL;
    if (!target_json) return CAL_OK;
    json_error_t e;
    json_t *j = json_loads(target_json, JSON_DECODE_ANY, &e);
    /* jansson reports some allocation failures in its lexer as syntax
     * errors: a text that parses on a second try was short of memory */
    if (!j) j = json_loads(target_json, JSON_DECODE_ANY, &e);
    if (!j) {
        /* jansson explains every syntax error; a failure it leaves
         * unexplained is an allocation inside the parser */
        if (json_error_code(&e) == json_error_out_of_memory || !e.text[0])
            return cal_st_fail(st, CAL_ENOMEM, "target JSON: out of memory");
        return cal_st_fail(st, CAL_EINVAL, "target JSON: %s (line %d)", e.text, e.line);
    }
    int changed = 0, rc = redact_json(j, &changed);
    if (rc == CAL_OK && changed) {
        *out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
        if (!*out) rc = CAL_ENOMEM;
    }
    json_decref(j);
    return rc ? cal_st_fail(st, rc, "target JSON: out of memory") : CAL_OK;
}

int cal_store_begin_run(cal_store *st, cal_run *run)
{
    if (!st || !run) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return cal_st_fail(st, CAL_EPERM, "the store was opened read-only");
    if (run->label) {
        size_t n = strlen(run->label), bad = cal_utf8_check(run->label, n);
        if (!n) return cal_st_fail(st, CAL_EINVAL, "label: \"\" is empty");
        if (bad < n)
            return cal_st_fail(st, CAL_EINVAL, "label: byte %zu (0x%02x) is not valid UTF-8", bad + 1,
                        (unsigned char)run->label[bad]);
    }
    char *target = NULL;
    int rc = redacted_target(st, run->target_json, &target);
    if (rc) return rc;
    sqlite3_stmt *s = NULL;
    const char *sql = "INSERT INTO runs (label, started_wall_ns, ended_wall_ns, t0_mono_ns,"
                      " status, build, host, target, protocol, telemetry, verdicts)"
                      " VALUES (?,?,NULL,?,?,?,?,?,?,?,?)";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        free(target);
        return CAL_ESTORE;
    }
    if (!run->started_wall_ns) run->started_wall_ns = cal_wall_ns();
    if (!run->t0_mono_ns) run->t0_mono_ns = cal_now_ns();
    run->ended_wall_ns = -1;
    run->status = CAL_RUN_RUNNING;
    bind_text(s, 1, run->label);
    bind_i64(s, 2, run->started_wall_ns);
    bind_i64(s, 3, run->t0_mono_ns);
    bind_text(s, 4, RUN_STATUS[CAL_RUN_RUNNING]);
    bind_text(s, 5, run->build);
    bind_text(s, 6, run->host_json);
    bind_text(s, 7, target ? target : run->target_json);
    bind_text(s, 8, run->protocol_json);
    bind_text(s, 9, run->telemetry_json);
    bind_text(s, 10, run->verdicts_json);
    rc = sqlite3_step(s) == SQLITE_DONE ? CAL_OK : CAL_ESTORE;
    sqlite3_finalize(s);
    free(target);
    if (rc == CAL_OK) run->id = sqlite3_last_insert_rowid(st->db);
    return rc;
}

/* Final status, end time and verdicts of a run. */
static int update_run(cal_store *st, int64_t run_id, cal_run_status status,
                      const char *verdicts_json)
{
    sqlite3_stmt *s = NULL;
    const char *sql = "UPDATE runs SET status=?, ended_wall_ns=?, verdicts=? WHERE id=?";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) return CAL_ESTORE;
    bind_text(s, 1, cal_run_status_name(status));
    bind_i64(s, 2, cal_wall_ns());
    bind_text(s, 3, verdicts_json);
    bind_i64(s, 4, run_id);
    int rc = sqlite3_step(s) == SQLITE_DONE ? CAL_OK : CAL_ESTORE;
    sqlite3_finalize(s);
    if (rc == CAL_OK && sqlite3_changes(st->db) == 0) rc = CAL_ENOTFOUND;
    return rc;
}

int cal_store_finish_run(cal_store *st, int64_t run_id, cal_run_status status,
                         const char *verdicts_json)
{
    if (!st || (unsigned)status > CAL_RUN_FAILED) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return cal_st_fail(st, CAL_EPERM, "the store was opened read-only");
    int rc = cal_store_flush(st);
    int rc2 = update_run(st, run_id, status, verdicts_json);
    return rc2 ? rc2 : rc;
}

/* ---- chunk blobs ------------------------------------------------------ */
int cal_store_chunks_encode(int64_t send_ns, const int64_t *chunk_ns, int n,
                            uint8_t **out, size_t *out_bytes)
{
    *out = NULL;
    *out_bytes = 0;
    if (n <= 0) return CAL_OK;
    if (!chunk_ns) return CAL_EINVAL;
    uint8_t *b = malloc((size_t)n * 4);
    if (!b) return CAL_ENOMEM;
    int64_t prev = send_ns;
    for (int i = 0; i < n; i++) {
        int64_t d = (chunk_ns[i] - prev) / 1000;
        if (d < 0) d = 0;
        if (d > UINT32_MAX) d = UINT32_MAX;
        uint32_t u = (uint32_t)d;
        b[4 * i] = u & 0xff;
        b[4 * i + 1] = (u >> 8) & 0xff;
        b[4 * i + 2] = (u >> 16) & 0xff;
        b[4 * i + 3] = (u >> 24) & 0xff;
        /* accumulate from the rounded value so decode error does not grow */
        prev += (int64_t)u * 1000;
    }
    *out = b;
    *out_bytes = (size_t)n * 4;
    return CAL_OK;
}

int cal_store_chunks_decode(int64_t send_ns, const uint8_t *blob, size_t bytes,
                            int64_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (bytes % 4) return CAL_EPROTO;
    if (bytes == 0) return CAL_OK;
    if (!blob) return CAL_EINVAL;
    size_t k = bytes / 4;
    int64_t *t = malloc(k * sizeof *t);
    if (!t) return CAL_ENOMEM;
    if (k > INT32_MAX || send_ns < 0 || send_ns >= TS_MAX) {
        free(t);
        return CAL_EPROTO;
    }
    int64_t prev = send_ns;
    for (size_t i = 0; i < k; i++) {
        uint32_t u = (uint32_t)blob[4 * i] | (uint32_t)blob[4 * i + 1] << 8 |
                     (uint32_t)blob[4 * i + 2] << 16 | (uint32_t)blob[4 * i + 3] << 24;
        if (prev >= TS_MAX - (int64_t)u * 1000) {   /* past 2^62 ns: not a real stream */
            free(t);
            return CAL_EPROTO;
        }
        prev += (int64_t)u * 1000;
        t[i] = prev;
    }
    *out = t;
    *n = (int)k;
    return CAL_OK;
}

static int insert_requests(cal_store *st, int64_t cell_id, const cal_req_result *r, size_t n)
{
    sqlite3_stmt *s = NULL;
    const char *sql =
        "INSERT INTO requests (cell_id, idx, status, http_status, error, sched_ns, send_ns,"
        " first_token_ns, last_token_ns, end_ns, prompt_tokens, output_tokens, token_source,"
        " n_chunks, chunks, server_prefill_ms, server_decode_ms, server_decode_tokens,"
        " cached_tokens)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        cal_st_note(st);
        return CAL_ESTORE;
    }
    int rc = CAL_OK;
    for (size_t i = 0; i < n && rc == CAL_OK; i++) {
        const cal_req_result *q = &r[i];
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        bind_i64(s, 1, cell_id);
        bind_i64(s, 2, (int64_t)i);
        bind_text(s, 3, cal_req_status_name(q->status));
        if (q->http_status) bind_i64(s, 4, q->http_status);
        bind_text(s, 5, q->error);
        bind_opt(s, 6, q->sched_ns);
        if (q->send_ns) bind_i64(s, 7, q->send_ns);
        if (q->first_token_ns) bind_i64(s, 8, q->first_token_ns);
        if (q->last_token_ns) bind_i64(s, 9, q->last_token_ns);
        if (q->end_ns) bind_i64(s, 10, q->end_ns);
        bind_opt(s, 11, q->prompt_tokens);
        bind_opt(s, 12, q->output_tokens);
        bind_text(s, 13, q->tok_source == CAL_TOKSRC_USAGE ? "usage" : "chunks");
        bind_i64(s, 14, q->n_chunks);
        uint8_t *blob = NULL;
        size_t nb = 0;
        if (q->chunk_ns && q->n_chunks > 0) {
            rc = cal_store_chunks_encode(q->send_ns, q->chunk_ns, q->n_chunks, &blob, &nb);
            if (rc) break;
            sqlite3_bind_blob(s, 15, blob, (int)nb, free);
        }
        if (q->server_prefill_ms >= 0) bind_real(s, 16, q->server_prefill_ms);
        if (q->server_decode_ms >= 0) bind_real(s, 17, q->server_decode_ms);
        bind_opt(s, 18, q->server_decode_tokens);
        bind_opt(s, 19, q->cached_tokens);
        if (sqlite3_step(s) != SQLITE_DONE) rc = CAL_ESTORE;
    }
    if (rc) cal_st_note(st);
    sqlite3_finalize(s);
    return rc;
}

int cal_store_add_cell(cal_store *st, int64_t run_id, cal_cell *c,
                       const cal_req_result *results, size_t n)
{
    if (!st || !c || (n && !results)) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return cal_st_fail(st, CAL_EPERM, "the store was opened read-only");
    char sql[4096];
    if (cal_st_cell_sql(st, sql, sizeof sql, 0)) return CAL_EINTERNAL;
    if (cal_st_exec(st, "BEGIN IMMEDIATE")) return CAL_ESTORE;
    sqlite3_stmt *s = NULL;
    int rc = CAL_ESTORE;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) goto out;
    int k = 1;
    bind_i64(s, k++, run_id);
    bind_i64(s, k++, c->seq);
    bind_text(s, k++, cal_cell_kind_name(c->kind));
    bind_text(s, k++, c->target[0] ? c->target : NULL);
    bind_i64(s, k++, c->concurrency);
    bind_real(s, k++, c->rate);
    bind_i64(s, k++, c->prompt_tokens);
    bind_i64(s, k++, c->prompt_exact);
    bind_text(s, k++, c->content);
    bind_i64(s, k++, c->unique_prompts);
    bind_i64(s, k++, c->max_tokens);
    bind_i64(s, k++, c->output_fixed);
    bind_i64(s, k++, c->shot_index);
    bind_text(s, k++, cal_shot_kind_key(c->shot_kind));
    bind_i64(s, k++, c->rest_before_ns);
    bind_opt(s, k++, c->process_age_ns);
    bind_i64(s, k++, c->start_ns);
    bind_i64(s, k++, c->end_ns);
    bind_i64(s, k++, c->start_wall_ns);
    bind_i64(s, k++, c->n_requests);
    bind_i64(s, k++, c->cpu_ns);
    bind_i64(s, k++, c->chunks);
    bind_real(s, k++, c->send_lag_p99_ms);
    for (size_t i = 0; i < cal_summary_n_fields; i++) {
        const cal_field *f = &cal_summary_fields[i];
        double v = cal_summary_get(&c->sum, f);
        if (f->type == CAL_FIELD_INT) bind_i64(s, k++, (int64_t)v);
        else bind_real(s, k++, v);
    }
    bind_text(s, k++, c->prompt_basis != CAL_PROMPT_UNRECORDED ? cal_prompt_basis_key(c->prompt_basis)
                                                               : NULL);
    if (c->prompt_asked > 0) bind_i64(s, k, c->prompt_asked);
    k++;
    bind_opt(s, k++, c->prompt_offset);
    assert(k - 1 == CELL_N_FIXED + (int)cal_summary_n_fields + CELL_N_PROMPT &&
           k - 1 == sqlite3_bind_parameter_count(s));
    if (sqlite3_step(s) != SQLITE_DONE) goto out;
    int64_t cell_id = sqlite3_last_insert_rowid(st->db);
    rc = insert_requests(st, cell_id, results, n);
    if (rc == CAL_OK) rc = cal_st_exec(st, "COMMIT");
    if (rc == CAL_OK) {
        c->id = cell_id;
        c->run_id = run_id;
    }
out:
    if (rc != CAL_OK) cal_st_note(st);
    sqlite3_finalize(s);
    if (rc != CAL_OK) cal_st_rollback(st);
    return rc;
}

/* ---- telemetry -------------------------------------------------------- */
int cal_store_add_telemetry(cal_store *st, int64_t run_id, int64_t t_ns,
                            const char *backend, const char *metric,
                            const char *unit, double value)
{
    if (!st || !backend || !metric) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return cal_st_fail(st, CAL_EPERM, "the store was opened read-only");
    if (st->n_tel == TEL_BATCH) {
        int rc = cal_store_flush(st);
        if (rc) return rc;
    }
    assert(st->n_tel < TEL_BATCH);
    cal_store_tel_row *t = &st->tel[st->n_tel];
    t->t_ns = t_ns;
    snprintf(t->backend, sizeof t->backend, "%s", backend);
    snprintf(t->metric, sizeof t->metric, "%s", metric);
    snprintf(t->unit, sizeof t->unit, "%s", unit ? unit : "");
    t->value = value;
    st->tel_run[st->n_tel++] = run_id;
    return CAL_OK;
}

int cal_store_flush(cal_store *st)
{
    if (!st) return CAL_EINVAL;
    if (st->n_tel == 0) return CAL_OK;
    st->why[0] = '\0';
    assert(!st->readonly && st->n_tel <= TEL_BATCH);
    if (cal_st_exec(st, "BEGIN IMMEDIATE")) return CAL_ESTORE;
    sqlite3_stmt *s = NULL;
    int rc = CAL_ESTORE;
    if (sqlite3_prepare_v2(st->db,
                           "INSERT INTO telemetry (run_id, t_ns, backend, metric, unit, value)"
                           " VALUES (?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK)
        goto out;
    rc = CAL_OK;
    for (size_t i = 0; i < st->n_tel && rc == CAL_OK; i++) {
        sqlite3_reset(s);
        bind_i64(s, 1, st->tel_run[i]);
        bind_i64(s, 2, st->tel[i].t_ns);
        bind_text(s, 3, st->tel[i].backend);
        bind_text(s, 4, st->tel[i].metric);
        bind_text(s, 5, st->tel[i].unit);
        bind_real(s, 6, st->tel[i].value);
        if (sqlite3_step(s) != SQLITE_DONE) rc = CAL_ESTORE;
    }
    if (rc == CAL_OK) rc = cal_st_exec(st, "COMMIT");
out:
    if (rc != CAL_OK) cal_st_note(st);
    sqlite3_finalize(s);
    if (rc != CAL_OK) cal_st_rollback(st);
    else st->n_tel = 0;
    return rc;
}

/* ---- per-cell histograms ---------------------------------------------- */

int cal_store_add_cell_hists(cal_store *st, int64_t cell_id, const cal_cell_hists *ch,
                             const char *itl_source)
{
    if (!st || !ch || !itl_source) return CAL_EINVAL;
    st->why[0] = '\0';
    if (st->readonly) return cal_st_fail(st, CAL_EPERM, "the store was opened read-only");
    uint8_t *blob[CAL_HIST_N_METRIC] = {0};
    size_t bytes[CAL_HIST_N_METRIC] = {0};
    int rc = CAL_OK;
    for (int m = 0; m < CAL_HIST_N_METRIC && rc == CAL_OK; m++)
        rc = cal_hist_encode(&ch->h[m], &blob[m], &bytes[m]);
    sqlite3_stmt *s = NULL;
    if (rc == CAL_OK) {
        rc = CAL_ESTORE;
        if (sqlite3_prepare_v2(st->db,
                               "INSERT OR REPLACE INTO cell_hists (cell_id, itl_source, folded, "
                               "chunks_dropped, ttft, itl, tpot, e2el) VALUES (?,?,?,?,?,?,?,?)",
                               -1, &s, NULL) == SQLITE_OK) {
            bind_i64(s, 1, cell_id);
            bind_text(s, 2, itl_source);
            bind_i64(s, 3, ch->folded);
            bind_i64(s, 4, ch->chunks_dropped);
            for (int m = 0; m < CAL_HIST_N_METRIC; m++)
                sqlite3_bind_blob(s, 5 + m, blob[m], (int)bytes[m], SQLITE_TRANSIENT);
            if (sqlite3_step(s) == SQLITE_DONE) rc = CAL_OK;
        }
        if (rc != CAL_OK) cal_st_note(st);
    }
    sqlite3_finalize(s);
    for (int m = 0; m < CAL_HIST_N_METRIC; m++) free(blob[m]);
    return rc;
}

