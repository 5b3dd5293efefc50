;; fixture: extism_fetch
;; A minimal Extism plugin (it imports extism:host/env) for the outbound
;; HTTP tests. Its input is an http_request request JSON.
;;   fetch         passes the input to packrun:host/v1 http_request (the
;;                 Extism convention: request offset -> response offset) and
;;                 outputs the answer {"status":n,"body":<response or error>}.
;;   extism_fetch  passes it to Extism's own http_request (no body), which
;;                 packrun serves under the grant, and outputs the body.
;; Rebuild: wat2wasm extism_fetch.wat -o extism_fetch.wasm (build.sh).
(module
  (import "extism:host/env" "input_offset" (func $input_offset (result i64)))
  (import "extism:host/env" "length" (func $length (param i64) (result i64)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "http_request" (func $extism_http (param i64 i64) (result i64)))
  (import "packrun:host/v1" "http_request" (func $http (param i64) (result i64)))
  (memory (export "memory") 1)
  (func (export "fetch") (result i32)
    (local $r i64)
    (local.set $r (call $http (call $input_offset)))
    (call $output_set (local.get $r) (call $length (local.get $r)))
    (i32.const 0))
  (func (export "extism_fetch") (result i32)
    (local $r i64)
    (local.set $r (call $extism_http (call $input_offset) (i64.const 0)))
    (call $output_set (local.get $r) (call $length (local.get $r)))
    (i32.const 0))
)
