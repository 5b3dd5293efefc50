;; fixture: random_rfc (not hostile; RFC 0008 §C's openwop_random signature)
;; What it does: imports openwop_random as RFC 0008 §C declares it,
;;   (param i32 i32) with NO result. Node 0 ("rfc.random") draws 16 bytes
;;   and returns {"outcome":"completed","output":"<32 lowercase hex digits>"}.
;;   Node 1 ("rfc.random_oob") asks for 100000 bytes at offset 0, beyond the
;;   one-page memory and the per-call bound: with no status to return, the
;;   host must stop the guest (host_call_bounds).
(module
  (import "openwop" "openwop_random" (func $random (param i32 i32)))
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 24
  (data (i32.const 16) "local.hostile.random_rfc")
  ;; node typeIds: offset 48 "rfc.random" (10), offset 64 "rfc.random_oob" (14)
  (data (i32.const 48) "rfc.random")
  (data (i32.const 64) "rfc.random_oob")
  ;; hex digits: offset 80, len 16
  (data (i32.const 80) "0123456789abcdef")
  ;; response prefix: offset 96, len 33 {"outcome":"completed","output":"
  (data (i32.const 96) "{\22outcome\22:\22completed\22,\22output\22:\22")
  ;; random bytes at 160 (16), response built at 256: prefix(33) + hex(32) + "\"}" (2) = 67
  (global $heap (mut i32) (i32.const 1024))
  (func (export "openwop_alloc") (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $size)) (i32.const 7)) (i32.const -8)))
    (local.get $p))
  (func (export "openwop_free") (param i32 i32))
  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_node_count") (result i32) (i32.const 2))
  (func (export "openwop_pack_name") (result i64)
    (i64.or (i64.const 16) (i64.shl (i64.const 24) (i64.const 32))))
  (func (export "openwop_node_id_at") (param $i i32) (result i64)
    (if (result i64) (i32.eqz (local.get $i))
      (then (i64.or (i64.const 48) (i64.shl (i64.const 10) (i64.const 32))))
      (else (i64.or (i64.const 64) (i64.shl (i64.const 14) (i64.const 32))))))
  (func (export "openwop_node_invoke") (param $node i32) (param $rp i32) (param $rl i32) (result i64)
    (local $i i32) (local $b i32) (local $at i32)
    (if (local.get $node)
      (then (call $random (i32.const 0) (i32.const 100000)) (unreachable)))
    (call $random (i32.const 160) (i32.const 16))
    ;; copy the prefix
    (block $d0 (loop $l0
      (br_if $d0 (i32.ge_u (local.get $i) (i32.const 33)))
      (i32.store8 (i32.add (i32.const 256) (local.get $i)) (i32.load8_u (i32.add (i32.const 96) (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l0)))
    ;; hex-encode the 16 bytes
    (local.set $i (i32.const 0))
    (local.set $at (i32.const 289))
    (block $d1 (loop $l1
      (br_if $d1 (i32.ge_u (local.get $i) (i32.const 16)))
      (local.set $b (i32.load8_u (i32.add (i32.const 160) (local.get $i))))
      (i32.store8 (local.get $at) (i32.load8_u (i32.add (i32.const 80) (i32.shr_u (local.get $b) (i32.const 4)))))
      (i32.store8 (i32.add (local.get $at) (i32.const 1)) (i32.load8_u (i32.add (i32.const 80) (i32.and (local.get $b) (i32.const 15)))))
      (local.set $at (i32.add (local.get $at) (i32.const 2)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l1)))
    (i32.store8 (i32.const 321) (i32.const 34))
    (i32.store8 (i32.const 322) (i32.const 125))
    (i64.or (i64.const 256) (i64.shl (i64.const 67) (i64.const 32))))
)
