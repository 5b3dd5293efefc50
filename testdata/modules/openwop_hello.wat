;; openwop_hello.wat - Test module for openwop-format packs (packrun's openwop_test.go): examples/hello-wat/hello.wat
;; with the pack name core.ow_t.helloPack and the node core.ow_t.greet, names only openwop's
;; grammar admits (core. scope, underscore, a capital).
;; hello.wat - a packrun node pack written directly in WebAssembly text.
;;
;; One node, typeId "example.hello":
;;   inputs {"name":"x"}  ->  output {"greeting":"Hello, x!"}   (missing/null name -> "world")
;;
;; Every PTRLEN export returns a single i64 ("packed"): ptr in the low 32 bits,
;; len in the high 32 bits. See hello-wat-multivalue for the (result i32 i32) form.
;;
;; JSON handling is deliberately minimal: the envelope and the inputs object are
;; walked member by member (strings, nesting and brackets are respected, so a
;; "name" key inside some nested value is never picked up), but nested values are
;; only bracket-matched, not fully validated. Escape sequences inside the name are
;; NOT decoded: the raw bytes between the quotes are copied verbatim into the
;; output string (which keeps valid escapes valid). Keys are compared byte-wise,
;; so an escaped key such as "n\u0061me" is not recognised. Every read is bounds
;; checked against the request buffer, which is itself checked against the size
;; of linear memory, so no input can make the module read out of bounds.
;;
;; Memory layout:
;;   [0, 16)      reserved, so no valid pointer is ever 0
;;   [16, 1024)   constant strings (data segments below)
;;   [1024, ...)  bump heap used by openwop_alloc; grows memory on demand
(module
  (memory (export "memory") 1)

  ;; ---------------------------------------------------------------- data
  (data (i32.const 16)  "core.ow_t.helloPack")                                  ;; 19
  (data (i32.const 48)  "core.ow_t.greet")                                      ;; 15
  (data (i32.const 64)  "inputs")                                               ;; 6
  (data (i32.const 72)  "name")                                                 ;; 4
  (data (i32.const 80)  "world")                                                ;; 5
  (data (i32.const 96)  "{\"outcome\":\"completed\",\"output\":{\"greeting\":\"Hello, ")  ;; 52
  (data (i32.const 152) "!\"}}")                                                ;; 4
  (data (i32.const 160) "{\"outcome\":\"failed\",\"error\":{\"code\":\"invalid_input\",\"message\":\"request is not a valid JSON envelope\"}}") ;; 102
  (data (i32.const 272) "{\"outcome\":\"failed\",\"error\":{\"code\":\"invalid_input\",\"message\":\"inputs must be a JSON object\"}}")        ;; 94
  (data (i32.const 368) "{\"outcome\":\"failed\",\"error\":{\"code\":\"invalid_input\",\"message\":\"inputs.name must be a string\"}}")       ;; 94
  (data (i32.const 464) "{\"outcome\":\"failed\",\"error\":{\"code\":\"unknown_node\",\"message\":\"node index out of range\"}}")           ;; 88

  ;; ---------------------------------------------------------------- heap state
  (global $heap_base i32 (i32.const 1024))
  (global $heap_top (mut i32) (i32.const 1024))
  (global $live (mut i32) (i32.const 0))   ;; number of blocks not yet freed

  ;; ---------------------------------------------------------------- metadata
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  (func (export "openwop_abi_version") (result i32)
    (i32.const 1))

  (func (export "openwop_pack_name") (result i64)
    (call $pack (i32.const 16) (i32.const 19)))

  (func (export "openwop_node_count") (result i32)
    (i32.const 1))

  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $pack (i32.const 48) (i32.const 15)))
      (else (i64.const 0))))

  ;; ---------------------------------------------------------------- allocator
  ;; Each block is [i32 size][i32 magic][payload rounded up to 8 bytes].
  ;; Blocks are carved from a bump pointer. Freeing the newest block pops it,
  ;; and once every block has been freed the whole heap is reset, so the usual
  ;; host sequence (alloc request, invoke -> alloc response, free both) never
  ;; grows the heap. openwop_free ignores pointers it did not hand out
  ;; (static strings, 0, double frees).
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

  (func $memeq (param $a i32) (param $b i32) (param $n i32) (result i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (if (i32.ne (i32.load8_u (local.get $a)) (i32.load8_u (local.get $b)))
          (then (return (i32.const 0))))
        (local.set $a (i32.add (local.get $a) (i32.const 1)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (i32.const 1))

  ;; Copies a constant string into a fresh heap block, so that every response
  ;; is owned by the heap and the host may openwop_free it.
  (func $reply (param $src i32) (param $len i32) (result i64)
    (local $out i32)
    (local.set $out (call $alloc (local.get $len)))
    (if (i32.eqz (local.get $out))
      (then (return (i64.const 0))))
    (call $copy (local.get $out) (local.get $src) (local.get $len))
    (call $pack (local.get $out) (local.get $len)))

  ;; ---------------------------------------------------------------- JSON scanning
  ;; All positions are absolute addresses; $end is one past the last request byte.

  ;; byte at $p, or -1 when $p is at or past $end
  (func $at (param $p i32) (param $end i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $p) (local.get $end))
      (then (i32.load8_u (local.get $p)))
      (else (i32.const -1))))

  (func $ws (param $p i32) (param $end i32) (result i32)
    (local $c i32)
    (block $done
      (loop $next
        (local.set $c (call $at (local.get $p) (local.get $end)))
        (br_if $done
          (i32.eqz
            (i32.or
              (i32.or (i32.eq (local.get $c) (i32.const 0x20)) (i32.eq (local.get $c) (i32.const 0x09)))
              (i32.or (i32.eq (local.get $c) (i32.const 0x0a)) (i32.eq (local.get $c) (i32.const 0x0d))))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (local.get $p))

  ;; characters that may appear in a number or in true/false/null
  (func $is_scalar_char (param $c i32) (result i32)
    (i32.or
      (i32.or
        (i32.lt_u (i32.sub (local.get $c) (i32.const 0x30)) (i32.const 10))   ;; 0-9
        (i32.lt_u (i32.sub (i32.or (local.get $c) (i32.const 0x20)) (i32.const 0x61)) (i32.const 26)))  ;; a-z A-Z
      (i32.or
        (i32.or (i32.eq (local.get $c) (i32.const 0x2d)) (i32.eq (local.get $c) (i32.const 0x2b)))  ;; - +
        (i32.eq (local.get $c) (i32.const 0x2e)))))  ;; .

  ;; $p is at an opening quote; returns the position after the closing quote, or -1
  (func $skip_string (param $p i32) (param $end i32) (result i32)
    (local $c i32)
    (loop $next
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (local.set $c (call $at (local.get $p) (local.get $end)))
      (if (i32.eq (local.get $c) (i32.const 0x22))
        (then (return (i32.add (local.get $p) (i32.const 1)))))
      ;; end of input (-1) or a raw control character
      (if (i32.lt_s (local.get $c) (i32.const 0x20))
        (then (return (i32.const -1))))
      (if (i32.eq (local.get $c) (i32.const 0x5c))
        (then
          (local.set $p (i32.add (local.get $p) (i32.const 1)))
          (if (i32.lt_s (call $at (local.get $p) (local.get $end)) (i32.const 0x20))
            (then (return (i32.const -1))))))
      (br $next))
    (unreachable))

  ;; returns the position after the value starting at $p, or -1
  (func $skip_value (param $p i32) (param $end i32) (result i32)
    (local $c i32) (local $depth i32) (local $start i32)
    (local.set $c (call $at (local.get $p) (local.get $end)))
    (if (i32.eq (local.get $c) (i32.const 0x22))
      (then (return (call $skip_string (local.get $p) (local.get $end)))))
    (if (i32.or (i32.eq (local.get $c) (i32.const 0x7b)) (i32.eq (local.get $c) (i32.const 0x5b)))
      (then
        ;; object or array: match brackets, skipping over strings
        (loop $next
          (local.set $c (call $at (local.get $p) (local.get $end)))
          (if (i32.eq (local.get $c) (i32.const -1))
            (then (return (i32.const -1))))
          (if (i32.eq (local.get $c) (i32.const 0x22))
            (then
              (local.set $p (call $skip_string (local.get $p) (local.get $end)))
              (if (i32.eq (local.get $p) (i32.const -1))
                (then (return (i32.const -1))))
              (br $next)))
          (if (i32.or (i32.eq (local.get $c) (i32.const 0x7b)) (i32.eq (local.get $c) (i32.const 0x5b)))
            (then (local.set $depth (i32.add (local.get $depth) (i32.const 1)))))
          (if (i32.or (i32.eq (local.get $c) (i32.const 0x7d)) (i32.eq (local.get $c) (i32.const 0x5d)))
            (then (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))))
          (local.set $p (i32.add (local.get $p) (i32.const 1)))
          (br_if $next (local.get $depth)))
        (return (local.get $p))))
    ;; number, true, false, null
    (local.set $start (local.get $p))
    (block $done
      (loop $next
        (br_if $done
          (i32.eqz (call $is_scalar_char (call $at (local.get $p) (local.get $end)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $next)))
    (if (result i32) (i32.eq (local.get $p) (local.get $start))
      (then (i32.const -1))
      (else (local.get $p))))

  (func $is_null (param $p i32) (param $end i32) (result i32)
    (if (i32.lt_u (i32.sub (local.get $end) (local.get $p)) (i32.const 4))
      (then (return (i32.const 0))))
    (i32.and
      (i32.eq (i32.load (local.get $p)) (i32.const 0x6c6c756e))   ;; "null"
      (i32.eqz (call $is_scalar_char (call $at (i32.add (local.get $p) (i32.const 4)) (local.get $end))))))

  ;; Looks up a member of the JSON object at $p (the key is compared byte-wise
  ;; with [$key, $key+$klen)). Returns the position of the member's value (the
  ;; last one if the key repeats), -1 if absent, -2 if the object is malformed.
  (func $find_key (param $p i32) (param $end i32) (param $key i32) (param $klen i32) (result i32)
    (local $found i32) (local $ks i32) (local $ke i32)
    (local.set $found (i32.const -1))
    (if (i32.ne (call $at (local.get $p) (local.get $end)) (i32.const 0x7b))
      (then (return (i32.const -2))))
    (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)) (local.get $end)))
    (if (i32.eq (call $at (local.get $p) (local.get $end)) (i32.const 0x7d))
      (then (return (i32.const -1))))
    (loop $member
      ;; "key"
      (if (i32.ne (call $at (local.get $p) (local.get $end)) (i32.const 0x22))
        (then (return (i32.const -2))))
      (local.set $ks (i32.add (local.get $p) (i32.const 1)))
      (local.set $p (call $skip_string (local.get $p) (local.get $end)))
      (if (i32.eq (local.get $p) (i32.const -1))
        (then (return (i32.const -2))))
      (local.set $ke (i32.sub (local.get $p) (i32.const 1)))
      ;; :
      (local.set $p (call $ws (local.get $p) (local.get $end)))
      (if (i32.ne (call $at (local.get $p) (local.get $end)) (i32.const 0x3a))
        (then (return (i32.const -2))))
      (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)) (local.get $end)))
      ;; value
      (if (i32.eq (i32.sub (local.get $ke) (local.get $ks)) (local.get $klen))
        (then
          (if (call $memeq (local.get $ks) (local.get $key) (local.get $klen))
            (then (local.set $found (local.get $p))))))
      (local.set $p (call $skip_value (local.get $p) (local.get $end)))
      (if (i32.eq (local.get $p) (i32.const -1))
        (then (return (i32.const -2))))
      ;; , or }
      (local.set $p (call $ws (local.get $p) (local.get $end)))
      (if (i32.eq (call $at (local.get $p) (local.get $end)) (i32.const 0x2c))
        (then
          (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1)) (local.get $end)))
          (br $member))))
    (if (i32.ne (call $at (local.get $p) (local.get $end)) (i32.const 0x7d))
      (then (return (i32.const -2))))
    (local.get $found))

  ;; ---------------------------------------------------------------- the node
  (func (export "openwop_node_invoke")
        (param $index i32) (param $req i32) (param $len i32) (result i64)
    (local $end i32) (local $v i32) (local $name i32) (local $nlen i32)
    (local $out i32) (local $total i32)
    (if (local.get $index)
      (then (return (call $reply (i32.const 464) (i32.const 88)))))
    ;; the request must lie inside linear memory
    (if (i64.gt_u
          (i64.add (i64.extend_i32_u (local.get $req)) (i64.extend_i32_u (local.get $len)))
          (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
      (then (return (call $reply (i32.const 160) (i32.const 102)))))
    (local.set $end (i32.add (local.get $req) (local.get $len)))

    (local.set $name (i32.const 80))   ;; "world"
    (local.set $nlen (i32.const 5))

    ;; envelope.inputs
    (local.set $v
      (call $find_key (call $ws (local.get $req) (local.get $end)) (local.get $end)
                      (i32.const 64) (i32.const 6)))
    (if (i32.eq (local.get $v) (i32.const -2))
      (then (return (call $reply (i32.const 160) (i32.const 102)))))
    (if (i32.ne (local.get $v) (i32.const -1))
      (then
        (if (i32.eq (call $at (local.get $v) (local.get $end)) (i32.const 0x7b))
          (then
            ;; inputs.name
            (local.set $v (call $find_key (local.get $v) (local.get $end) (i32.const 72) (i32.const 4)))
            (if (i32.eq (local.get $v) (i32.const -2))
              (then (return (call $reply (i32.const 160) (i32.const 102)))))
            (if (i32.ne (local.get $v) (i32.const -1))
              (then
                (if (i32.eq (call $at (local.get $v) (local.get $end)) (i32.const 0x22))
                  (then
                    ;; raw string contents, escapes copied verbatim
                    (local.set $name (i32.add (local.get $v) (i32.const 1)))
                    (local.set $nlen
                      (i32.sub
                        (i32.sub (call $skip_string (local.get $v) (local.get $end)) (local.get $v))
                        (i32.const 2))))
                  (else
                    (if (i32.eqz (call $is_null (local.get $v) (local.get $end)))
                      (then (return (call $reply (i32.const 368) (i32.const 94))))))))))
          (else
            (if (i32.eqz (call $is_null (local.get $v) (local.get $end)))
              (then (return (call $reply (i32.const 272) (i32.const 94)))))))))

    ;; {"outcome":"completed","output":{"greeting":"Hello, <name>!"}}
    (local.set $total (i32.add (local.get $nlen) (i32.const 56)))
    (local.set $out (call $alloc (local.get $total)))
    (if (i32.eqz (local.get $out))
      (then (return (i64.const 0))))
    (call $copy (local.get $out) (i32.const 96) (i32.const 52))
    (call $copy (i32.add (local.get $out) (i32.const 52)) (local.get $name) (local.get $nlen))
    (call $copy (i32.add (i32.add (local.get $out) (i32.const 52)) (local.get $nlen))
                (i32.const 152) (i32.const 4))
    (call $pack (local.get $out) (local.get $total)))
)
