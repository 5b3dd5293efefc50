;; hostile fixture: table_grow
;; What it does: declares a funcref table with no maximum and grows it by 2^27
;;   entries 100 times (one grow cost 1.08 GB on an unguarded host, and cannot be
;;   interrupted by the time limit). Returns {"grown":-1} if every grow failed.
;; Host must report: the host bounds the table (every grow returns -1): the node
;;   completes at once with {"grown":-1} and host memory stays bounded.
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (data (i32.const 16) "local.hostile.table-grow")
  (data (i32.const 48) "hostile.table-grow")
  (data (i32.const 1024) "{\22outcome\22:\22completed\22,\22output\22:{\22grown\22:-1}}")
  (data (i32.const 1100) "{\22outcome\22:\22completed\22,\22output\22:{\22done\22:true}}")

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
    (call $ptrlen (i32.const 16) (i32.const 24)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 0)) (then (return (call $ptrlen (i32.const 48) (i32.const 18)))))
    (i64.const 0))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (local $i i32) (local $failed i32)
    (local.set $failed (i32.const 1))
    (loop $more
      (if (i32.ne (table.grow $t (ref.null func) (i32.const 134217728)) (i32.const -1))
        (then (local.set $failed (i32.const 0))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $more (i32.lt_u (local.get $i) (i32.const 100))))
    (if (result i64) (local.get $failed)
      (then (call $ptrlen (i32.const 1024) (i32.const 45)))
      (else (call $ptrlen (i32.const 1100) (i32.const 46)))))
)
