;; fixture: interrupt (not hostile; used to test suspend/resume)
;; What it does: imports openwop.openwop_interrupt as packed (result i64) and calls
;;   it with payload {"question":"approve?"}. On resume, whatever JSON the host
;;   returns is embedded verbatim:
;;     {"outcome":"completed","output":{"resumed":<returned bytes>}}
;;   The response is built in a freshly openwop_alloc'ed buffer.
;; Host must report: first invocation suspended with interrupt payload
;;   {"question":"approve?"}; after resume with value V, completed with output
;;   {"resumed":V}.
(module
  (import "openwop" "openwop_interrupt" (func $interrupt (param i32 i32) (result i64)))
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 23
  (data (i32.const 16) "local.hostile.interrupt")
  ;; node typeId (index 0): offset 40, len 17
  (data (i32.const 40) "hostile.interrupt")
  ;; payload: offset 64, len 23
  (data (i32.const 64) "{\22question\22:\22approve?\22}")
  ;; prefix: offset 88, len 43
  (data (i32.const 88) "{\22outcome\22:\22completed\22,\22output\22:{\22resumed\22:")
  ;; suffix: offset 136, len 2
  (data (i32.const 136) "}}")

  ;; Packed PTRLEN: ptr in the low 32 bits, len in the high 32 bits.
  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; Byte-by-byte copy (avoids depending on the bulk-memory proposal).
  (func $memcpy (param $dst i32) (param $src i32) (param $n i32)
    (block $done
      (loop $copy
        (br_if $done (i32.eqz (local.get $n)))
        (i32.store8 (local.get $dst) (i32.load8_u (local.get $src)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
        (local.set $src (i32.add (local.get $src) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $copy))))

  ;; Bump allocator: heap starts at 1024, 8-byte aligned, grows memory on
  ;; demand, returns 0 when memory.grow fails. openwop_free is a no-op.
  (global $heap (mut i32) (i32.const 1024))
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
    (call $ptrlen (i32.const 16) (i32.const 23)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 40) (i32.const 17)))
      (else (i64.const 0))))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (local $r i64) (local $rptr i32) (local $rlen i32) (local $out i32) (local $n i32)
    ;; Suspends on first call; returns the resume value (JSON) when resumed.
    (local.set $r (call $interrupt (i32.const 64) (i32.const 23)))
    (local.set $rptr (i32.wrap_i64 (local.get $r)))
    (local.set $rlen (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32))))
    ;; out = prefix ++ returned bytes ++ "}"
    (local.set $n (i32.add (i32.const 43) (i32.add (local.get $rlen) (i32.const 2))))
    (local.set $out (call $alloc (local.get $n)))
    (if (i32.eqz (local.get $out)) (then unreachable))
    (call $memcpy (local.get $out) (i32.const 88) (i32.const 43))
    (call $memcpy (i32.add (local.get $out) (i32.const 43))
                  (local.get $rptr) (local.get $rlen))
    (call $memcpy (i32.add (local.get $out) (i32.add (i32.const 43) (local.get $rlen)))
                  (i32.const 136) (i32.const 2))
    (call $ptrlen (local.get $out) (local.get $n)))
)
