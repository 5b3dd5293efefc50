;; template.wat - a packrun node pack in WebAssembly text, to copy and edit.
;;
;; Pack "local.template.wat", two nodes:
;;   0 "example.visits"   logs "visits invoked", reads memory entry
;;                        counters/visits (memory_get; absent -> 0), writes it
;;                        back plus one with a one-hour TTL (memory_put) and
;;                        completes with {"count":n}. A non-zero host status
;;                        (e.g. memory not granted) fails with
;;                        "host_call_failed".
;;   1 "example.approve"  asks the host to suspend with {"question":"approve?"}
;;                        (openwop_interrupt); when resumed, completes with
;;                        {"approved":<resume value>}.
;;
;; README.md explains every part. Sections, in order:
;;   1. imports         host functions (must come before any definition)
;;   2. memory, data    the exported memory and the constant strings
;;   3. allocator       openwop_alloc / openwop_free (bump allocator)
;;   4. metadata        openwop_abi_version, pack name, node count and ids
;;   5. helpers         $pack (packed i64 results), $copy, $utoa, $parse_value
;;   6. nodes           one function per node, returning a packed envelope
;;   7. dispatch        openwop_node_invoke
;;
;; Every (ptr,len) result uses the packed i64 form: ptr in the low 32 bits,
;; len in the high 32 bits (see $pack).
;;
;; Memory layout:
;;   [0, 16)       reserved, so that no valid pointer is 0
;;   [16, 640)     constant strings (data segments)
;;   [640, 648)    resp_out slot for packrun:host/v1 calls (two u32)
;;   [704, 960)    scratch buffer for building host-call requests
;;   [1024, ...)   heap of openwop_alloc; grows memory on demand
;;
;; Build: ./build.sh  (wat2wasm template.wat -o template.wasm)
(module
  ;; ============================================================ 1. imports
  ;; openwop namespace. A (ptr,len) result is imported as one i64 (packed);
  ;; (result i32 i32) would select the multi-value form instead.
  (import "openwop" "openwop_log" (func $log (param $level i32) (param $ptr i32) (param $len i32)))
  (import "openwop" "openwop_interrupt" (func $interrupt (param $ptr i32) (param $len i32) (result i64)))
  ;; packrun:host/v1: (req_ptr, req_len, resp_out) -> status. The host writes
  ;; the response's (ptr, len) as two little-endian u32 at resp_out ((0,0)
  ;; when there is none); the response buffer comes from openwop_alloc and
  ;; belongs to the module.
  (import "packrun:host/v1" "memory_get" (func $memory_get (param i32 i32 i32) (result i32)))
  (import "packrun:host/v1" "memory_put" (func $memory_put (param i32 i32 i32) (result i32)))

  ;; ====================================================== 2. memory, data
  (memory (export "memory") 1)

  (data (i32.const 16)  "local.template.wat")                                     ;; 18 pack name
  (data (i32.const 40)  "example.visits")                                         ;; 14 node 0
  (data (i32.const 56)  "example.approve")                                        ;; 15 node 1
  (data (i32.const 72)  "visits invoked")                                         ;; 14 log message
  (data (i32.const 88)  "{\"namespace\":\"counters\",\"key\":\"visits\"}")        ;; 39 memory_get request
  (data (i32.const 128) "{\"namespace\":\"counters\",\"key\":\"visits\",\"value\":") ;; 47 memory_put request, head
  (data (i32.const 176) ",\"ttlSeconds\":3600}")                                  ;; 19 memory_put request, tail
  (data (i32.const 200) "{\"outcome\":\"completed\",\"output\":{\"count\":")      ;; 41 visits envelope, head
  (data (i32.const 248) "}}")                                                     ;;  2 envelope tail
  (data (i32.const 256) "{\"question\":\"approve?\"}")                            ;; 23 interrupt payload
  (data (i32.const 280) "{\"outcome\":\"completed\",\"output\":{\"approved\":")   ;; 44 approve envelope, head
  (data (i32.const 328) "null")                                                   ;;  4
  (data (i32.const 336) "{\"outcome\":\"failed\",\"error\":{\"code\":\"host_call_failed\",\"message\":\"memory_get or memory_put returned a non-zero status\"}}") ;; 120
  (data (i32.const 456) "{\"outcome\":\"failed\",\"error\":{\"code\":\"out_of_memory\",\"message\":\"openwop_alloc failed\"}}") ;; 86
  (data (i32.const 544) "{\"outcome\":\"failed\",\"error\":{\"code\":\"unknown_node\",\"message\":\"node index out of range\"}}") ;; 88

  (global $resp_out i32 (i32.const 640))
  (global $scratch i32 (i32.const 704))

  ;; ========================================================= 3. allocator
  ;; A bump allocator: openwop_alloc hands out 8-byte aligned blocks from
  ;; $heap_top and grows memory when needed; openwop_free only reclaims the
  ;; newest block (ptr + rounded size == $heap_top) and ignores everything
  ;; else, including static strings below $heap_base. That is enough here:
  ;; each invocation runs on a fresh instance by default, and the usual
  ;; sequence (host-call response freed right after use, response envelope
  ;; freed by the host) pops in order, so reused instances stay bounded.
  (global $heap_base i32 (i32.const 1024))
  (global $heap_top (mut i32) (i32.const 1024))

  ;; max(size, 1) rounded up to a multiple of 8, as i64 (no overflow)
  (func $rounded (param $size i32) (result i64)
    (i64.and
      (i64.add
        (i64.extend_i32_u
          (select (local.get $size) (i32.const 1) (i32.gt_s (local.get $size) (i32.const 0))))
        (i64.const 7))
      (i64.const -8)))

  (func $alloc (export "openwop_alloc") (param $size i32) (result i32)
    (local $ptr i32) (local $end i64) (local $have i64)
    (if (i32.lt_s (local.get $size) (i32.const 0))
      (then (return (i32.const 0))))                  ;; 2 GiB or more: refuse
    (local.set $ptr (global.get $heap_top))
    (local.set $end (i64.add (i64.extend_i32_u (local.get $ptr)) (call $rounded (local.get $size))))
    (local.set $have (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
    (if (i64.gt_u (local.get $end) (local.get $have))
      (then
        ;; grow by ceil((end - have) / 64 KiB) pages; -1 means refused
        (if (i32.eq
              (memory.grow
                (i32.wrap_i64
                  (i64.shr_u
                    (i64.add (i64.sub (local.get $end) (local.get $have)) (i64.const 65535))
                    (i64.const 16))))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap_top (i32.wrap_i64 (local.get $end)))
    (local.get $ptr))

  (func $free (export "openwop_free") (param $ptr i32) (param $size i32)
    (if (i32.lt_u (local.get $ptr) (global.get $heap_base))
      (then (return)))                                ;; static data, or 0
    (if (i64.eq
          (i64.add (i64.extend_i32_u (local.get $ptr)) (call $rounded (local.get $size)))
          (i64.extend_i32_u (global.get $heap_top)))
      (then (global.set $heap_top (local.get $ptr)))))

  ;; ========================================================== 4. metadata
  (func (export "openwop_abi_version") (result i32)
    (i32.const 1))

  (func (export "openwop_pack_name") (result i64)
    (call $pack (i32.const 16) (i32.const 18)))

  (func (export "openwop_node_count") (result i32)
    (i32.const 2))

  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 0))
      (then (return (call $pack (i32.const 40) (i32.const 14)))))
    (if (i32.eq (local.get $index) (i32.const 1))
      (then (return (call $pack (i32.const 56) (i32.const 15)))))
    (i64.const 0))

  ;; =========================================================== 5. helpers
  ;; (ptr, len) -> packed i64: ptr | len << 32
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; copies n bytes from src to dst (memory.copy needs bulk memory; a loop
  ;; works everywhere)
  (func $copy (param $dst i32) (param $src i32) (param $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (i32.store8 (local.get $dst) (i32.load8_u (local.get $src)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
        (local.set $src (i32.add (local.get $src) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next))))

  ;; number of decimal digits of v (unsigned)
  (func $digits (param $v i32) (result i32)
    (local $n i32)
    (local.set $n (i32.const 1))
    (block $done
      (loop $next
        (br_if $done (i32.lt_u (local.get $v) (i32.const 10)))
        (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $n))

  ;; writes v (unsigned) in decimal at dst; returns the number of bytes
  (func $utoa (param $dst i32) (param $v i32) (result i32)
    (local $n i32) (local $p i32)
    (local.set $n (call $digits (local.get $v)))
    (local.set $p (i32.add (local.get $dst) (local.get $n)))
    (loop $next
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $next (i32.ne (local.get $p) (local.get $dst))))
    (local.get $n))

  ;; reads the unsigned integer after the first ':' of a memory_get
  ;; response {"value":N}; anything else (null, a string, ...) gives 0
  (func $parse_value (param $p i32) (param $n i32) (result i32)
    (local $end i32) (local $v i32) (local $c i32)
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (block $found
      (loop $seek
        (br_if $found (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $p)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br_if $found (i32.eq (local.get $c) (i32.const 58)))   ;; ':'
        (br $seek)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.eq (local.get $c) (i32.const 32))                ;; skip ' '
          (then
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $next)))
        (br_if $done (i32.gt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 9)))
        (local.set $v (i32.add (i32.mul (local.get $v) (i32.const 10)) (i32.sub (local.get $c) (i32.const 48))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (local.get $v))

  ;; ============================================================= 6. nodes
  ;; Each node returns its response envelope as a packed (ptr, len).
  ;; Static envelopes (the failures) are returned in place: openwop_free
  ;; ignores pointers below $heap_base.

  ;; node 0: example.visits
  (func $visits (result i64)
    (local $status i32) (local $count i32) (local $ptr i32) (local $len i32) (local $n i32) (local $out i32)
    ;; log at info (2)
    (call $log (i32.const 2) (i32.const 72) (i32.const 14))
    ;; memory_get: 0 -> response {"value":N} at *resp_out; 11 -> absent
    (local.set $status (call $memory_get (i32.const 88) (i32.const 39) (global.get $resp_out)))
    (if (i32.eqz (local.get $status))
      (then
        (local.set $ptr (i32.load (global.get $resp_out)))
        (local.set $len (i32.load offset=4 (global.get $resp_out)))
        (local.set $count (call $parse_value (local.get $ptr) (local.get $len)))
        (call $free (local.get $ptr) (local.get $len)))    ;; the response is ours: release it
      (else
        (if (i32.ne (local.get $status) (i32.const 11))
          (then (return (call $pack (i32.const 336) (i32.const 120)))))))
    (local.set $count (i32.add (local.get $count) (i32.const 1)))
    ;; memory_put {"namespace":"counters","key":"visits","value":N,"ttlSeconds":3600},
    ;; built in the scratch buffer
    (call $copy (global.get $scratch) (i32.const 128) (i32.const 47))
    (local.set $n (call $utoa (i32.add (global.get $scratch) (i32.const 47)) (local.get $count)))
    (call $copy (i32.add (global.get $scratch) (i32.add (i32.const 47) (local.get $n))) (i32.const 176) (i32.const 19))
    (local.set $status
      (call $memory_put (global.get $scratch) (i32.add (i32.const 66) (local.get $n)) (global.get $resp_out)))
    (if (local.get $status)
      (then (return (call $pack (i32.const 336) (i32.const 120)))))
    ;; {"outcome":"completed","output":{"count":N}} in a fresh block, which
    ;; the host frees with openwop_free after reading it
    (local.set $len (i32.add (i32.const 43) (local.get $n)))
    (local.set $out (call $alloc (local.get $len)))
    (if (i32.eqz (local.get $out))
      (then (return (call $pack (i32.const 456) (i32.const 86)))))
    (call $copy (local.get $out) (i32.const 200) (i32.const 41))
    (drop (call $utoa (i32.add (local.get $out) (i32.const 41)) (local.get $count)))
    (call $copy (i32.add (local.get $out) (i32.add (i32.const 41) (local.get $n))) (i32.const 248) (i32.const 2))
    (call $pack (local.get $out) (local.get $len)))

  ;; node 1: example.approve
  (func $approve (result i64)
    (local $resume i64) (local $ptr i32) (local $n i32) (local $out i32) (local $len i32)
    ;; On the first run the host does not return from openwop_interrupt: it
    ;; ends the invocation as "suspended" with this payload. When the
    ;; invocation is resumed it returns the resume value (packed ptr, len).
    (local.set $resume (call $interrupt (i32.const 256) (i32.const 23)))
    (local.set $ptr (i32.wrap_i64 (local.get $resume)))
    (local.set $n (i32.wrap_i64 (i64.shr_u (local.get $resume) (i64.const 32))))
    (if (i32.eqz (local.get $n))
      (then
        (local.set $ptr (i32.const 328))                 ;; "null"
        (local.set $n (i32.const 4))))
    (local.set $len (i32.add (i32.const 46) (local.get $n)))
    (local.set $out (call $alloc (local.get $len)))
    (if (i32.eqz (local.get $out))
      (then (return (call $pack (i32.const 456) (i32.const 86)))))
    (call $copy (local.get $out) (i32.const 280) (i32.const 44))
    (call $copy (i32.add (local.get $out) (i32.const 44)) (local.get $ptr) (local.get $n))
    (call $copy (i32.add (local.get $out) (i32.add (i32.const 44) (local.get $n))) (i32.const 248) (i32.const 2))
    (call $pack (local.get $out) (local.get $len)))

  ;; ========================================================== 7. dispatch
  ;; The request envelope is at (req, len) (host-owned, from openwop_alloc):
  ;;   {"abiVersion":1,"nodeContext":{...},"inputs":{...}}
  ;; These nodes do not read it; see README.md for reading inputs.
  (func (export "openwop_node_invoke") (param $index i32) (param $req i32) (param $len i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 0))
      (then (return (call $visits))))
    (if (i32.eq (local.get $index) (i32.const 1))
      (then (return (call $approve))))
    (call $pack (i32.const 544) (i32.const 88)))
)
