;; fixture: newer_minor_import
;; What it does: imports packrun:host/v1 sensor_emit, which ABI 1.1 added, and
;;   never calls it; its node returns {"outcome":"completed","output":{"logged":10000000}}.
;; Host must: refuse it when its pack declares ABI 1.0 (the import names the
;;   minor that added it), load it for a pack declaring 1.1 or for a bare module.
(module
  (import "packrun:host/v1" "sensor_emit" (func $emit (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 23
  (data (i32.const 16) "local.hostile.log_flood")
  ;; node typeId (index 0): offset 40, len 17
  (data (i32.const 40) "hostile.log_flood")
  ;; msg: offset 64, len 5
  (data (i32.const 64) "flood")
  ;; resp: offset 72, len 52
  (data (i32.const 72) "{\22outcome\22:\22completed\22,\22output\22:{\22logged\22:10000000}}")

  ;; Packed PTRLEN: ptr in the low 32 bits, len in the high 32 bits.
  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

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
    (call $ptrlen (i32.const 72) (i32.const 52)))
)
