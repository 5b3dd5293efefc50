package sqlite

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
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
	"github.com/packrun/packrun/internal/evidence"
)

// Head checkpoints anchor the evidence chain outside the database. The hash
// chain shows that no event was changed or removed *before* the newest one;
// it cannot show that the newest events were not deleted together (the
// chain that remains is whole). So after commits that append events, the
// store writes the head it committed — seq, hash, time — to a file beside
// the database, signed with the host key (Options.HostKeyFile, an Ed25519
// seed kept apart from the database when the operator can). VerifyChain
// reads it before walking the chain and reports a chain that ends before
// the checkpointed event, or whose event there has another hash.
//
// Checkpoints are coalesced (at most one write per checkpointEvery while
// the store runs, and the last head at Close) and replaced by a rename
// without fsync: they are not worth a sync on every short-lived process.
// After a crash the file may name an older head than the database's, or be
// unreadable; either only weakens the check (an unreadable checkpoint counts
// as none and is replaced at the next open, as a deleted one is).

// checkpointFormat is the first line of the signed text and the file's
// "format" field.
const checkpointFormat = "packrun.evidence-head/v1"

// checkpointEvery bounds how often a running store rewrites its checkpoint.
const checkpointEvery = 10 * time.Millisecond

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
	return []byte(checkpointFormat + "\n" + strconv.FormatInt(c.Seq, 10) + "\n" + c.Hash + "\n" + c.Time + "\n")
}

// hostKey is the Ed25519 key of Options.HostKeyFile, created (0600) the
// first time a checkpoint is written.
type hostKey struct {
	path string
	once sync.Once
	key  ed25519.PrivateKey
	err  error
}

func (k *hostKey) load(create bool) (ed25519.PrivateKey, error) {
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
func (k *hostKey) create() error {
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

// signing returns the key, creating it if needed; the result is kept.
func (k *hostKey) signing() (ed25519.PrivateKey, error) {
	k.once.Do(func() { k.key, k.err = k.load(true) })
	return k.key, k.err
}

// SealDigest seals the digest of an exported file of the given kind (an
// evidence bundle, a trace) with the host key, creating the key if the
// host has none yet.
func (s *Store) SealDigest(kind, digest string) (*host.Seal, error) {
	key, err := s.hostKey.signing()
	if err != nil {
		return nil, err
	}
	return evidence.SealDigest(key, kind, digest), nil
}

// HostPublicKey is the host key's public half (hex), "" if the host has no
// key yet.
func (s *Store) HostPublicKey() (string, error) {
	key, err := s.hostKey.load(false)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(key.Public().(ed25519.PublicKey)), nil
}

// checkpointer writes the newest committed head, coalescing.
type checkpointer struct {
	path string
	key  *hostKey
	now  func() time.Time

	mu     sync.Mutex
	latest eventHead

	writing sync.Mutex // held by write
	written int64      // seq of the last checkpoint this process wrote
	wake    chan struct{}
	stop    chan struct{} // closed by close: no more waiting between writes
	done    chan struct{}
}

func newCheckpointer(path string, key *hostKey, now func() time.Time) *checkpointer {
	c := &checkpointer{path: path, key: key, now: now, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// offer records h as committed; a later write anchors it.
func (c *checkpointer) offer(h eventHead) {
	c.mu.Lock()
	if h.seq > c.latest.seq {
		c.latest = h
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	pause := time.NewTimer(0)
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		}
		c.write()
		pause.Reset(checkpointEvery)
		select {
		case <-c.stop:
			return
		case <-pause.C:
		}
	}
}

// close stops the loop and writes the last head, if it is not written yet.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.write()
}

// write signs and writes the latest head unless the file already holds it
// or a newer one (another process sharing the store may have written it).
func (c *checkpointer) write() error {
	c.writing.Lock()
	defer c.writing.Unlock()
	c.mu.Lock()
	h := c.latest
	c.mu.Unlock()
	if h.seq == 0 || h.seq <= c.written {
		return nil
	}
	if cur, err := readCheckpoint(c.path); err == nil && cur.Seq >= h.seq {
		c.written = h.seq
		return nil
	}
	key, err := c.key.signing()
	if err != nil {
		return err
	}
	cp := &Checkpoint{Format: checkpointFormat, Seq: h.seq, Hash: h.hash, Time: ts(c.now()),
		PublicKey: hex.EncodeToString(key.Public().(ed25519.PublicKey))}
	cp.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, cp.signedText()))
	data, _ := json.Marshal(cp)
	if err = replaceFile(c.path, append(data, '\n')); err == nil {
		c.written = h.seq
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

// readCheckpoint reads and decodes the checkpoint file, without checking
// its signature.
func readCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if len(b) > 4096 || json.Unmarshal(b, &cp) != nil || cp.Format != checkpointFormat {
		return nil, fmt.Errorf("%s is not a packrun evidence head checkpoint", path)
	}
	return &cp, nil
}

// checkCheckpoint reads the checkpoint and checks its signature with the
// host key. It returns nil, nil when there is none.
func (s *Store) checkCheckpoint() (*Checkpoint, *host.ChainBreak) {
	cp, err := readCheckpoint(s.opts.CheckpointFile)
	if err != nil {
		// None, or cut short by a crash: as good as deleted, which an
		// attacker can do as well. The report then has no checkpoint.
		return nil, nil
	}
	forged := func(detail string) *host.ChainBreak {
		return &host.ChainBreak{Problem: host.BreakCheckpoint, Detail: detail}
	}
	key, err := s.hostKey.load(false)
	if err != nil {
		return nil, forged(fmt.Sprintf("the head checkpoint %s cannot be checked: %v", s.opts.CheckpointFile, err))
	}
	sig, err := base64.StdEncoding.DecodeString(cp.Signature)
	if err != nil || !ed25519.Verify(key.Public().(ed25519.PublicKey), cp.signedText(), sig) {
		return nil, forged(fmt.Sprintf("the head checkpoint %s is not signed by this host's key (%s): it was forged or replaced", s.opts.CheckpointFile, s.opts.HostKeyFile))
	}
	return cp, nil
}

// seedCheckpoint anchors the current head of a store that has events but
// no readable checkpoint (one written before checkpoints existed, or whose
// file a crash cut short).
func (s *Store) seedCheckpoint(ctx context.Context) error {
	if _, err := readCheckpoint(s.opts.CheckpointFile); err == nil {
		return nil
	}
	var h eventHead
	err := s.db.QueryRowContext(ctx, headQuery).Scan(&h.seq, &h.hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	s.cp.mu.Lock()
	s.cp.latest = h
	s.cp.mu.Unlock()
	return s.cp.write()
}
