;; fixture: sensor
;; A sensor node for the sensor tests, in ABI 1.1 (it imports sensor_emit).
;; Node "test.sensor" (index 0), whatever its input:
;;   - calls sensor_emit with event A (dedupe_key "a", proposed_task of type
;;     test.fix, its sensor_id left to default to the node's typeId);
;;   - returns {"emitted":<sensor_emit returned 0>,"sensor_events":[event B]}
;;     (event B: dedupe_key "b", nothing proposed).
;; Rebuild: wat2wasm sensor.wat -o sensor.wasm (build.sh).
(module
  (import "packrun:host/v1" "sensor_emit" (func $emit (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; pack: offset 16, len 12
  (data (i32.const 16) "local.sensor")
  ;; node: offset 32, len 11
  (data (i32.const 32) "test.sensor")
  ;; evA: offset 48, len 173
  (data (i32.const 48) "{\22event_id\22:\22a1\22,\22observed_at\22:\222026-01-02T15:04:05Z\22,\22source_ref\22:\22fixture:a\22,\22dedupe_key\22:\22a\22,\22payload\22:{},\22proposed_task\22:{\22task_type\22:\22test.fix\22,\22payload\22:{\22from\22:\22a\22}}}")
  ;; ok: offset 224, len 182
  (data (i32.const 224) "{\22outcome\22:\22completed\22,\22output\22:{\22emitted\22:true,\22sensor_events\22:[{\22event_id\22:\22b1\22,\22observed_at\22:\222026-01-02T15:04:05Z\22,\22source_ref\22:\22fixture:b\22,\22dedupe_key\22:\22b\22,\22payload\22:{\22n\22:1}}]}}")
  ;; no: offset 416, len 183
  (data (i32.const 416) "{\22outcome\22:\22completed\22,\22output\22:{\22emitted\22:false,\22sensor_events\22:[{\22event_id\22:\22b1\22,\22observed_at\22:\222026-01-02T15:04:05Z\22,\22source_ref\22:\22fixture:b\22,\22dedupe_key\22:\22b\22,\22payload\22:{\22n\22:1}}]}}")

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
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i64)
    (call $ptrlen (i32.const 16) (i32.const 12)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 32) (i32.const 11)))
      (else (i64.const 0))))

  ;; resp_out is scratch at 1000 (8 bytes); the response is ignored.
  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (if (result i64) (i32.eqz (call $emit (i32.const 48) (i32.const 173) (i32.const 1000)))
      (then (call $ptrlen (i32.const 224) (i32.const 182)))
      (else (call $ptrlen (i32.const 416) (i32.const 183)))))
)
