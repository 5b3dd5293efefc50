;; assets.wat - test module for the asset_read import (packrun:host/v1,
;; ABI 1.1). Pack name local.assets; each node reads one fixed path:
;;   assets.skill   {"path":"SKILL.md"}
;;   assets.escape  {"path":"../pack.json"}
;;   assets.missing {"path":"nope.md"}
;;   assets.bin     {"path":"bin/x.bin"}
;; and completes with the host's response as its output, or with
;; {"status":N} when the call returned status N.
(module
  (import "packrun:host/v1" "asset_read" (func $asset_read (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)

  (data (i32.const 16)  "local.assets")                          ;; 12
  (data (i32.const 32)  "assets.skill")                          ;; 12
  (data (i32.const 48)  "assets.escape")                         ;; 13
  (data (i32.const 64)  "assets.missing")                        ;; 14
  (data (i32.const 80)  "assets.bin")                            ;; 10
  (data (i32.const 96)  "{\"path\":\"SKILL.md\"}")               ;; 19
  (data (i32.const 128) "{\"path\":\"../pack.json\"}")           ;; 23
  (data (i32.const 160) "{\"path\":\"nope.md\"}")                ;; 18
  (data (i32.const 192) "{\"path\":\"bin/x.bin\"}")              ;; 20
  (data (i32.const 224) "{\"outcome\":\"completed\",\"output\":") ;; 32
  (data (i32.const 256) "{\"status\":")                          ;; 10

  (global $resp_out i32 (i32.const 512))
  (global $heap_top (mut i32) (i32.const 1024))

  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.extend_i32_u (local.get $ptr))
            (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; bump allocator; grows memory as needed; free is a no-op (each
  ;; invocation runs on a fresh instance)
  (func $alloc (export "openwop_alloc") (param $size i32) (result i32)
    (local $ptr i32) (local $end i32)
    (local.set $ptr (global.get $heap_top))
    (local.set $end (i32.and (i32.add (i32.add (local.get $ptr) (local.get $size)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (local.get $end) (i32.shl (memory.size) (i32.const 16)))
      (then
        (if (i32.eq (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.shl (memory.size) (i32.const 16))) (i32.const 16)) (i32.const 1))) (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap_top (local.get $end))
    (local.get $ptr))
  (func (export "openwop_free") (param i32 i32))

  (func (export "openwop_abi_version") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i64) (call $pack (i32.const 16) (i32.const 12)))
  (func (export "openwop_node_count") (result i32) (i32.const 4))
  (func (export "openwop_node_id_at") (param $i i32) (result i64)
    (if (i32.eq (local.get $i) (i32.const 0)) (then (return (call $pack (i32.const 32) (i32.const 12)))))
    (if (i32.eq (local.get $i) (i32.const 1)) (then (return (call $pack (i32.const 48) (i32.const 13)))))
    (if (i32.eq (local.get $i) (i32.const 2)) (then (return (call $pack (i32.const 64) (i32.const 14)))))
    (if (i32.eq (local.get $i) (i32.const 3)) (then (return (call $pack (i32.const 80) (i32.const 10)))))
    (i64.const 0))

  ;; writes head, then len bytes from src, then "}" into a new buffer
  (func $envelope (param $src i32) (param $len i32) (result i64)
    (local $out i32)
    (local.set $out (call $alloc (i32.add (local.get $len) (i32.const 33))))
    (memory.copy (local.get $out) (i32.const 224) (i32.const 32))
    (memory.copy (i32.add (local.get $out) (i32.const 32)) (local.get $src) (local.get $len))
    (i32.store8 (i32.add (local.get $out) (i32.add (local.get $len) (i32.const 32))) (i32.const 125))
    (call $pack (local.get $out) (i32.add (local.get $len) (i32.const 33))))

  (func (export "openwop_node_invoke") (param $i i32) (param $req i32) (param $rlen i32) (result i64)
    (local $status i32) (local $buf i32)
    (local.set $status
      (if (result i32) (i32.eq (local.get $i) (i32.const 0))
        (then (call $asset_read (i32.const 96) (i32.const 19) (global.get $resp_out)))
        (else (if (result i32) (i32.eq (local.get $i) (i32.const 1))
          (then (call $asset_read (i32.const 128) (i32.const 23) (global.get $resp_out)))
          (else (if (result i32) (i32.eq (local.get $i) (i32.const 2))
            (then (call $asset_read (i32.const 160) (i32.const 18) (global.get $resp_out)))
            (else (call $asset_read (i32.const 192) (i32.const 20) (global.get $resp_out)))))))))
    (if (i32.eqz (local.get $status))
      (then (return (call $envelope
        (i32.load (global.get $resp_out))
        (i32.load (i32.add (global.get $resp_out) (i32.const 4)))))))
    ;; {"status":NN} (two digits)
    (local.set $buf (i32.const 272))
    (memory.copy (local.get $buf) (i32.const 256) (i32.const 10))
    (i32.store8 (i32.add (local.get $buf) (i32.const 10)) (i32.add (i32.const 48) (i32.div_u (local.get $status) (i32.const 10))))
    (i32.store8 (i32.add (local.get $buf) (i32.const 11)) (i32.add (i32.const 48) (i32.rem_u (local.get $status) (i32.const 10))))
    (i32.store8 (i32.add (local.get $buf) (i32.const 12)) (i32.const 125))
    (call $envelope (local.get $buf) (i32.const 13)))
)
