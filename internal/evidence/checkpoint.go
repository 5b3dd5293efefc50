package evidence

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
)

// Head checkpoints anchor the evidence chain outside the database. The hash
// chain shows that no entry was changed or removed *before* the newest one;
// it cannot show that the newest entries were not deleted together (the
// chain that remains is whole). So after commits that append entries, a
// store writes the head it committed — seq, hash, time — to a file outside
// the database, signed with the host key (an Ed25519 seed kept apart from
// the database when the operator can). VerifyChain reads it before walking
// the chain and reports a chain that ends before the checkpointed entry,
// or whose entry there has another hash (CheckAnchor).
//
// Both stores use this: internal/store/sqlite writes the file beside its
// database, internal/store/postgres into each node's home (each node anchors the
// heads it committed).
//
// Checkpoints are coalesced (at most one write per checkpointEvery while
// the store runs, and the last head at Close) and replaced by a rename
// without fsync: they are not worth a sync on every short-lived process.
// After a crash the file may name an older head than the database's.
//
// Nothing re-creates the anchor behind the operator's back. A store
// records in its database the public key its chain is anchored with, the
// first time it writes a checkpoint (Open's Record). From then on, opening
// the store checks the anchor (Anchor.Open): a checkpoint that is missing
// while the chain has entries, unreadable, not a checkpoint, or not signed
// by the host key, and a host key that is missing or is not the recorded
// one, refuse the open with an *UnanchoredError (host.ErrUnanchored) that
// names the file. Re-anchoring is the operator's explicit command
// (Anchor.Reset, through packrun evidence reanchor), and the chain records
// it. A store with neither a record nor a checkpoint has never been
// anchored (a new home, or one from before records were kept) and is
// anchored at its current head.

// CheckpointFormat is the first line of the signed text and the file's
// "format" field.
const CheckpointFormat = "packrun.evidence-head/v1"

// checkpointEvery bounds how often a running store rewrites its checkpoint.
// Each write (a temporary file signed, written and renamed into place)
// cost packrun serve ≈ 0.3–0.4 ms of CPU, most of it in the file system:
// at 10 ms that was 6 % of its CPU under POST /v1/invoke. The file is not
// synced, so what it may lag after a crash is the kernel's, not this.
const checkpointEvery = 100 * time.Millisecond

// maxCheckpointBytes bounds the checkpoint file ReadCheckpoint reads.
const maxCheckpointBytes = 4096

// Checkpoint is the file's content.
type Checkpoint struct {
	Format    string `json:"format"`
	Seq       int64  `json:"seq"`
	Hash      string `json:"hash"`
	Time      string `json:"time"`
	PublicKey string `json:"public_key"` // hex Ed25519, for the reader's information: the key checked is the host key's
	Signature string `json:"signature"`  // base64 Ed25519 over signedText
}

func (c *Checkpoint) signedText() []byte {
	return []byte(CheckpointFormat + "\n" + strconv.FormatInt(c.Seq, 10) + "\n" + c.Hash + "\n" + c.Time + "\n")
}

// ReadCheckpoint reads and decodes a checkpoint file, without checking its
// signature. A missing file is an error that errors.Is os.ErrNotExist.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	return decodeCheckpoint(path, b, err)
}

// decodeCheckpoint decodes the bytes b read from path (err: the read's).
func decodeCheckpoint(path string, b []byte, err error) (*Checkpoint, error) {
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if len(b) > maxCheckpointBytes || json.Unmarshal(b, &cp) != nil || cp.Format != CheckpointFormat {
		return nil, fmt.Errorf("%s is not a packrun evidence head checkpoint", path)
	}
	return &cp, nil
}

// verify checks the checkpoint's signature with pub.
func (c *Checkpoint) verify(pub ed25519.PublicKey) bool {
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	return err == nil && ed25519.Verify(pub, c.signedText(), sig)
}

// Head is the head the checkpoint anchors (its time as written, zero if
// unreadable).
func (c *Checkpoint) Head() host.ChainHead {
	t, _ := time.Parse(time.RFC3339Nano, c.Time)
	return host.ChainHead{Seq: c.Seq, Hash: c.Hash, Time: t}
}

// UnanchoredError is why a store refuses to open: its anchor (File, the
// checkpoint or the host key file) is missing, damaged or replaced. It
// matches host.ErrUnanchored.
type UnanchoredError struct {
	File   string
	Detail string // one line, naming File
}

func (e *UnanchoredError) Error() string {
	return e.Detail + "; if you know why, re-anchor the chain with: packrun evidence reanchor --reason \"...\""
}

func (e *UnanchoredError) Unwrap() error { return host.ErrUnanchored }

// OpenState is what a store knows of its anchor when it opens.
type OpenState struct {
	// Recorded is the public key (hex) the store recorded as anchoring its
	// chain; "" if it recorded none.
	Recorded string
	// Record records pub (hex) as the key the chain is anchored with; the
	// anchor calls it once the first checkpoint signed by a key not
	// recorded yet is on disk.
	Record func(pub string) error
	// HeadSeq and HeadHash are the chain's head (0, "" when empty).
	HeadSeq  int64
	HeadHash string
}

// Open checks the anchor as its store opens (see the note at the top):
// nil if the checkpoint and the host key are the ones the store anchored
// its chain with, or if it never anchored (then its current head is
// anchored now); otherwise an *UnanchoredError, and nothing is written.
//
// With allowLost (the operator's re-anchoring), a lost anchor is not
// refused: the store opens so that Reset can anchor it anew.
func (a *Anchor) Open(st OpenState, allowLost bool) error {
	a.mu.Lock()
	a.record, a.recorded = st.Record, st.Recorded
	a.mu.Unlock()
	cp, problem := a.inspect(st)
	if problem != nil {
		if allowLost {
			return nil
		}
		return problem
	}
	a.mu.Lock()
	a.mustExist = st.Recorded != "" && st.HeadSeq > 0
	a.mu.Unlock()
	if cp == nil {
		if st.HeadSeq > 0 {
			return a.Seed(st.HeadSeq, st.HeadHash)
		}
		return nil
	}
	// A checkpoint the key verifies: record the key if the store has not
	// (a home anchored before records were kept). The key, not the
	// checkpoint's public_key field, which the signature does not cover.
	pub, err := a.key.Public()
	if err != nil {
		return err
	}
	return a.noteKey(hex.EncodeToString(pub))
}

// State reports the anchor for the operator (host.Anchoring.AnchorState).
func (a *Anchor) State(st OpenState) *host.AnchorState {
	out := &host.AnchorState{CheckpointFile: a.path, KeyFile: a.key.String(), RecordedKey: st.Recorded}
	if cp, err := ReadCheckpoint(a.path); err == nil {
		h := cp.Head()
		out.Checkpoint, out.CheckpointKey = &h, cp.PublicKey
	}
	if pub, err := a.key.Public(); err == nil {
		out.HostKey = hex.EncodeToString(pub)
	}
	if p := a.Problem(st); p != nil {
		out.Problem = p.Detail
	}
	return out
}

// Problem is what Open would refuse the store for, nil if nothing.
func (a *Anchor) Problem(st OpenState) *UnanchoredError {
	_, problem := a.inspect(st)
	return problem
}

// inspect reads the checkpoint and the host key once and says what is
// wrong with them, if anything. A checkpoint it verified is remembered as
// Check's is, so the first VerifyChain after an open does not verify it
// again; it is returned (nil when there is none).
func (a *Anchor) inspect(st OpenState) (*Checkpoint, *UnanchoredError) {
	raw, readErr := os.ReadFile(a.path)
	cp, cpErr := decodeCheckpoint(a.path, raw, readErr)
	missing := errors.Is(cpErr, os.ErrNotExist)
	if st.Recorded == "" && missing {
		return nil, nil // never anchored
	}
	refuse := func(file, format string, args ...any) (*Checkpoint, *UnanchoredError) {
		return nil, &UnanchoredError{File: file, Detail: fmt.Sprintf(format, args...)}
	}
	anchoredWith := st.Recorded
	if anchoredWith == "" && cp != nil {
		anchoredWith = cp.PublicKey
	}
	pub, keyErr := a.key.Public()
	switch {
	case errors.Is(keyErr, os.ErrNotExist):
		return refuse(a.key.String(), "the host key %s is missing, but this home's evidence chain is anchored with key %.16s…", a.key, anchoredWith)
	case keyErr != nil:
		return refuse(a.key.String(), "the host key cannot be read: %v", keyErr)
	}
	pubHex := hex.EncodeToString(pub)
	if st.Recorded != "" && pubHex != st.Recorded {
		return refuse(a.key.String(), "the host key %s (%.16s…) is not the key this home's evidence chain is anchored with (%.16s…): it was replaced", a.key, pubHex, st.Recorded)
	}
	switch {
	case missing && st.HeadSeq == 0:
		return nil, nil // anchored with this key, nothing appended yet
	case missing:
		return refuse(a.path, "the evidence head checkpoint %s is missing, but this home's chain (%d events) is anchored with host key %.16s…: it was deleted", a.path, st.HeadSeq, pubHex)
	case cpErr != nil:
		return refuse(a.path, "the evidence head checkpoint %s is damaged (%s)", a.path, oneLine(cpErr, a.path))
	}
	if !cp.verify(pub) {
		if cp.PublicKey != pubHex {
			return refuse(a.path, "the evidence head checkpoint %s names host key %.16s…, but the host key %s is %.16s…: the key was replaced or the checkpoint forged", a.path, cp.PublicKey, a.key, pubHex)
		}
		return refuse(a.path, "the evidence head checkpoint %s is not signed by this host's key (%s): it was forged or replaced", a.path, a.key)
	}
	a.mu.Lock()
	a.checked = checkedHead{raw: raw, pub: pub, head: cp.Head()}
	a.mu.Unlock()
	return cp, nil
}

// oneLine is err's message on one line, without the path it repeats.
func oneLine(err error, path string) string {
	msg := strings.TrimPrefix(err.Error(), path+" ")
	return strings.Join(strings.Fields(msg), " ")
}

// noteKey records pub as the chain's anchoring key if it is not already.
// a.mu is not held while the store records it: record is a write that
// may wait for the database's write lock, and Offer, which takes a.mu, is
// called by the store's sync as each commit reaches the disk: later
// commits would wait for the record to be synced and answered.
func (a *Anchor) noteKey(pub string) error {
	a.mu.Lock()
	record := a.record
	if a.recorded == pub || record == nil {
		a.recorded = pub
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()
	if err := record(pub); err != nil {
		return fmt.Errorf("record the evidence anchor's host key: %w", err)
	}
	a.mu.Lock()
	a.recorded = pub
	a.mu.Unlock()
	return nil
}

// Key is the host key an Anchor signs its checkpoints with and checks
// them against.
type Key interface {
	// Signing returns the private key, creating it if the host has none
	// yet.
	Signing() (ed25519.PrivateKey, error)
	// Public returns the public key checkpoints must be signed by,
	// without creating it: an error if the host has no key.
	Public() (ed25519.PublicKey, error)
	// String names the key in a report.
	String() string
}

// HostKey is the Ed25519 key of a host key file (64 hex digits of seed),
// created (0600) the first time something is signed with it.
type HostKey struct {
	path string
	once sync.Once
	key  ed25519.PrivateKey
	err  error

	pubMu   sync.Mutex
	pubFile []byte // the file's content pub was derived from
	pub     ed25519.PublicKey
}

var _ Key = (*HostKey)(nil)

// NewHostKey returns the key of the file at path; the file is read when
// the key is first needed.
func NewHostKey(path string) *HostKey { return &HostKey{path: path} }

// String is the key file's path.
func (k *HostKey) String() string { return k.path }

// Load reads the key; create makes it first if the file does not exist.
// Without create, a missing file is an error that errors.Is
// os.ErrNotExist.
func (k *HostKey) Load(create bool) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(k.path)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := k.create(); err != nil {
			return nil, fmt.Errorf("create host key %s: %w", k.path, err)
		}
		b, err = os.ReadFile(k.path) // ours, or the one another process made first
	}
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", k.path, err)
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("host key %s is not a packrun host key (want %d hex digits)", k.path, 2*ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// create writes a new key unless another process has: the key is written
// (synced) under a temporary name and linked into place, which fails if
// the name exists.
func (k *HostKey) create() error {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.new-%d-%x", k.path, os.Getpid(), seed[:4])
	if err := blobs.WriteFile(tmp, []byte(hex.EncodeToString(seed)+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, k.path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	d, err := os.Open(filepath.Dir(k.path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Signing returns the key, creating it if needed; the result is kept.
func (k *HostKey) Signing() (ed25519.PrivateKey, error) {
	k.once.Do(func() { k.key, k.err = k.Load(true) })
	return k.key, k.err
}

// Public reads the key's public half, without creating the key.
//
// The key is derived once per content of the file: a check per attempt
// (replay --all, export) costs a small read, not a key derivation.
func (k *HostKey) Public() (ed25519.PublicKey, error) {
	b, err := os.ReadFile(k.path)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", k.path, err)
	}
	k.pubMu.Lock()
	defer k.pubMu.Unlock()
	if k.pub != nil && bytes.Equal(b, k.pubFile) {
		return k.pub, nil
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("host key %s is not a packrun host key (want %d hex digits)", k.path, 2*ed25519.SeedSize)
	}
	k.pubFile, k.pub = b, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return k.pub, nil
}

// givenKey is a key a store was handed already loaded.
type givenKey struct {
	key  ed25519.PrivateKey
	name string
}

// GivenKey is a Key for key, loaded by the caller; name names it in a
// report.
func GivenKey(key ed25519.PrivateKey, name string) Key { return &givenKey{key: key, name: name} }

func (k *givenKey) Signing() (ed25519.PrivateKey, error) { return k.key, nil }

func (k *givenKey) Public() (ed25519.PublicKey, error) {
	return k.key.Public().(ed25519.PublicKey), nil
}

func (k *givenKey) String() string { return k.name }

// head is a committed chain head, as offered to an Anchor.
type head struct {
	seq  int64
	hash string
}

// Anchor keeps one store's signed head checkpoint: a goroutine writes the
// newest head the store offered (Offer), coalescing, and Check reads the
// file back for VerifyChain.
type Anchor struct {
	path string
	key  Key
	now  func() time.Time

	mu     sync.Mutex
	latest head
	// record, recorded: the store's record of the key its chain is
	// anchored with (OpenState). mustExist: the checkpoint was there when
	// the store opened (or this process wrote it), so its absence is a
	// break, not a new home.
	record    func(pub string) error
	recorded  string
	mustExist bool
	checked   checkedHead // the last checkpoint Check verified

	writing sync.Mutex // held by write
	written int64      // seq of the last checkpoint this process wrote
	wake    chan struct{}
	stop    chan struct{} // closed by Close: no more waiting between writes
	done    chan struct{}
}

// NewAnchor starts an anchor writing to path, signed with key, timed by
// now. Close stops it.
func NewAnchor(path string, key Key, now func() time.Time) *Anchor {
	a := &Anchor{path: path, key: key, now: now, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// Path is the checkpoint file's path.
func (a *Anchor) Path() string { return a.path }

// Offer records the head seq, hash as committed (durably, as far as the
// store promises); a later write anchors it. Offer never blocks on I/O.
func (a *Anchor) Offer(seq int64, hash string) {
	a.mu.Lock()
	if seq > a.latest.seq {
		a.latest = head{seq: seq, hash: hash}
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Anchor) run() {
	defer close(a.done)
	pause := time.NewTimer(0)
	for {
		select {
		case <-a.stop:
			return
		case <-a.wake:
		}
		// A failed write is retried on the next wake, and Close returns it.
		_ = a.write()
		pause.Reset(checkpointEvery)
		select {
		case <-a.stop:
			return
		case <-pause.C:
		}
	}
}

// Close stops the loop and writes the last head, if it is not written yet.
func (a *Anchor) Close() error {
	close(a.stop)
	<-a.done
	return a.write()
}

// Seed anchors seq, hash now unless the checkpoint holds it or a newer
// head: the head of a store that has never been anchored (Open).
func (a *Anchor) Seed(seq int64, hash string) error {
	a.mu.Lock()
	if seq > a.latest.seq {
		a.latest = head{seq: seq, hash: hash}
	}
	a.mu.Unlock()
	return a.write()
}

// write signs and writes the latest head unless the file already holds it
// or a newer one (another process sharing the file may have written it).
func (a *Anchor) write() error {
	a.writing.Lock()
	defer a.writing.Unlock()
	a.mu.Lock()
	h := a.latest
	a.mu.Unlock()
	if h.seq == 0 || h.seq <= a.written {
		return nil
	}
	if cur, err := ReadCheckpoint(a.path); err == nil && cur.Seq >= h.seq {
		a.written = h.seq
		return nil
	}
	return a.sign(h)
}

// sign writes a checkpoint of h, signed with the host key, recording the
// key first if the store has not. The caller holds a.writing.
func (a *Anchor) sign(h head) error {
	key, err := a.key.Signing()
	if err != nil {
		return err
	}
	pub := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	a.mu.Lock()
	first := a.record != nil && a.recorded != pub
	a.mu.Unlock()
	cp := &Checkpoint{Format: CheckpointFormat, Seq: h.seq, Hash: h.hash, Time: host.FormatTime(a.now()), PublicKey: pub}
	cp.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, cp.signedText()))
	data, _ := json.Marshal(cp)
	// The first checkpoint signed by a key the store has not recorded is
	// written durably, and recorded only after: a store's record always
	// has a checkpoint on disk behind it, so that another process opening
	// the store meanwhile (or after a crash) never finds a record without
	// one, which it would refuse as a deleted checkpoint.
	if err := replaceFile(a.path, append(data, '\n'), first); err != nil {
		return err
	}
	a.written = h.seq
	a.mu.Lock()
	a.mustExist = true
	a.mu.Unlock()
	return a.noteKey(pub)
}

// Reanchor is host.Anchoring.Reanchor over a store's appendEvent: it
// appends e and anchors the chain at it with the current host key.
func (a *Anchor) Reanchor(ctx context.Context, e host.Event, appendEvent func(context.Context, host.Event) (*host.Event, error)) (*host.Event, error) {
	out, err := appendEvent(ctx, e)
	if err != nil {
		return nil, err
	}
	if err := a.Reset(out.Seq, out.Hash); err != nil {
		return nil, host.Wrap("reanchor", "", err)
	}
	return out, nil
}

// Reset anchors seq, hash now, whatever the checkpoint holds (a newer
// head, another key's signature, garbage), and records the host key as the
// chain's: the operator's re-anchoring. The head must be the chain's.
func (a *Anchor) Reset(seq int64, hash string) error {
	a.writing.Lock()
	defer a.writing.Unlock()
	a.mu.Lock()
	a.latest = head{seq: seq, hash: hash}
	a.mu.Unlock()
	return a.sign(head{seq: seq, hash: hash})
}

// replaceFile replaces path with data through a temporary file in its
// directory and a rename, synced (file and directory) only if durable.
func replaceFile(path string, data []byte, durable bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".evidence-head-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	if durable {
		if d, derr := os.Open(filepath.Dir(path)); derr == nil {
			err = d.Sync()
			d.Close()
		}
	}
	return err
}

// Check reads the checkpoint and checks its signature with the host key.
// It returns the head it anchors, nil, nil when there is none, or a
// BreakCheckpoint when the file cannot be checked or is not signed by the
// key. Read it before walking the chain, so that a head committed
// meanwhile is never newer than the chain walked.
func (a *Anchor) Check() (*host.ChainHead, *host.ChainBreak) {
	forged := func(detail string) *host.ChainBreak {
		return &host.ChainBreak{Problem: host.BreakCheckpoint, Detail: detail}
	}
	// Whether the file must exist is read before the file: a first
	// checkpoint written in between is then found, not missed.
	a.mu.Lock()
	must := a.mustExist
	a.mu.Unlock()
	// A checkpoint verified before, unchanged since (the same bytes, the
	// same key), is not decoded and verified again: replay --all and
	// export check it once per attempt.
	raw, err := os.ReadFile(a.path)
	if err == nil {
		if h := a.verified(raw); h != nil {
			return h, nil
		}
	}
	cp, err := decodeCheckpoint(a.path, raw, err)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if must {
			return nil, forged(fmt.Sprintf("the head checkpoint %s was deleted while the store was open", a.path))
		}
		return nil, nil // never anchored yet: the report has no checkpoint
	case err != nil:
		return nil, forged(fmt.Sprintf("the head checkpoint %s is damaged (%s)", a.path, oneLine(err, a.path)))
	}
	pub, err := a.key.Public()
	if err != nil {
		return nil, forged(fmt.Sprintf("the head checkpoint %s cannot be checked: %v", a.path, err))
	}
	if !cp.verify(pub) {
		return nil, forged(fmt.Sprintf("the head checkpoint %s is not signed by this host's key (%s): it was forged or replaced", a.path, a.key))
	}
	h := cp.Head()
	a.mu.Lock()
	a.checked = checkedHead{raw: raw, pub: pub, head: h}
	a.mu.Unlock()
	return &h, nil
}

// checkedHead is the last checkpoint Check verified: the file's bytes,
// the key that verified them, and the head.
type checkedHead struct {
	raw  []byte
	pub  ed25519.PublicKey
	head host.ChainHead
}

// verified returns the head of the checkpoint raw if Check verified these
// bytes with the current host key, nil otherwise.
func (a *Anchor) verified(raw []byte) *host.ChainHead {
	a.mu.Lock()
	c := a.checked
	a.mu.Unlock()
	if c.raw == nil || !bytes.Equal(raw, c.raw) {
		return nil
	}
	pub, err := a.key.Public()
	if err != nil || !pub.Equal(c.pub) {
		return nil
	}
	h := c.head
	return &h
}

// CheckHead reports whether the chain rep walked holds head: an entry at
// head.Seq whose hash, hashAt, is head.Hash ("" if the chain has none
// there). A chain that ends before it, or differs there, lost or rewrote
// its newest entries. what names the anchor in the message.
func CheckHead(rep *host.ChainReport, hashAt string, head host.ChainHead, what string) *host.ChainBreak {
	switch {
	case rep.HeadSeq < head.Seq:
		return &host.ChainBreak{Seq: head.Seq, Problem: host.BreakHeadRewound,
			Detail: fmt.Sprintf("the chain ends at event %d, but %s event %d (%.12s…): events after %d were removed", rep.HeadSeq, what, head.Seq, head.Hash, rep.HeadSeq)}
	case hashAt != head.Hash:
		return &host.ChainBreak{Seq: head.Seq, Problem: host.BreakHeadRewound,
			Detail: fmt.Sprintf("event %d hashes to %.12s…, but %s it as %.12s…: the chain was rewritten", head.Seq, hashAt, what, head.Hash)}
	}
	return nil
}

// CheckAnchor is CheckHead of a signed checkpoint's head (Anchor.Check);
// nil when there is no checkpoint.
func CheckAnchor(rep *host.ChainReport, hashAt string, anchor *host.ChainHead) *host.ChainBreak {
	if anchor == nil {
		return nil
	}
	return CheckHead(rep, hashAt, *anchor, "the host's signed checkpoint of "+anchor.Time.Format(time.RFC3339)+" anchored")
}

// CheckAnchoredAttempt reports an attempt at the head of the chain (no
// entry after it to check its link against) whose hash is not the one the
// signed checkpoint anchored at its seq: a rewritten newest attempt.
func CheckAnchoredAttempt(anchor *host.ChainHead, attemptID string, seq int64, hash string) *host.ChainBreak {
	if anchor == nil || anchor.Seq != seq || anchor.Hash == hash {
		return nil
	}
	return &host.ChainBreak{Seq: seq, Type: host.EventAttemptRecorded, AttemptID: attemptID, Problem: host.BreakHeadRewound,
		Detail: fmt.Sprintf("attempt %s, at the head (event %d), hashes to %.12s…, but the host's signed checkpoint anchored %.12s…: it was rewritten", attemptID, seq, hash, anchor.Hash)}
}
