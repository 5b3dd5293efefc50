;; fixture: envelope (pack local.envelope, node test.envelope)
;; What it does: answers with its inputs as the whole response envelope, so
;;   a test chooses any response by enqueueing it as the payload, e.g.
;;   {"outcome":"completed","output":{},"taskOutcome":{...}}.
;;   The inputs are found after the first `},"inputs":` of the request (the
;;   end of nodeContext; a test must not put that text in configurable) and
;;   run to the request's last byte but one; they are copied into a fresh
;;   openwop_alloc'ed buffer.
;; Rebuild: wat2wasm envelope.wat -o envelope.wasm
(module
  (memory (export "memory") 1)
  ;; pack name: offset 16, len 14
  (data (i32.const 16) "local.envelope")
  ;; node typeId: offset 40, len 13
  (data (i32.const 40) "test.envelope")
  ;; marker: offset 64, len 11
  (data (i32.const 64) "},\22inputs\22:")

  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  (func $memcpy (param $dst i32) (param $src i32) (param $n i32)
    (block $done
      (loop $copy
        (br_if $done (i32.eqz (local.get $n)))
        (i32.store8 (local.get $dst) (i32.load8_u (local.get $src)))
        (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
        (local.set $src (i32.add (local.get $src) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $copy))))

  ;; matches: the 11 marker bytes are at p.
  (func $matches (param $p i32) (result i32)
    (local $i i32)
    (block $no
      (loop $cmp
        (br_if $no (i32.ne (i32.load8_u (i32.add (local.get $p) (local.get $i)))
                           (i32.load8_u (i32.add (i32.const 64) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $cmp (i32.lt_u (local.get $i) (i32.const 11)))
        (return (i32.const 1))))
    (i32.const 0))

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
  (func (export "openwop_free") (param $ptr i32) (param $size i32))

  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i64)
    (call $ptrlen (i32.const 16) (i32.const 14)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 40) (i32.const 13)))
      (else (i64.const 0))))

  (func (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (local $i i32) (local $start i32) (local $n i32) (local $out i32)
    (block $found
      (loop $scan
        (if (i32.gt_u (i32.add (local.get $i) (i32.const 11)) (local.get $req_len)) (then unreachable))
        (br_if $found (call $matches (i32.add (local.get $req_ptr) (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (local.set $start (i32.add (local.get $i) (i32.const 11)))
    (local.set $n (i32.sub (i32.sub (local.get $req_len) (i32.const 1)) (local.get $start)))
    (local.set $out (call $alloc (local.get $n)))
    (if (i32.eqz (local.get $out)) (then unreachable))
    (call $memcpy (local.get $out) (i32.add (local.get $req_ptr) (local.get $start)) (local.get $n))
    (call $ptrlen (local.get $out) (local.get $n)))
)
