;; hostile fixture: output_100mib
;; What it does: openwop_node_invoke grows memory by 1601 pages (1 -> 1602 pages,
;;   ~100.1 MiB), writes {"outcome":"completed","output":" at offset 65536 and
;;   returns ptr = 65536, len = 104857600 (100 MiB; the rest is zero bytes, so the
;;   JSON is unterminated anyway). If memory.grow fails (host memory cap below
;;   ~100 MiB), it traps with `unreachable` instead.
;; Host must report: response/output size cap exceeded, checked from len BEFORE
;;   copying or parsing the buffer (or a memory cap breach if the cap is lower).
(module
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 27
  (data (i32.const 16) "local.hostile.output_100mib")
  ;; node typeId (index 0): offset 48, len 21
  (data (i32.const 48) "hostile.output_100mib")
  ;; prefix: offset 72, len 33
  (data (i32.const 72) "{\22outcome\22:\22completed\22,\22output\22:\22")

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
    (call $ptrlen (i32.const 16) (i32.const 27)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 48) (i32.const 21)))
      (else (i64.const 0))))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (if (i32.eq (memory.grow (i32.const 1601)) (i32.const -1))
      (then unreachable))
    (call $memcpy (i32.const 65536) (i32.const 72) (i32.const 33))
    (call $ptrlen (i32.const 65536) (i32.const 104857600)))
)
