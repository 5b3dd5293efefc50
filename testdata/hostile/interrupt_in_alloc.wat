;; hostile fixture: interrupt_in_alloc
;; What it does: openwop_alloc, once an invocation has started, calls
;;   openwop_interrupt (suspends from inside the allocator the host is running).
;;   openwop_node_invoke calls openwop_variable_get on a set variable, which
;;   makes the host call openwop_alloc. On an unguarded host a resumed
;;   invocation suspended again, for ever.
;; Host must report: the invocation fails with host_reentered (not suspended).
(module
  (import "openwop" "openwop_interrupt" (func $interrupt (param i32 i32) (result i64)))
  (import "openwop" "openwop_variable_get" (func $get (param i32 i32) (result i64)))
  (import "openwop" "openwop_variable_set" (func $set (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "local.hostile.interrupt-in-alloc")
  (data (i32.const 56) "hostile.interrupt-in-alloc")
  (data (i32.const 1024) "{\22outcome\22:\22completed\22,\22output\22:{\22done\22:true}}")
  (data (i32.const 1200) "k1{}")
  (global $invoking (mut i32) (i32.const 0))

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
    (if (global.get $invoking)
      (then (drop (call $interrupt (i32.const 1202) (i32.const 2)))))
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
    (call $ptrlen (i32.const 16) (i32.const 32)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 0)) (then (return (call $ptrlen (i32.const 56) (i32.const 26)))))
    (i64.const 0))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (global.set $invoking (i32.const 1))
    (drop (call $set (i32.const 1200) (i32.const 1) (i32.const 1201) (i32.const 1)))
    (drop (call $get (i32.const 1200) (i32.const 1)))
    (call $ptrlen (i32.const 1024) (i32.const 46)))
)
