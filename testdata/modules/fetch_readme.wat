;; fixture: fetch_readme
;; The http_request snippet of abi/guest/wat/README.md ("Outbound HTTP"),
;; copied verbatim between the "snippet" markers (TestWATReadmeFetch checks
;; it still matches the README) into a node pack, ABI 1.3.
;; Node "example.status" sends the snippet's GET and completes with the
;; response JSON as its output, or fails with code http_request_failed and
;; the host's {"error",...} as details.
;; Rebuild: wat2wasm fetch_readme.wat -o fetch_readme.wasm (build.sh).
(module
  ;; snippet: import
  (import "packrun:host/v1" "http_request" (func $http_request (param i32 i32 i32) (result i32)))
  ;; end snippet
  (memory (export "memory") 1)
  ;; snippet: data
  (data (i32.const 2048) "{\"method\":\"GET\",\"url\":\"http://127.0.0.1:8080/status\",\"headers\":[[\"Accept\",\"application/json\"]]}")
  ;; end snippet
  (data (i32.const 16) "local.fetch.wat")
  (data (i32.const 32) "example.status")
  ;; ok head: offset 64, len 32
  (data (i32.const 64) "{\"outcome\":\"completed\",\"output\":")
  ;; failed head: offset 128, len 101
  (data (i32.const 128) "{\"outcome\":\"failed\",\"error\":{\"code\":\"http_request_failed\",\"message\":\"http_request refused\",\"details\":")
  (data (i32.const 240) "}}")

  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; Bump allocator from 8192; openwop_free is a no-op.
  (global $heap (mut i32) (i32.const 8192))
  (func $alloc (export "openwop_alloc") (param $size i32) (result i32)
    (local $p i32) (local $end i32) (local $pages i32)
    (local.set $p (global.get $heap))
    (local.set $end
      (i32.and
        (i32.add (i32.add (local.get $p) (local.get $size)) (i32.const 7))
        (i32.const -8)))
    (local.set $pages
      (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq
              (memory.grow (i32.sub (local.get $pages) (memory.size)))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))
  (func $free (export "openwop_free") (param $ptr i32) (param $size i32))

  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i64)
    (call $ptrlen (i32.const 16) (i32.const 15)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (call $ptrlen (i32.const 32) (i32.const 14)))

  ;; head (ptr,len) + the response at 4096/4100 + "}}" (the ok envelope
  ;; closes with one brace: len 1 of the two).
  (func $envelope (param $head i32) (param $head_len i32) (param $tail_len i32) (result i64)
    (local $rp i32) (local $rl i32) (local $out i32) (local $o i32)
    (local.set $rp (i32.load (i32.const 4096)))
    (local.set $rl (i32.load (i32.const 4100)))
    (local.set $out (call $alloc (i32.add (local.get $rl) (i32.add (local.get $head_len) (i32.const 2)))))
    (memory.copy (local.get $out) (local.get $head) (local.get $head_len))
    (local.set $o (i32.add (local.get $out) (local.get $head_len)))
    (memory.copy (local.get $o) (local.get $rp) (local.get $rl))
    (local.set $o (i32.add (local.get $o) (local.get $rl)))
    (memory.copy (local.get $o) (i32.const 240) (local.get $tail_len))
    (local.set $o (i32.add (local.get $o) (local.get $tail_len)))
    (call $ptrlen (local.get $out) (i32.sub (local.get $o) (local.get $out))))

  (func $fail_with_response (result i64)
    (call $envelope (i32.const 128) (i32.const 101) (i32.const 2)))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (local $st i32)
    ;; snippet: call
(local.set $st (call $http_request (i32.const 2048) (i32.const 95) (i32.const 4096)))
(if (i32.ne (local.get $st) (i32.const 0))
  (then ;; (i32.load (i32.const 4096)), (i32.load (i32.const 4100)) hold {"error",...}
    (return (call $fail_with_response)))) ;; a helper of your own
    ;; end snippet
    (call $envelope (i32.const 64) (i32.const 32) (i32.const 1)))
)
