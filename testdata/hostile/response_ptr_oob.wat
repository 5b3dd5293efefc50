;; hostile fixture: response_ptr_oob
;; What it does: openwop_node_invoke returns ptr = 0xFFFFFF00, len = 64 (packed
;;   i64 0x00000040_FFFFFF00), far outside its 1-page (64 KiB) memory.
;; Host must report: response buffer out of bounds of guest memory (no host
;;   panic / no read outside the guest memory).
(module
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 30
  (data (i32.const 16) "local.hostile.response_ptr_oob")
  ;; node typeId (index 0): offset 48, len 24
  (data (i32.const 48) "hostile.response_ptr_oob")

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
    (call $ptrlen (i32.const 16) (i32.const 30)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 48) (i32.const 24)))
      (else (i64.const 0))))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    ;; low 32 bits = ptr 0xFFFFFF00, high 32 bits = len 64
    (call $ptrlen (i32.const 0xFFFFFF00) (i32.const 64)))
)
