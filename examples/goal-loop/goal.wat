;; goal.wat - the example pack of the built-in goal-loop workflow (issue 17),
;; in hand-written WebAssembly text. Generated layout: every constant is a data
;; segment; each node answers a constant response whose taskOutcome carries
;; the workflow_signal that moves a goal-loop record on:
;;
;;   goal.plan    (index 0) -> workflow_signal "planned"   (plan -> execute)
;;   goal.execute (index 1) -> workflow_signal "executed"  (execute -> verify)
;;   goal.verify  (index 2) -> workflow_signal "verified"  (verify -> complete, completes)
;;
;; The request is not read: the record's context arrives as the task payload
;; and a real pack would act on it. Responses are copied to the heap so the
;; host may openwop_free them. The allocator is hello-wat's (see there).
(module
  (memory (export "memory") 1)

  (data (i32.const 16) "local.goal-loop.wat") ;; 19
  (data (i32.const 48) "goal.plan") ;; 9
  (data (i32.const 64) "goal.execute") ;; 12
  (data (i32.const 80) "goal.verify") ;; 11
  (data (i32.const 96) "{\"outcome\":\"completed\",\"output\":{\"step\":\"plan\"},\"taskOutcome\":{\"operator_summary\":\"planned the goal\",\"workflow_signal\":\"planned\"}}") ;; 130
  (data (i32.const 240) "{\"outcome\":\"completed\",\"output\":{\"step\":\"execute\"},\"taskOutcome\":{\"operator_summary\":\"executed the plan\",\"workflow_signal\":\"executed\"}}") ;; 135
  (data (i32.const 384) "{\"outcome\":\"completed\",\"output\":{\"step\":\"verify\"},\"taskOutcome\":{\"operator_summary\":\"verified the result\",\"workflow_signal\":\"verified\"}}") ;; 136
  (data (i32.const 528) "{\"outcome\":\"failed\",\"error\":{\"code\":\"unknown_node\",\"message\":\"node index out of range\"}}") ;; 88

  (global $heap_base i32 (i32.const 1024))
  (global $heap_top (mut i32) (i32.const 1024))
  (global $live (mut i32) (i32.const 0))

  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  (func (export "openwop_abi_version") (result i32)
    (i32.const 1))

  (func (export "openwop_pack_name") (result i64)
    (call $pack (i32.const 16) (i32.const 19)))

  (func (export "openwop_node_count") (result i32)
    (i32.const 3))

  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 0)) (then (return (call $pack (i32.const 48) (i32.const 9)))))
    (if (i32.eq (local.get $index) (i32.const 1)) (then (return (call $pack (i32.const 64) (i32.const 12)))))
    (if (i32.eq (local.get $index) (i32.const 2)) (then (return (call $pack (i32.const 80) (i32.const 11)))))
    (i64.const 0))

  (func $alloc (export "openwop_alloc") (param $size i32) (result i32)
    (local $need i64) (local $have i64) (local $hdr i32)
    ;; refuse requests of 2 GiB or more
    (if (i32.lt_s (local.get $size) (i32.const 0))
      (then (return (i32.const 0))))
    ;; new top = top + 8 (header) + round_up(size, 8), computed in 64 bits
    (local.set $need
      (i64.add
        (i64.extend_i32_u (global.get $heap_top))
        (i64.and
          (i64.add (i64.extend_i32_u (local.get $size)) (i64.const 15))
          (i64.const -8))))
    (local.set $have (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
    (if (i64.gt_u (local.get $need) (local.get $have))
      (then
        (if (i32.eq
              (memory.grow
                (i32.wrap_i64
                  (i64.shr_u
                    (i64.add (i64.sub (local.get $need) (local.get $have)) (i64.const 65535))
                    (i64.const 16))))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (local.set $hdr (global.get $heap_top))
    (i32.store (local.get $hdr) (local.get $size))
    (i32.store offset=4 (local.get $hdr) (i32.const 0x6576696c))  ;; "live"
    (global.set $heap_top (i32.wrap_i64 (local.get $need)))
    (global.set $live (i32.add (global.get $live) (i32.const 1)))
    (i32.add (local.get $hdr) (i32.const 8)))

  (func $free (export "openwop_free") (param $ptr i32) (param $size i32)
    (local $hdr i32)
    (if (i32.or
          (i32.lt_u (local.get $ptr) (i32.add (global.get $heap_base) (i32.const 8)))
          (i32.gt_u (local.get $ptr) (global.get $heap_top)))
      (then (return)))
    (local.set $hdr (i32.sub (local.get $ptr) (i32.const 8)))
    (if (i32.ne (i32.load offset=4 (local.get $hdr)) (i32.const 0x6576696c))
      (then (return)))
    (i32.store offset=4 (local.get $hdr) (i32.const 0))
    (global.set $live (i32.sub (global.get $live) (i32.const 1)))
    (if (i32.eqz (global.get $live))
      (then
        (global.set $heap_top (global.get $heap_base))
        (return)))
    (if (i32.eq
          (i32.add (local.get $ptr)
            (i32.and (i32.add (i32.load (local.get $hdr)) (i32.const 7)) (i32.const -8)))
          (global.get $heap_top))
      (then (global.set $heap_top (local.get $hdr)))))

  ;; ---------------------------------------------------------------- helpers
  (func $copy (param $dst i32) (param $src i32) (param $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (i32.store8 (local.get $dst) (i32.load8_u (local.get $src)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
        (local.set $src (i32.add (local.get $src) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next))))


  ;; Copies a constant string into a fresh heap block, so that every response
  ;; is owned by the heap and the host may openwop_free it.
  (func $reply (param $src i32) (param $len i32) (result i64)
    (local $out i32)
    (local.set $out (call $alloc (local.get $len)))
    (if (i32.eqz (local.get $out))
      (then (return (i64.const 0))))
    (call $copy (local.get $out) (local.get $src) (local.get $len))
    (call $pack (local.get $out) (local.get $len)))


  (func (export "openwop_node_invoke")
        (param $index i32) (param $req i32) (param $len i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 0)) (then (return (call $reply (i32.const 96) (i32.const 130)))))
    (if (i32.eq (local.get $index) (i32.const 1)) (then (return (call $reply (i32.const 240) (i32.const 135)))))
    (if (i32.eq (local.get $index) (i32.const 2)) (then (return (call $reply (i32.const 384) (i32.const 136)))))
    (call $reply (i32.const 528) (i32.const 88)))
)
