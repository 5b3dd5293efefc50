// Package evidence holds what makes the evidence log of the host package
// tamper-evident and safe to show: the canonical encodings and their hashes
// (CompactJSON, HashEvent, HashAttempt, GenesisHash), the attempt record
// with its large values out of line, named by digest (record.go,
// values.go: Values remembers which a store hashed and wrote), the decoding and
// checking of an exported bundle (DecodeBundle, VerifyBundle), the signed
// head checkpoint that anchors a store's chain outside its database
// (Anchor, HostKey, CheckAnchor; checkpoint.go) and the secret Redactor.
// Every backend, and every exported bundle, is checked the same way
// through it. The encodings are a storage format: existing chains must
// keep verifying, so the bytes they hash may never change
// (TestCanonicalHashesAreStable); so is the checkpoint's signed text.
package evidence
