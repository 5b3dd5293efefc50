/*
 * http.c - a test pack for sdk_test.go: makes the requests of
 * internal/testing/guesttest (HTTPRequests) through packrun_http_send
 * and reports what each answer decoded to (HTTPWant).
 */
#include <string.h>

#include "packrun.h"

PACKRUN_PACK("local.sdk.http.c")

#define BASE "http://127.0.0.1:8080"

static packrun_result run(const packrun_ctx *ctx, const char *input, size_t len) {
    packrun_buf b = {0};
    packrun_http_response r;
    packrun_http_request q;
    char name[32];
    size_t i;
    int st;
    static const packrun_http_header get_h[] = {{"Accept", "application/json"}, {"X-Tag", "a"}, {"X-Tag", "b"}};
    static const packrun_http_header post_h[] = {{"Content-Type", "text/plain; charset=utf-8"}};
    static const unsigned char bin[] = {0, 1, 255};
    (void)ctx, (void)input, (void)len;

    memset(&q, 0, sizeof q);
    q.url = BASE "/json";
    q.headers = get_h;
    q.header_count = 3;
    q.timeout_ms = 1500;
    if ((st = packrun_http_send(&q, &r)) != PACKRUN_OK)
        return packrun_fail("get", packrun_status_name(st));
    if (packrun_json_get_string(r.body.data, r.body.len, "name", name, sizeof name) != PACKRUN_OK)
        return packrun_fail("get", "no name");
    packrun_buf_raw(&b, "{\"get_status\":");
    packrun_buf_int(&b, r.status);
    packrun_buf_raw(&b, ",\"get_headers\":");
    packrun_buf_int(&b, (long long)r.header_count);
    packrun_buf_raw(&b, ",\"get_tag2\":");
    packrun_buf_cstring(&b, r.header_count > 2 ? r.headers[2].value : "");
    packrun_buf_raw(&b, ",\"get_len\":");
    packrun_buf_int(&b, (long long)r.body.len);
    packrun_buf_raw(&b, ",\"get_name\":");
    packrun_buf_cstring(&b, name);

    memset(&q, 0, sizeof q);
    q.method = "POST";
    q.url = BASE "/echo";
    q.headers = post_h;
    q.header_count = 1;
    q.body = "h\xc3\xa9llo";
    q.body_len = 6;
    if ((st = packrun_http_send(&q, &r)) != PACKRUN_OK)
        return packrun_fail("post", packrun_status_name(st));
    packrun_buf_raw(&b, ",\"post_status\":");
    packrun_buf_int(&b, r.status);
    packrun_buf_raw(&b, ",\"post_body\":");
    packrun_buf_string(&b, r.body.data, r.body.len);

    memset(&q, 0, sizeof q);
    q.method = "PUT";
    q.url = BASE "/bin";
    q.body = bin;
    q.body_len = sizeof bin;
    if ((st = packrun_http_send(&q, &r)) != PACKRUN_OK)
        return packrun_fail("put", packrun_status_name(st));
    packrun_buf_raw(&b, ",\"bin_status\":");
    packrun_buf_int(&b, r.status);
    packrun_buf_raw(&b, ",\"bin_bytes\":[");
    for (i = 0; i < r.body.len; i++) {
        if (i)
            packrun_buf_raw(&b, ",");
        packrun_buf_int(&b, (unsigned char)r.body.data[i]);
    }
    packrun_buf_raw(&b, r.truncated ? "],\"bin_truncated\":true" : "],\"bin_truncated\":false");

    memset(&q, 0, sizeof q);
    q.method = "";
    q.url = BASE "/denied";
    st = packrun_http_send(&q, &r);
    packrun_buf_raw(&b, ",\"denied_status\":");
    packrun_buf_int(&b, st);
    packrun_buf_raw(&b, ",\"denied_error\":");
    packrun_buf_string(&b, r.error.data, r.error.len);

    q.method = "GET";
    q.url = BASE "/big";
    st = packrun_http_send(&q, &r);
    packrun_buf_raw(&b, ",\"big_status\":");
    packrun_buf_int(&b, st);
    packrun_buf_raw(&b, ",\"big_kind\":");
    packrun_buf_string(&b, r.kind.data, r.kind.len);
    packrun_buf_raw(&b, ",\"big_error\":");
    packrun_buf_string(&b, r.error.data, r.error.len);
    packrun_buf_raw(&b, "}");
    return packrun_complete_buf(&b);
}

/* Argument checks: nothing is sent. */
static packrun_result args(const packrun_ctx *ctx, const char *input, size_t len) {
    packrun_http_request q;
    packrun_http_response r;
    (void)ctx, (void)input, (void)len;
    memset(&q, 0, sizeof q);
    if (packrun_http_send(&q, &r) != PACKRUN_E_ARG || packrun_http_send(NULL, &r) != PACKRUN_E_ARG)
        return packrun_fail("args", "a request without url was sent");
    q.url = BASE "/json";
    q.header_count = 1;
    if (packrun_http_send(&q, &r) != PACKRUN_E_ARG)
        return packrun_fail("args", "headers NULL with a count was sent");
    return packrun_complete("true");
}

PACKRUN_NODE("test.http", run)
PACKRUN_NODE("test.http_args", args)
