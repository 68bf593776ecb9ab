/* libFuzzer target: caliper serve's request parser — completions, chat and
 * /tokenize bodies — then the context check and the error JSON, on arbitrary
 * bytes. Invariants: it never crashes, a rejection always has a 4xx/5xx
 * status and a message, and a success respects the limits it was given.
 * Also built as a corpus replay for `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caliper/error.h"
#include "server/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned mode = data[0] % 3;
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    cal_srv_error err;
    if (mode == 2) {
        char *text = NULL;
        size_t len = 0;
        int rc = cal_srv_parse_tokenize(body, n, &text, &len, &err);
        if (rc == CAL_OK && (!text || strlen(text) > len)) __builtin_trap();
        if (rc != CAL_OK && (err.status < 400 || !err.message[0])) __builtin_trap();
        free(text);
        return 0;
    }
    cal_srv_limits lim = {4096, 512, NULL};
    cal_srv_request r;
    int rc = cal_srv_parse_request(mode ? CAL_SRV_CHAT : CAL_SRV_COMPLETIONS, body, n, &lim,
                                   &r, &err);
    if (rc != CAL_OK) {
        if (err.status < 400 || err.status > 599 || !err.message[0]) __builtin_trap();
        if (r.prompt || r.prompt_ids) __builtin_trap();
    } else {
        if (!r.prompt && !r.prompt_ids) __builtin_trap();
        for (int i = 0; i < r.n_prompt_ids; i++)
            if (r.prompt_ids[i] < 0 || r.prompt_ids[i] >= lim.vocab) __builtin_trap();
        if (r.max_tokens != -1 && (r.max_tokens < 1 || r.max_tokens > lim.max_ctx))
            __builtin_trap();
        if (!(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p > 0 && r.top_p <= 1))
            __builtin_trap();
        int n_prompt = r.prompt_ids ? r.n_prompt_ids : (int)(r.prompt_len % 600);
        if (cal_srv_check_context(&r, n_prompt, lim.max_ctx, &err) == CAL_OK &&
            (n_prompt + r.max_tokens > lim.max_ctx || r.min_tokens > r.max_tokens))
            __builtin_trap();
        cal_srv_request_free(&r);
    }
    char *j = cal_srv_error_json(&err);
    free(j);
    return 0;
}
