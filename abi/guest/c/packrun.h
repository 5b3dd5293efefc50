/*
 * packrun.h - C guest SDK for the packrun host ABI v1.
 *
 * Write node handlers in plain C; packrun.c provides every export the host
 * needs (openwop_abi_version, openwop_pack_name, openwop_node_count,
 * openwop_node_id_at, openwop_alloc, openwop_free, openwop_node_invoke),
 * parses the request envelope, builds the response envelope and wraps every
 * host import (namespaces "openwop" and "packrun:host/v1").
 *
 *     #include "packrun.h"
 *
 *     PACKRUN_PACK("local.greeter")
 *
 *     static packrun_result greet(const packrun_ctx *ctx, const char *input, size_t len) {
 *         char name[64];
 *         if (packrun_json_get_string(input, len, "name", name, sizeof name) != PACKRUN_OK)
 *             return packrun_fail("invalid_input", "inputs.name must be a string");
 *         packrun_buf out = {0};
 *         packrun_buf_raw(&out, "{\"greeting\":");
 *         packrun_buf_string(&out, name, strlen(name));
 *         packrun_buf_raw(&out, "}");
 *         return packrun_complete_buf(&out);
 *     }
 *     PACKRUN_NODE("example.greet", greet)
 *
 * Build (wasm32-wasi reactor; _initialize runs the PACKRUN_NODE constructors):
 *
 *     clang --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all \
 *           -I path/to/abi/guest/c -o node.wasm node.c path/to/abi/guest/c/packrun.c
 *
 * Memory ownership, in short (README.md has the details):
 *  - input_json and every string in packrun_ctx belong to the SDK and stay
 *    valid until the handler returns.
 *  - Results of host calls (packrun_str) belong to the SDK and stay valid
 *    until the handler returns; they are NUL-terminated. Copy what you keep.
 *  - JSON passed to packrun_complete/packrun_fail/packrun_suspend and to host
 *    calls is copied; the caller keeps ownership.
 *  - packrun_buf memory is the caller's (packrun_buf_free), except that
 *    packrun_complete_buf/packrun_suspend_buf take it over.
 */
#ifndef PACKRUN_H
#define PACKRUN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ status */

/* Status codes. Non-negative values are the host's status codes (abi.Status);
 * negative values are produced by the SDK itself. Any unknown non-zero value
 * is a failure. */
enum {
    PACKRUN_OK = 0,
    PACKRUN_ACCESS_DENIED = 1,     /* the pack's manifest does not grant the call */
    PACKRUN_VALIDATION = 10,       /* the host refused the request */
    PACKRUN_NOT_FOUND = 11,        /* absent entry / key / variable */
    PACKRUN_CAPABILITY_BREACH = 20,
    PACKRUN_HOST_ERROR = 99,

    PACKRUN_E_NOMEM = -1,      /* malloc failed */
    PACKRUN_E_JSON = -2,       /* not valid JSON (argument, input or host response) */
    PACKRUN_E_TYPE = -3,       /* the JSON value has another type than asked for */
    PACKRUN_E_TRUNCATED = -4,  /* the caller's buffer is too small (result is truncated) */
    PACKRUN_E_ARG = -5         /* a required argument is NULL */
};

/* Short name of a status, e.g. "not_found", for messages. */
const char *packrun_status_name(int status);

/* ----------------------------------------------------------- registration */

/* Context of one invocation (the request's "nodeContext"). All strings are
 * NUL-terminated, decoded from JSON, and valid until the handler returns. */
typedef struct packrun_ctx {
    const char *type_id;   /* the registered typeId being invoked */
    const char *run_id;
    const char *node_id;
    const char *tenant_id;
    int attempt;
    int abi_version;
    /* Raw JSON, or NULL/0 when absent. */
    const char *configurable;
    size_t configurable_len;
    const char *agent;
    size_t agent_len;
} packrun_ctx;

/* What a handler returns; obtained from packrun_complete, packrun_fail or
 * packrun_suspend (and their variants). */
typedef enum packrun_result {
    PACKRUN_NONE = 0, /* internal: no outcome was set */
    PACKRUN_COMPLETED,
    PACKRUN_FAILED,
    PACKRUN_SUSPENDED
} packrun_result;

/* A node handler. input_json is the request's "inputs" value (usually an
 * object), NUL-terminated, len bytes long. */
typedef packrun_result (*packrun_handler)(const packrun_ctx *ctx, const char *input_json, size_t len);

/* Defines the pack name. Use exactly once per module. */
#define PACKRUN_PACK(name)                                   \
    const char packrun__pack_name[] = name;                  \
    const size_t packrun__pack_name_len = sizeof(name) - 1;

/* Registers a node from a constructor; nodes get indexes in the order their
 * constructors run (declaration order within one file). */
#define PACKRUN_NODE(type_id, handler) PACKRUN__NODE(type_id, handler, __COUNTER__)
#define PACKRUN__NODE(type_id, handler, n) PACKRUN__NODE2(type_id, handler, n)
#define PACKRUN__NODE2(type_id, handler, n)                                      \
    __attribute__((constructor)) static void packrun__register_##n(void) {      \
        packrun_register(type_id, handler);                                      \
    }

/* Registers a node. Call it from a constructor (or PACKRUN_NODE): the host
 * reads the node list right after _initialize. type_id must stay valid
 * (a string literal). Returns PACKRUN_OK, PACKRUN_E_ARG for an empty id or a
 * NULL handler, PACKRUN_VALIDATION for a duplicate id, PACKRUN_E_NOMEM. */
int packrun_register(const char *type_id, packrun_handler handler);

/* ---------------------------------------------------------------- outcome */

/* Completes with output_json (any JSON value, copied). Invalid JSON turns
 * the outcome into a failure with code "invalid_output". */
packrun_result packrun_complete(const char *output_json);
packrun_result packrun_complete_n(const char *output_json, size_t len);

/* Fails with an error code (e.g. "invalid_input") and a plain-text message
 * (both escaped by the SDK; message may be NULL). details_json may be NULL. */
packrun_result packrun_fail(const char *code, const char *message);
packrun_result packrun_fail_details(const char *code, const char *message, const char *details_json);

/* Suspends with an interrupt payload (any JSON value, copied); the host
 * records it and the invocation ends as "suspended". */
packrun_result packrun_suspend(const char *payload_json);
packrun_result packrun_suspend_n(const char *payload_json, size_t len);

/* ------------------------------------------------------ results, buffers */

/* A byte string owned by the SDK: NUL-terminated at data[len], valid until
 * the handler returns. */
typedef struct packrun_str {
    const char *data;
    size_t len;
} packrun_str;

/* A growable buffer for building JSON. Zero-initialise it ({0}). On
 * allocation failure it sets err and ignores further appends. data is
 * always NUL-terminated once anything was appended. */
typedef struct packrun_buf {
    char *data;
    size_t len;
    size_t cap;
    int err; /* PACKRUN_OK or PACKRUN_E_NOMEM */
} packrun_buf;

void packrun_buf_raw(packrun_buf *b, const char *s);               /* append s verbatim */
void packrun_buf_rawn(packrun_buf *b, const char *s, size_t n);    /* append n bytes verbatim */
void packrun_buf_string(packrun_buf *b, const char *s, size_t n);  /* append "s" as a JSON string */
void packrun_buf_cstring(packrun_buf *b, const char *s);           /* same for a NUL-terminated s */
void packrun_buf_int(packrun_buf *b, long long v);                 /* append a decimal integer */
void packrun_buf_free(packrun_buf *b);

/* Complete / suspend with the contents of a buffer and free it. A buffer
 * with err set fails the invocation with code "out_of_memory". */
packrun_result packrun_complete_buf(packrun_buf *b);
packrun_result packrun_suspend_buf(packrun_buf *b);

/* ------------------------------------------------------------------- JSON */

/* Reports whether [json, json+len) is exactly one valid JSON value
 * (surrounding whitespace allowed; nesting up to 64; strings must be
 * valid UTF-8). */
int packrun_json_valid(const char *json, size_t len);

/* Finds member key of the JSON object json (top level only) and points
 * *value and *value_len at its raw value. The last duplicate wins. Returns
 * PACKRUN_OK, PACKRUN_NOT_FOUND, PACKRUN_E_TYPE (json is not an object) or
 * PACKRUN_E_JSON. */
int packrun_json_get(const char *json, size_t len, const char *key, const char **value, size_t *value_len);

/* Decodes the string member key into buf (NUL-terminated, escapes decoded,
 * lone surrogate escapes replaced by U+FFFD). Returns PACKRUN_OK, PACKRUN_NOT_FOUND,
 * PACKRUN_E_TYPE (not a string; null counts as absent: PACKRUN_NOT_FOUND),
 * PACKRUN_E_TRUNCATED (buf too small: it holds a truncated prefix) or
 * PACKRUN_E_JSON. *out_len (may be NULL) gets the full decoded length. */
int packrun_json_get_string(const char *json, size_t len, const char *key, char *buf, size_t cap);
int packrun_json_get_string_n(const char *json, size_t len, const char *key, char *buf, size_t cap, size_t *out_len);

/* Reads an integer member (no fraction or exponent; range of long long).
 * Same returns as packrun_json_get_string, PACKRUN_E_TYPE for non-integers. */
int packrun_json_get_int(const char *json, size_t len, const char *key, long long *out);

/* Reads a boolean member (true/false). */
int packrun_json_get_bool(const char *json, size_t len, const char *key, int *out);

/* Decodes the JSON string value at [value, value+value_len) (quotes
 * included, as returned by packrun_json_get) into buf; returns like
 * packrun_json_get_string. */
int packrun_json_string(const char *value, size_t value_len, char *buf, size_t cap, size_t *out_len);

/* Parses the raw JSON value [value, value+value_len) (surrounding
 * whitespace allowed) as an integer, e.g. a packrun_memory_get result.
 * Returns PACKRUN_OK, PACKRUN_E_TYPE or PACKRUN_E_JSON. */
int packrun_json_int(const char *value, size_t value_len, long long *out);

/* Writes s (n bytes, UTF-8) as a quoted JSON string into out, snprintf
 * style: returns the full length needed (without the terminating NUL) and
 * writes at most cap-1 bytes plus a NUL when cap > 0. */
size_t packrun_json_escape(const char *s, size_t n, char *out, size_t cap);

/* ---------------------------------------------------- openwop host calls */

enum {
    PACKRUN_LOG_TRACE = 0,
    PACKRUN_LOG_DEBUG = 1,
    PACKRUN_LOG_INFO = 2,
    PACKRUN_LOG_WARN = 3,
    PACKRUN_LOG_ERROR = 4
};

/* Logs a UTF-8 message (openwop_log). */
void packrun_log(int level, const char *message);
void packrun_log_n(int level, const char *message, size_t len);
/* printf-style, without stdio (so no WASI imports). Supported: %s %.*s %c
 * %d %i %u %x with the length modifiers l, ll, z, and %%; flags, width
 * and precision (other than %.*s) are not. Messages longer than 1023 bytes
 * are truncated. */
void packrun_logf(int level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Host clock in Unix milliseconds (recorded for replay). */
int64_t packrun_now_ms(void);

/* Fills buf with n bytes seeded by (runId, nodeId, attempt). */
int packrun_random(void *buf, size_t n);

/* Run variables: get returns PACKRUN_NOT_FOUND when unset; value_json must
 * be valid JSON. */
int packrun_variable_get(const char *name, packrun_str *value);
int packrun_variable_set(const char *name, const char *value_json);

/* Run channels: read gives the JSON array of values written so far ("[]"
 * when none); write appends one JSON value. */
int packrun_channel_read(const char *name, packrun_str *values);
int packrun_channel_write(const char *name, const char *value_json);

/* Asks the host to suspend the invocation with payload_json. When the
 * invocation is resumed, the host runs it again and this call returns
 * PACKRUN_OK with the resume value; on the first run it does not return
 * at all (the host ends the invocation as "suspended"). */
int packrun_interrupt(const char *payload_json, packrun_str *resume);

/* -------------------------------------------- packrun:host/v1 host calls */

/* Memory entries. value_json is any JSON value; ttl_seconds <= 0 means no
 * expiry; secret != 0 marks the entry secret (redacted from evidence). */
int packrun_memory_get(const char *ns, const char *key, packrun_str *value);
int packrun_memory_put(const char *ns, const char *key, const char *value_json, long long ttl_seconds, int secret);
int packrun_memory_delete(const char *ns, const char *key);
/* keys gets the JSON array of keys; prefix may be NULL. */
int packrun_memory_list(const char *ns, const char *prefix, packrun_str *keys);

/* Stages a follow-up task (TaskIntent JSON); *staged (may be NULL) gets the
 * number of staged tasks. Applied only if the attempt completes. */
int packrun_queue_enqueue(const char *intent_json, long long *staged);

/* Calls a granted adapter with input_json. output (may be NULL) gets the
 * adapter's "output" value, response (may be NULL) the whole response
 * object (with "exit_status"). */
int packrun_adapter_invoke(const char *adapter, const char *input_json, packrun_str *output, packrun_str *response);

/* Adds a record of kind with data_json to the attempt's evidence. */
int packrun_evidence_record(const char *kind, const char *data_json);

/* Stores an artifact of the attempt from text (UTF-8, n bytes) or from
 * base64 data. content_type may be NULL. artifact_id/sha256 may be NULL. */
int packrun_artifact_put_text(const char *role, const char *name, const char *content_type,
                              const char *text, size_t n, packrun_str *artifact_id, packrun_str *sha256);
int packrun_artifact_put_base64(const char *role, const char *name, const char *content_type,
                                const char *base64, packrun_str *artifact_id, packrun_str *sha256);

/* Reads pack configuration; PACKRUN_NOT_FOUND when absent. */
int packrun_config_get(const char *key, packrun_str *value);

/* Raw packrun:host/v1 call: fn is one of "memory_get", ..., "config_get";
 * request_json is sent as is; response (may be NULL) gets the host's
 * response ({0,""} when there is none). PACKRUN_E_ARG for an unknown fn,
 * and for "sensor_emit" (ABI 1.1) and "message_publish" (ABI 1.2): were
 * they in the table, every module would import them; use
 * packrun_sensor_emit and packrun_message_publish. */
int packrun_host_call(const char *fn, const char *request_json, size_t len, packrun_str *response);

/* ------------------------------------------- packrun:host/v1, ABI 1.1 call */

/* Reports a SensorEvent (seed 003 section 5; event_json is sent as is as
 * the request): it is staged and applied only if the attempt completes.
 * sensor_id defaults to the node's typeId and may not name another node.
 * event_id (may be NULL) gets the event's event_id; *staged (may be NULL)
 * the number of events the attempt staged so far. Needs ABI 1.1
 * ("abi":{"version":1,"minor":1}) and the sensors grant:
 * PACKRUN_ACCESS_DENIED without it, PACKRUN_VALIDATION for an event the
 * host refuses, PACKRUN_E_JSON (not sent) for invalid event_json. Only a
 * module that calls it imports sensor_emit (the linker drops it
 * otherwise). */
int packrun_sensor_emit(const char *event_json, packrun_str *event_id, long long *staged);

/* ------------------------------------------ packrun:host/v1, ABI 1.2 calls */

/* The format of an agent message (the three formats of seeds 000-002). */
typedef enum packrun_message_format {
    PACKRUN_AGENT_ENVELOPE, /* "agent-envelope" (seed 000) */
    PACKRUN_AGENT_MESSAGE,  /* "agent-message" (seed 001) */
    PACKRUN_BUS_ENVELOPE    /* "bus-envelope" (seed 002) */
} packrun_message_format;

/* Publishes an agent message (message_json in format; signature, the
 * Ed25519 signature, may be NULL): it is staged and published only if the
 * attempt completes. message_id and hash (hex SHA-256 of the canonical
 * form) may be NULL; *staged (may be NULL) gets the number of messages the
 * attempt staged so far. Needs ABI 1.2 ("abi":{"version":1,"minor":2}) and
 * the messages grant with the message's topic: PACKRUN_ACCESS_DENIED for a
 * topic outside it, PACKRUN_VALIDATION for a message its seed refuses,
 * PACKRUN_E_JSON (not sent) for invalid message_json, PACKRUN_E_ARG for an
 * unknown format. Only a module that calls it imports message_publish (the
 * linker drops it otherwise). */
int packrun_message_publish(packrun_message_format format, const char *message_json, const char *signature,
                            packrun_str *message_id, packrun_str *hash, long long *staged);

/* ------------------------------------------- packrun:host/v1, ABI 1.3 call */

/* One HTTP header: a name and its value (NUL-terminated). */
typedef struct packrun_http_header {
    const char *name;
    const char *value;
} packrun_http_header;

/* An outbound request for packrun_http_send. */
typedef struct packrun_http_request {
    const char *method;                 /* NULL or "" for "GET" */
    const char *url;                    /* absolute http:// or https:// URL within the http grant */
    const packrun_http_header *headers; /* sent in this order; a name may repeat */
    size_t header_count;
    const void *body;                   /* NULL (or body_len 0) for no body; sent as "body" when */
    size_t body_len;                    /* it is valid UTF-8, else as "body_base64" */
    long long timeout_ms;               /* <= 0: the host's default (the host caps it) */
} packrun_http_request;

/* What packrun_http_send got back. Every pointer belongs to the SDK and
 * stays valid until the handler returns. */
typedef struct packrun_http_response {
    int status;                   /* the HTTP status: 404 or 500 are responses, not errors */
    packrun_http_header *headers; /* in the order received */
    size_t header_count;
    packrun_str body;             /* the body bytes (NUL-terminated at len; may hold NULs) */
    int truncated;                /* the host cut the body at its limit (when the grant says so) */
    packrun_str error;            /* on a refusal: the host's one-line reason ("" if none) */
    packrun_str kind;             /* on PACKRUN_CAPABILITY_BREACH: the limit, e.g. "http-timeout" */
} packrun_http_response;

/* Makes an outbound HTTP request through the host and fills *resp. Needs
 * ABI 1.3 ("abi":{"version":1,"minor":3}) and an http grant naming the
 * destination; the host adds the grant's secrets (bearer token, header,
 * query parameter) on the way out and strips them from what the module
 * sees. Returns PACKRUN_OK for any HTTP answer, else the host's status with
 * resp->error (and resp->kind) set: PACKRUN_ACCESS_DENIED (no grant for the
 * destination or method, a refused address range, a redirect outside the
 * grant), PACKRUN_VALIDATION (malformed request), PACKRUN_CAPABILITY_BREACH
 * (kind "http-requests", "http-request-bytes", "http-response-bytes",
 * "http-timeout"), PACKRUN_HOST_ERROR (connection, DNS or TLS failure);
 * PACKRUN_E_ARG (not sent) without req, url or resp, PACKRUN_E_JSON for a
 * response that does not decode. Only a module that calls it imports
 * http_request (the linker drops it otherwise). */
int packrun_http_send(const packrun_http_request *req, packrun_http_response *resp);

#ifdef __cplusplus
}
#endif

#endif /* PACKRUN_H */
