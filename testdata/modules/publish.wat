;; fixture: publish
;; Agent messages for the message_publish tests, in ABI 1.2.
;; Node "test.publish" (index 0), whatever its input, calls message_publish
;; with a seed 002 bus envelope of topic ops.alert (message_id
;; 11111111-2222-3333-4444-555555555555) and returns
;; {"published":<message_publish returned 0>}.
;; Node "test.outbox" (index 1) calls nothing and returns {"outbox":true}
;; with a taskOutcome whose external_messages are the same envelope in the
;; publish form (message_id 22222222-…) and a plain outbox entry
;; {"channel":"ops","text":"done"}.
;; Rebuild: wat2wasm publish.wat -o publish.wasm (build.sh).
(module
  (import "packrun:host/v1" "message_publish" (func $publish (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; pack: offset 16, len 13
  (data (i32.const 16) "local.publish")
  ;; node0: offset 32, len 12
  (data (i32.const 32) "test.publish")
  ;; node1: offset 48, len 11
  (data (i32.const 48) "test.outbox")
  ;; req: offset 64, len 215
  (data (i32.const 64) "{\22format\22:\22bus-envelope\22,\22message\22:{\22metadata\22:{\22message_id\22:\2211111111-2222-3333-4444-555555555555\22,\22timestamp\22:\222026-01-02T15:04:05Z\22,\22source\22:\22probe\22,\22message_type\22:\22ops.alert\22,\22version\22:\221.0\22},\22payload\22:{\22n\22:1}}}")
  ;; ok: offset 288, len 51
  (data (i32.const 288) "{\22outcome\22:\22completed\22,\22output\22:{\22published\22:true}}")
  ;; no: offset 352, len 52
  (data (i32.const 352) "{\22outcome\22:\22completed\22,\22output\22:{\22published\22:false}}")
  ;; outbox: offset 416, len 334
  (data (i32.const 416) "{\22outcome\22:\22completed\22,\22output\22:{\22outbox\22:true},\22taskOutcome\22:{\22external_messages\22:[{\22format\22:\22bus-envelope\22,\22message\22:{\22metadata\22:{\22message_id\22:\2222222222-2222-3333-4444-555555555555\22,\22timestamp\22:\222026-01-02T15:04:05Z\22,\22source\22:\22probe\22,\22message_type\22:\22ops.alert\22,\22version\22:\221.0\22},\22payload\22:{\22n\22:1}}},{\22channel\22:\22ops\22,\22text\22:\22done\22}]}}")

  ;; Packed PTRLEN: ptr in the low 32 bits, len in the high 32 bits.
  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; Bump allocator from 4096; openwop_free is a no-op.
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
  (func (export "openwop_node_count") (result i32) (i32.const 2))
  (func (export "openwop_pack_name") (result i64)
    (call $ptrlen (i32.const 16) (i32.const 13)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 32) (i32.const 12)))
      (else
        (if (result i64) (i32.eq (local.get $index) (i32.const 1))
          (then (call $ptrlen (i32.const 48) (i32.const 11)))
          (else (i64.const 0))))))

  ;; resp_out is scratch at 4000 (8 bytes); the response is ignored.
  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (if (result i64) (i32.eq (local.get $node) (i32.const 1))
      (then (call $ptrlen (i32.const 416) (i32.const 334)))
      (else
        (if (result i64) (i32.eqz (call $publish (i32.const 64) (i32.const 215) (i32.const 4000)))
          (then (call $ptrlen (i32.const 288) (i32.const 51)))
          (else (call $ptrlen (i32.const 352) (i32.const 52)))))))
)
