package evidence

import (
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
// Both stores use this: internal/sqlite writes the file beside its
// database, internal/postgres into each node's home (each node anchors the
// heads it committed).
//
// Checkpoints are coalesced (at most one write per checkpointEvery while
// the store runs, and the last head at Close) and replaced by a rename
// without fsync: they are not worth a sync on every short-lived process.
// After a crash the file may name an older head than the database's, or be
// unreadable; either only weakens the check (an unreadable checkpoint counts
// as none and is replaced at the next open, as a deleted one is).

// CheckpointFormat is the first line of the signed text and the file's
// "format" field.
const CheckpointFormat = "packrun.evidence-head/v1"

// checkpointEvery bounds how often a running store rewrites its checkpoint.
const checkpointEvery = 10 * time.Millisecond

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
// signature.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if len(b) > maxCheckpointBytes || json.Unmarshal(b, &cp) != nil || cp.Format != CheckpointFormat {
		return nil, fmt.Errorf("%s is not a packrun evidence head checkpoint", path)
	}
	return &cp, nil
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
func (k *HostKey) Public() (ed25519.PublicKey, error) {
	key, err := k.Load(false)
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
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
		a.write()
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

// Anchored reports whether the file holds a readable checkpoint (whatever
// its signature).
func (a *Anchor) Anchored() bool {
	_, err := ReadCheckpoint(a.path)
	return err == nil
}

// Seed anchors seq, hash now: the head of a store that has entries but no
// readable checkpoint (one written before checkpoints existed, or whose
// file a crash cut short).
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
	key, err := a.key.Signing()
	if err != nil {
		return err
	}
	cp := &Checkpoint{Format: CheckpointFormat, Seq: h.seq, Hash: h.hash, Time: host.FormatTime(a.now()),
		PublicKey: hex.EncodeToString(key.Public().(ed25519.PublicKey))}
	cp.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, cp.signedText()))
	data, _ := json.Marshal(cp)
	if err = replaceFile(a.path, append(data, '\n')); err == nil {
		a.written = h.seq
	}
	return err
}

// replaceFile replaces path with data through a temporary file in its
// directory and a rename, without syncing.
func replaceFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".evidence-head-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
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
	}
	return err
}

// Check reads the checkpoint and checks its signature with the host key.
// It returns the head it anchors, nil, nil when there is none, or a
// BreakCheckpoint when the file cannot be checked or is not signed by the
// key. Read it before walking the chain, so that a head committed
// meanwhile is never newer than the chain walked.
func (a *Anchor) Check() (*host.ChainHead, *host.ChainBreak) {
	cp, err := ReadCheckpoint(a.path)
	if err != nil {
		// None, or cut short by a crash: as good as deleted, which an
		// attacker can do as well. The report then has no checkpoint.
		return nil, nil
	}
	forged := func(detail string) *host.ChainBreak {
		return &host.ChainBreak{Problem: host.BreakCheckpoint, Detail: detail}
	}
	pub, err := a.key.Public()
	if err != nil {
		return nil, forged(fmt.Sprintf("the head checkpoint %s cannot be checked: %v", a.path, err))
	}
	sig, err := base64.StdEncoding.DecodeString(cp.Signature)
	if err != nil || !ed25519.Verify(pub, cp.signedText(), sig) {
		return nil, forged(fmt.Sprintf("the head checkpoint %s is not signed by this host's key (%s): it was forged or replaced", a.path, a.key))
	}
	t, _ := time.Parse(time.RFC3339Nano, cp.Time)
	return &host.ChainHead{Seq: cp.Seq, Hash: cp.Hash, Time: t}, nil
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
