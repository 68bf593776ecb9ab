#!/usr/bin/env bash
# The stored protocol and target are read in one place: the serializer
# lib/store/protocol_record.c. Every other file of lib/ and src/ reads the
# record's fields (cal_run_data.proto). This fails when a file parses the
# stored protocol or target text again, or reads a protocol key by name:
#  - json_loads / parse_obj / json_loadb of a protocol_json or target_json,
#    outside the serializer and the few places that pass the text through
#    whole (listed below, each by its exact line);
#  - json_object_get / cal_report_j* of a key only the protocol has;
#  - the noise prior's text readers (cal_noise_*_of) called from lib/ or src/.
# Each pattern is first shown to catch a planted line, so the test cannot
# pass by matching nothing.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
T=$E2E_TMP
SERIALIZER=lib/store/protocol_record.c

# where the stored text is parsed only to be passed on whole, or to take the
# credentials out of it before it is stored
ALLOWED_PARSE=(
  'lib/store/store_write.c:    json_t *j = json_loads(target_json, JSON_DECODE_ANY, &e);'
  'lib/store/store_write.c:    if (!j) j = json_loads(target_json, JSON_DECODE_ANY, &e);'
  'lib/report/export.c:    json_object_set_new(run, "target", as_stored(r->target_json));'
  'lib/report/export.c:    json_object_set_new(run, "protocol", as_stored(r->protocol_json));'
  'lib/protocol/shard.c:    json_object_set_new(run, "target", jobj_text(r->target_json));'
  'lib/protocol/shard.c:    json_object_set_new(run, "protocol", jobj_text(r->protocol_json));'
)
# a key of the same name in another format: a caliper-result file's per-cell
# fingerprint object (report.h), not the stored protocol
ALLOWED_KEY=(
  'lib/report/json.c:    cal_report_jstr(o, "output_policy", fp->output_policy, sizeof fp->output_policy);'
)
PARSE_RE='(json_loads|json_loadb|parse_obj|jobj_text|as_stored)[[:space:]]*\([^;]*(protocol_json|target_json)'
PROTO_KEYS='noise_prior|noise_floor|equivalence|output_policy|unique_prompts|keep_chunks|shot_sd|shot_df|first_sd|first_df|first_left_out|percentile_source|goodput_rule|duration_rule|prompt_len|output_len|concurrency_fleet'
KEY_RE="(json_object_get|cal_report_jstr|cal_report_jnum|cal_report_jint|jstr|jnum)[[:space:]]*\\([^;]*\"($PROTO_KEYS)\""
NOISE_RE='cal_noise_(prior|first|series)_of[[:space:]]*\(|cal_noise_first_left_out[[:space:]]*\('

# not_allowed NAME: the grep hits on stdin (file:line:text) not in the
# array NAME (file:text)
not_allowed() {
  local -n allow=$1
  while IFS= read -r hit; do
    file=${hit%%:*}; rest=${hit#*:}; line=${rest#*:}
    allowed=0
    for a in "${allow[@]}"; do [ "$file:$line" = "$a" ] && allowed=1; done
    [ $allowed = 1 ] || echo "$hit"
  done
}
# parses DIR...: every parse of the stored texts not in the allowed list
parses() {
  grep -rnE --include='*.c' --include='*.h' "$PARSE_RE" "$@" | grep -v "^$SERIALIZER:" |
    not_allowed ALLOWED_PARSE
}
key_reads() {
  grep -rnE --include='*.c' --include='*.h' "$KEY_RE" "$@" | grep -v "^$SERIALIZER:" |
    not_allowed ALLOWED_KEY
}
noise_reads() {
  grep -rnE --include='*.c' "$NOISE_RE" "$@" | grep -v "^lib/protocol/noise.c:"
}

# ---- the patterns catch what they are for --------------------------------
mkdir -p "$T/plant/lib/x"
cat >"$T/plant/lib/x/bad.c" <<'EOF'
    json_t *p = d->run.protocol_json ? json_loads(d->run.protocol_json, 0, NULL) : NULL;
    double f = cal_report_jnum(p, "noise_floor");
    const char *o = json_string_value(json_object_get(p, "output_policy"));
    int has = cal_noise_series_of(d->run.protocol_json, key, sizeof key);
    json_t *t = parse_obj(r->target_json);
EOF
n=$(cd "$T/plant" && parses lib | wc -l)
check "a planted parse of the stored texts is caught (2 of 2, got $n)" [ "$n" = 2 ]
n=$(cd "$T/plant" && key_reads lib | wc -l)
check "a planted read of protocol keys is caught (2 of 2, got $n)" [ "$n" = 2 ]
n=$(cd "$T/plant" && noise_reads lib | wc -l)
check "a planted noise-prior text read is caught (1 of 1, got $n)" [ "$n" = 1 ]
check "the serializer itself matches the key pattern (it is the reader)" \
  bash -c "cd '$root' && grep -qE '\"(output_policy|noise_prior)\"' $SERIALIZER"

# ---- the tree ---------------------------------------------------------------
cd "$root" || exit 1
out=$(parses lib src)
if [ -z "$out" ]; then ok "no file but the serializer parses the stored protocol or target"
else not_ok "no file but the serializer parses the stored protocol or target:"; echo "$out"; fi
out=$(key_reads lib src)
if [ -z "$out" ]; then ok "no file but the serializer reads a protocol key by name"
else not_ok "no file but the serializer reads a protocol key by name:"; echo "$out"; fi
out=$(noise_reads lib src)
if [ -z "$out" ]; then ok "lib/ and src/ take the noise prior from the record"
else not_ok "lib/ and src/ take the noise prior from the record:"; echo "$out"; fi
# each allowed line still exists: a stale allowance would hide a new one
for a in "${ALLOWED_PARSE[@]}" "${ALLOWED_KEY[@]}"; do
  f=${a%%:*}; l=${a#*:}
  check "allowed pass-through still present: $f" grep -qxF -- "$l" "$f"
done
finish
