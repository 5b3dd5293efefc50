;; fixture: hostcalls_multivalue (not hostile; multi-value ABI + host calls)
;; What it does: like `interrupt`, but every PTRLEN uses multi-value (result i32 i32):
;;   the exports openwop_pack_name / openwop_node_id_at / openwop_node_invoke and
;;   the imports openwop_interrupt / openwop_variable_get. openwop_node_invoke:
;;     1. openwop_variable_set("k", "42")          (status must be 0)
;;     2. openwop_variable_get("k") -> V           (must not be (0,0))
;;     3. openwop_random(buf, 8)                   (status must be 0)
;;     4. openwop_now_ms()                         (result dropped)
;;     5. openwop_interrupt({"question":"approve?"}) -> R  (suspends first time)
;;   and returns {"outcome":"completed","output":{"k":V,"resumed":R}} with V and R
;;   copied verbatim. If step 1, 2 or 3 fails it returns
;;   {"outcome":"failed","error":{"code":"hostcall_failed","message":...}}.
;; Host must report: suspended with {"question":"approve?"}; after resume with
;;   value X, completed with output {"k":42,"resumed":X}.
(module
  (import "openwop" "openwop_interrupt" (func $interrupt (param i32 i32) (result i32 i32)))
  (import "openwop" "openwop_variable_set" (func $variable_set (param i32 i32 i32 i32) (result i32)))
  (import "openwop" "openwop_variable_get" (func $variable_get (param i32 i32) (result i32 i32)))
  (import "openwop" "openwop_random" (func $random (param i32 i32) (result i32)))
  (import "openwop" "openwop_now_ms" (func $now_ms (result i64)))
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 34
  (data (i32.const 16) "local.hostile.hostcalls_multivalue")
  ;; node typeId (index 0): offset 56, len 28
  (data (i32.const 56) "hostile.hostcalls_multivalue")
  ;; payload: offset 88, len 23
  (data (i32.const 88) "{\22question\22:\22approve?\22}")
  ;; name: offset 112, len 1
  (data (i32.const 112) "k")
  ;; value: offset 120, len 2
  (data (i32.const 120) "42")
  ;; prefix: offset 128, len 37
  (data (i32.const 128) "{\22outcome\22:\22completed\22,\22output\22:{\22k\22:")
  ;; mid: offset 168, len 11
  (data (i32.const 168) ",\22resumed\22:")
  ;; suffix: offset 184, len 2
  (data (i32.const 184) "}}")
  ;; err_set: offset 192, len 113
  (data (i32.const 192) "{\22outcome\22:\22failed\22,\22error\22:{\22code\22:\22hostcall_failed\22,\22message\22:\22openwop_variable_set returned non-zero status\22}}")
  ;; err_get: offset 312, len 103
  (data (i32.const 312) "{\22outcome\22:\22failed\22,\22error\22:{\22code\22:\22hostcall_failed\22,\22message\22:\22openwop_variable_get returned (0,0)\22}}")
  ;; err_rand: offset 416, len 107
  (data (i32.const 416) "{\22outcome\22:\22failed\22,\22error\22:{\22code\22:\22hostcall_failed\22,\22message\22:\22openwop_random returned non-zero status\22}}")

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
  ;; Multi-value PTRLEN exports: (result i32 i32) = (ptr, len).
  (func (export "openwop_pack_name") (result i32 i32)
    (i32.const 16) (i32.const 34))
  (func (export "openwop_node_id_at") (param $index i32) (result i32 i32)
    (if (result i32 i32) (i32.eqz (local.get $index))
      (then (i32.const 56) (i32.const 28))
      (else (i32.const 0) (i32.const 0))))

  ;; 8-byte scratch buffer for openwop_random (inside the static area).
  (global $randbuf i32 (i32.const 8))
  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i32 i32)
    (local $vptr i32) (local $vlen i32) (local $rptr i32) (local $rlen i32)
    (local $out i32) (local $n i32) (local $at i32)
    ;; 1. variable_set("k", "42")
    (if (call $variable_set (i32.const 112) (i32.const 1)
                            (i32.const 120) (i32.const 2))
      (then (return (i32.const 192) (i32.const 113))))
    ;; 2. variable_get("k") -> (ptr, len); stack order is ptr then len.
    (call $variable_get (i32.const 112) (i32.const 1))
    (local.set $vlen)
    (local.set $vptr)
    (if (i32.eqz (local.get $vlen))
      (then (return (i32.const 312) (i32.const 103))))
    ;; 3. random into 8-byte buffer
    (if (call $random (global.get $randbuf) (i32.const 8))
      (then (return (i32.const 416) (i32.const 107))))
    ;; 4. now_ms (value unused)
    (drop (call $now_ms))
    ;; 5. interrupt -> (ptr, len)
    (call $interrupt (i32.const 88) (i32.const 23))
    (local.set $rlen)
    (local.set $rptr)
    ;; out = prefix ++ V ++ mid ++ R ++ suffix
    (local.set $n
      (i32.add (i32.add (i32.add (i32.const 37) (local.get $vlen))
                        (i32.add (i32.const 11) (local.get $rlen)))
               (i32.const 2)))
    (local.set $out (call $alloc (local.get $n)))
    (if (i32.eqz (local.get $out)) (then unreachable))
    (local.set $at (local.get $out))
    (call $memcpy (local.get $at) (i32.const 128) (i32.const 37))
    (local.set $at (i32.add (local.get $at) (i32.const 37)))
    (call $memcpy (local.get $at) (local.get $vptr) (local.get $vlen))
    (local.set $at (i32.add (local.get $at) (local.get $vlen)))
    (call $memcpy (local.get $at) (i32.const 168) (i32.const 11))
    (local.set $at (i32.add (local.get $at) (i32.const 11)))
    (call $memcpy (local.get $at) (local.get $rptr) (local.get $rlen))
    (local.set $at (i32.add (local.get $at) (local.get $rlen)))
    (call $memcpy (local.get $at) (i32.const 184) (i32.const 2))
    (local.get $out) (local.get $n))
)
