;; hostile fixture: variable_flood
;; What it does: openwop_node_invoke writes a 1 MiB value to openwop_variable_set
;;   100,000 times (on an unguarded host: 300 MB/s of host memory, 2.9 GB by a
;;   10 s limit, whatever the memory limit).
;; Host must report: a host-memory cap breach; the host's memory stays bounded.
(module
  (import "openwop" "openwop_variable_set" (func $write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "local.hostile.variable-flood")
  (data (i32.const 56) "hostile.variable-flood")
  (data (i32.const 1024) "{\22outcome\22:\22completed\22,\22output\22:{\22done\22:true}}")
  (data (i32.const 1200) "k")

  ;; Packed PTRLEN: ptr in the low 32 bits, len in the high 32 bits.
  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; Bump allocator from offset 4096, 8-byte aligned, growing memory on
  ;; demand; 0 when memory.grow fails. openwop_free is a no-op.
  (global $heap (mut i32) (i32.const 4096))
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
    (call $ptrlen (i32.const 16) (i32.const 28)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 0)) (then (return (call $ptrlen (i32.const 56) (i32.const 22)))))
    (i64.const 0))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (local $i i32)
    ;; A 1 MiB JSON string at 65536: a quote, 1 MiB - 2 of "a", a quote.
    (if (i32.lt_u (memory.size) (i32.const 18))
      (then (drop (memory.grow (i32.sub (i32.const 18) (memory.size))))))
    (memory.fill (i32.const 65536) (i32.const 97) (i32.const 1048576))
    (i32.store8 (i32.const 65536) (i32.const 34))
    (i32.store8 (i32.const 1114111) (i32.const 34))
    (loop $more
      (drop (call $write (i32.const 1200) (i32.const 1) (i32.const 65536) (i32.const 1048576)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $more (i32.lt_u (local.get $i) (i32.const 100000))))
    (call $ptrlen (i32.const 1024) (i32.const 46)))
)
