/*
 * fetch.c - an example skill written with the packrun C SDK that reaches
 * the network through its http grant (see pack.json).
 *
 * Pack "local.fetch.c", one node:
 *
 *   example.fetch  {"url":"http://...","field":"name"}
 *       -> {"status":n,"length":bytes,"value":<the field of the JSON body, null if absent>}
 *
 * The grant names the destination and a secret the host sends as a bearer
 * token: the module never sees it. A refusal fails the invocation with the
 * host's reason. Build: ../build.sh
 */
#include "packrun.h"

PACKRUN_PACK("local.fetch.c")

static packrun_result fetch(const packrun_ctx *ctx, const char *input, size_t len) {
    static const packrun_http_header accept[] = {{"Accept", "application/json"}};
    char url[2048], field[128];
    packrun_http_request req = {0};
    packrun_http_response resp;
    packrun_buf b = {0};
    const char *v;
    size_t vn;
    int st;
    (void)ctx;

    if (packrun_json_get_string(input, len, "url", url, sizeof url) != PACKRUN_OK ||
        packrun_json_get_string(input, len, "field", field, sizeof field) != PACKRUN_OK)
        return packrun_fail("invalid_input", "inputs.url and inputs.field must be strings");
    req.url = url;
    req.headers = accept;
    req.header_count = 1;
    st = packrun_http_send(&req, &resp);
    if (st != PACKRUN_OK) {
        packrun_buf d = {0};
        packrun_buf_raw(&d, "{\"status\":");
        packrun_buf_int(&d, st);
        packrun_buf_raw(&d, ",\"kind\":");
        packrun_buf_string(&d, resp.kind.data, resp.kind.len);
        packrun_buf_raw(&d, "}");
        return packrun_fail_details("http_request_failed", resp.error.len ? resp.error.data : packrun_status_name(st),
                                    d.err ? NULL : d.data);
    }
    packrun_buf_raw(&b, "{\"status\":");
    packrun_buf_int(&b, resp.status);
    packrun_buf_raw(&b, ",\"length\":");
    packrun_buf_int(&b, (long long)resp.body.len);
    packrun_buf_raw(&b, ",\"value\":");
    if (packrun_json_valid(resp.body.data, resp.body.len) &&
        packrun_json_get(resp.body.data, resp.body.len, field, &v, &vn) == PACKRUN_OK)
        packrun_buf_rawn(&b, v, vn);
    else
        packrun_buf_raw(&b, "null");
    packrun_buf_raw(&b, "}");
    return packrun_complete_buf(&b);
}

PACKRUN_NODE("example.fetch", fetch)
