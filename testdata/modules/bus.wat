;; fixture: bus
;; Two nodes for the message bus tests, in ABI 1.2 (it imports message_publish).
;;   "test.publish" (index 0), whatever its input: publishes one seed-002 bus
;;     envelope on topic ops.alert (message id 0badcafe-0000-4000-8000-000000000001)
;;     with message_publish; returns {"published":true}, or fails if refused.
;;   "test.listen" (index 1): returns {"heard":true} (a subscriber of ops.*).
;; Rebuild: wat2wasm bus.wat -o bus.wasm (build.sh).
(module
  (import "packrun:host/v1" "message_publish" (func $publish (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; pack: offset 16, len 9
  (data (i32.const 16) "local.bus")
  ;; node0: offset 32, len 12
  (data (i32.const 32) "test.publish")
  ;; node1: offset 48, len 11
  (data (i32.const 48) "test.listen")
  ;; pub: offset 64, len 239
  (data (i32.const 64) "{\22format\22:\22bus-envelope\22,\22message\22:{\22metadata\22:{\22message_id\22:\220badcafe-0000-4000-8000-000000000001\22,\22timestamp\22:\222026-11-24T06:00:00Z\22,\22source\22:\22test.publish\22,\22message_type\22:\22ops.alert\22,\22version\22:\221.0\22},\22payload\22:{\22disk\22:\22full\22,\22node\22:3}}}")
  ;; ok: offset 304, len 51
  (data (i32.const 304) "{\22outcome\22:\22completed\22,\22output\22:{\22published\22:true}}")
  ;; no: offset 368, len 83
  (data (i32.const 368) "{\22outcome\22:\22failed\22,\22error\22:{\22code\22:\22refused\22,\22message\22:\22message_publish refused\22}}")
  ;; heard: offset 464, len 47
  (data (i32.const 464) "{\22outcome\22:\22completed\22,\22output\22:{\22heard\22:true}}")

  ;; Packed PTRLEN: ptr in the low 32 bits, len in the high 32 bits.
  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; Bump allocator from 1024; openwop_free is a no-op.
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
  (func (export "openwop_node_count") (result i32) (i32.const 2))
  (func (export "openwop_pack_name") (result i64)
    (call $ptrlen (i32.const 16) (i32.const 9)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 32) (i32.const 12)))
      (else
        (if (result i64) (i32.eq (local.get $index) (i32.const 1))
          (then (call $ptrlen (i32.const 48) (i32.const 11)))
          (else (i64.const 0))))))

  ;; resp_out is scratch at 1000 (8 bytes); the response is ignored.
  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (if (result i64) (i32.eq (local.get $node) (i32.const 1))
      (then (call $ptrlen (i32.const 464) (i32.const 47)))
      (else
        (if (result i64) (i32.eqz (call $publish (i32.const 64) (i32.const 239) (i32.const 1000)))
          (then (call $ptrlen (i32.const 304) (i32.const 51)))
          (else (call $ptrlen (i32.const 368) (i32.const 83)))))))
)
