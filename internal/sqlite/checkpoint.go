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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
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
// the store runs) and written without fsync; Close writes the final head
// durably. After a crash the file may name an older head than the
// database's, which only weakens the check for the last few events.

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
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, err
		}
		if err := blobs.WriteFile(k.path, []byte(hex.EncodeToString(seed)+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("create host key %s: %w", k.path, err)
		}
		return ed25519.NewKeyFromSeed(seed), nil
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

// signing returns the key, creating it if needed; the result is kept.
func (k *hostKey) signing() (ed25519.PrivateKey, error) {
	k.once.Do(func() { k.key, k.err = k.load(true) })
	return k.key, k.err
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
	done    chan struct{}
}

func newCheckpointer(path string, key *hostKey, now func() time.Time) *checkpointer {
	c := &checkpointer{path: path, key: key, now: now, wake: make(chan struct{}, 1), done: make(chan struct{})}
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
	for range c.wake {
		c.write(false)
		time.Sleep(checkpointEvery)
	}
}

// close stops the loop and writes the last head durably.
func (c *checkpointer) close() error {
	close(c.wake)
	<-c.done
	return c.write(true)
}

// write signs and writes the latest head unless the file already holds it
// or a newer one (another process sharing the store may have written it).
func (c *checkpointer) write(durable bool) error {
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
	data = append(data, '\n')
	if durable {
		err = blobs.WriteFile(c.path, data, 0o644)
	} else {
		err = writeQuick(c.path, data)
	}
	if err == nil {
		c.written = h.seq
	}
	return err
}

// writeQuick replaces path with data through a temporary file and a
// rename, without syncing.
func writeQuick(path string, data []byte) error {
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
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
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	forged := func(detail string) *host.ChainBreak {
		return &host.ChainBreak{Problem: host.BreakCheckpoint, Detail: detail}
	}
	if err != nil {
		return nil, forged(err.Error())
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
// no checkpoint yet (one written before checkpoints existed).
func (s *Store) seedCheckpoint(ctx context.Context) error {
	if _, err := os.Stat(s.opts.CheckpointFile); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var h eventHead
	err := s.db.QueryRowContext(ctx, `SELECT seq, hash FROM runtime_events ORDER BY seq DESC LIMIT 1`).Scan(&h.seq, &h.hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	s.cp.mu.Lock()
	s.cp.latest = h
	s.cp.mu.Unlock()
	return s.cp.write(true)
}
