;; hostile fixture: deep_recursion
;; What it does: openwop_node_invoke calls $recurse, which calls itself without
;;   bound (non-tail call, so it cannot be optimised into a loop).
;; Host must report: a guest trap (call stack exhausted / stack overflow) as a
;;   failed invocation; the host process itself must survive.
(module
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 28
  (data (i32.const 16) "local.hostile.deep_recursion")
  ;; node typeId (index 0): offset 48, len 22
  (data (i32.const 48) "hostile.deep_recursion")

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
    (call $ptrlen (i32.const 16) (i32.const 28)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 48) (i32.const 22)))
      (else (i64.const 0))))

  ;; Unbounded non-tail recursion: recurse(n) = recurse(n + 1) + 1.
  (func $recurse (param $n i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (call $ptrlen (call $recurse (i32.const 0)) (i32.const 0)))
)
