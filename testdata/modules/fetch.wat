;; fixture: fetch
;; Outbound HTTP for the http_request tests, in ABI 1.3.
;; Both nodes read the request from the pack's configuration (config_get
;; {"key":"req"}: {"value":<request>}) and pass it to http_request.
;; Node "test.fetch" (index 0) passes it as is; node "test.fetch2" (index 1)
;; first changes the 18th byte from the end to "b" (a request ending in
;; /a","method":"GET"} then asks for /b: another pack version's request).
;; Node "test.nofetch" (index 2) reads the request the same way and does not
;; send it (the benchmarks' baseline invocation: "r" is null).
;; All return {"s":"NN","r":<http_request's response or null>}, NN the
;; status in two digits. Node "test.fetchk" (index 3) sends the request 16
;; times in one invocation (stopping at the first failing status) and
;; returns a digest only, {"s":"NN","n":"KK"}, KK the number of non-empty
;; responses in two digits: the benchmarks' per-request cost of the import
;; without the output's size growing with the response.
;; Rebuild: wat2wasm fetch.wat -o fetch.wasm (build.sh).
(module
  (import "packrun:host/v1" "config_get" (func $config (param i32 i32 i32) (result i32)))
  (import "packrun:host/v1" "http_request" (func $http (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "local.fetch")
  (data (i32.const 32) "test.fetch")
  (data (i32.const 48) "test.fetch2")
  (data (i32.const 200) "test.nofetch")
  (data (i32.const 64) "{\22key\22:\22req\22}")
  ;; prefix: offset 96, len 38
  (data (i32.const 96) "{\22outcome\22:\22completed\22,\22output\22:{\22s\22:\22")
  ;; mid: offset 160, len 6
  (data (i32.const 160) "\22,\22r\22:")
  (data (i32.const 176) "}}")
  (data (i32.const 192) "null")
  (data (i32.const 224) "test.fetchk")
  ;; digest: offset 256, len 7; end: offset 272, len 3
  (data (i32.const 256) "\22,\22n\22:\22")
  (data (i32.const 272) "\22}}")

  (func $ptrlen (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.extend_i32_u (local.get $ptr))
      (i64.shl (i64.extend_i32_u (local.get $len)) (i64.const 32))))

  ;; Bump allocator from 8192; openwop_free is a no-op.
  (global $heap (mut i32) (i32.const 8192))
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
  (func (export "openwop_node_count") (result i32) (i32.const 4))
  (func (export "openwop_pack_name") (result i64)
    (call $ptrlen (i32.const 16) (i32.const 11)))
  (func (export "openwop_node_id_at") (param $index i32) (result i64)
    (if (i32.eq (local.get $index) (i32.const 2))
      (then (return (call $ptrlen (i32.const 200) (i32.const 12)))))
    (if (i32.eq (local.get $index) (i32.const 3))
      (then (return (call $ptrlen (i32.const 224) (i32.const 11)))))
    (if (result i64) (i32.eqz (local.get $index))
      (then (call $ptrlen (i32.const 32) (i32.const 10)))
      (else (call $ptrlen (i32.const 48) (i32.const 11)))))

  (func $invoke (export "openwop_node_invoke") (param $node i32) (param $req_ptr i32) (param $req_len i32) (result i64)
    (local $st i32) (local $vp i32) (local $vl i32) (local $rp i32) (local $rl i32) (local $out i32) (local $o i32)
    (if (i32.eq (local.get $node) (i32.const 3))
      (then (return (call $invokek))))
    (i32.store (i32.const 4008) (i32.const 0))
    (i32.store (i32.const 4012) (i32.const 0))
    (local.set $st (call $config (i32.const 64) (i32.const 13) (i32.const 4000)))
    (if (i32.and (i32.eqz (local.get $st)) (i32.ne (local.get $node) (i32.const 2)))
      (then
        ;; {"value":<request>}: the request starts 9 bytes in and is 10 shorter.
        (local.set $vp (i32.add (i32.load (i32.const 4000)) (i32.const 9)))
        (local.set $vl (i32.sub (i32.load (i32.const 4004)) (i32.const 10)))
        (if (i32.eq (local.get $node) (i32.const 1))
          (then (i32.store8 (i32.sub (i32.add (local.get $vp) (local.get $vl)) (i32.const 18)) (i32.const 98))))
        (local.set $st (call $http (local.get $vp) (local.get $vl) (i32.const 4008)))))
    (local.set $rp (i32.load (i32.const 4008)))
    (local.set $rl (i32.load (i32.const 4012)))
    (if (i32.eqz (local.get $rl))
      (then (local.set $rp (i32.const 192)) (local.set $rl (i32.const 4))))
    (local.set $out (call $alloc (i32.add (local.get $rl) (i32.const 64))))
    (memory.copy (local.get $out) (i32.const 96) (i32.const 38))
    (local.set $o (i32.add (local.get $out) (i32.const 38)))
    (i32.store8 (local.get $o) (i32.add (i32.div_u (local.get $st) (i32.const 10)) (i32.const 48)))
    (i32.store8 (i32.add (local.get $o) (i32.const 1)) (i32.add (i32.rem_u (local.get $st) (i32.const 10)) (i32.const 48)))
    (local.set $o (i32.add (local.get $o) (i32.const 2)))
    (memory.copy (local.get $o) (i32.const 160) (i32.const 6))
    (local.set $o (i32.add (local.get $o) (i32.const 6)))
    (memory.copy (local.get $o) (local.get $rp) (local.get $rl))
    (local.set $o (i32.add (local.get $o) (local.get $rl)))
    (memory.copy (local.get $o) (i32.const 176) (i32.const 2))
    (local.set $o (i32.add (local.get $o) (i32.const 2)))
    (call $ptrlen (local.get $out) (i32.sub (local.get $o) (local.get $out))))

  ;; Node 3: the request 16 times, then the digest.
  (func $invokek (result i64)
    (local $st i32) (local $vp i32) (local $vl i32) (local $i i32) (local $n i32) (local $out i32) (local $o i32)
    (local.set $st (call $config (i32.const 64) (i32.const 13) (i32.const 4000)))
    (if (i32.eqz (local.get $st))
      (then
        (local.set $vp (i32.add (i32.load (i32.const 4000)) (i32.const 9)))
        (local.set $vl (i32.sub (i32.load (i32.const 4004)) (i32.const 10)))
        (block $done
          (loop $next
            (br_if $done (i32.ge_u (local.get $i) (i32.const 16)))
            (i32.store (i32.const 4008) (i32.const 0))
            (i32.store (i32.const 4012) (i32.const 0))
            (local.set $st (call $http (local.get $vp) (local.get $vl) (i32.const 4008)))
            (if (i32.ne (i32.load (i32.const 4012)) (i32.const 0))
              (then (local.set $n (i32.add (local.get $n) (i32.const 1)))))
            (br_if $done (i32.ne (local.get $st) (i32.const 0)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $next)))))
    (local.set $out (call $alloc (i32.const 64)))
    (memory.copy (local.get $out) (i32.const 96) (i32.const 38))
    (local.set $o (i32.add (local.get $out) (i32.const 38)))
    (i32.store8 (local.get $o) (i32.add (i32.div_u (local.get $st) (i32.const 10)) (i32.const 48)))
    (i32.store8 (i32.add (local.get $o) (i32.const 1)) (i32.add (i32.rem_u (local.get $st) (i32.const 10)) (i32.const 48)))
    (local.set $o (i32.add (local.get $o) (i32.const 2)))
    (memory.copy (local.get $o) (i32.const 256) (i32.const 7))
    (local.set $o (i32.add (local.get $o) (i32.const 7)))
    (i32.store8 (local.get $o) (i32.add (i32.div_u (local.get $n) (i32.const 10)) (i32.const 48)))
    (i32.store8 (i32.add (local.get $o) (i32.const 1)) (i32.add (i32.rem_u (local.get $n) (i32.const 10)) (i32.const 48)))
    (local.set $o (i32.add (local.get $o) (i32.const 2)))
    (memory.copy (local.get $o) (i32.const 272) (i32.const 3))
    (local.set $o (i32.add (local.get $o) (i32.const 3)))
    (call $ptrlen (local.get $out) (i32.sub (local.get $o) (local.get $out))))
)
