package evidence

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// anchorHome is a directory with a host key file and a checkpoint, and a
// stand-in for the store's record of the anchoring key.
type anchorHome struct {
	dir, keyPath, cpPath string
	recorded             []string // what Record was called with, in order
}

func newAnchorHome(t *testing.T) *anchorHome {
	d := t.TempDir()
	return &anchorHome{dir: d, keyPath: filepath.Join(d, "host.key"), cpPath: filepath.Join(d, "evidence-head.json")}
}

func (h *anchorHome) state(seq int64) OpenState {
	st := OpenState{HeadSeq: seq, HeadHash: strings.Repeat("ab", 32), Record: func(pub string) error {
		h.recorded = append(h.recorded, pub)
		return nil
	}}
	if n := len(h.recorded); n > 0 {
		st.Recorded = h.recorded[n-1]
	}
	return st
}

func (h *anchorHome) anchor() *Anchor {
	return NewAnchor(h.cpPath, NewHostKey(h.keyPath), func() time.Time { return time.Unix(1700000000, 0) })
}

// open opens the anchor as a store would, and closes it.
func (h *anchorHome) open(t *testing.T, seq int64) error {
	t.Helper()
	a := h.anchor()
	err := a.Open(h.state(seq), false)
	if cerr := a.Close(); err == nil && cerr != nil {
		t.Fatal(cerr)
	}
	return err
}

// A new home is anchored at its head and records the key; once anchored,
// every way of losing the checkpoint or the key refuses the open with an
// error naming the file, and writes nothing.
func TestAnchorOpenRefusesALostAnchor(t *testing.T) {
	other := hex.EncodeToString(ed25519.NewKeyFromSeed(make([]byte, 32)).Seed())
	forged := func(h *anchorHome) {
		cp, err := ReadCheckpoint(h.cpPath)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(h.cpPath)
		os.WriteFile(h.cpPath, []byte(strings.Replace(string(b), `"seq":8`, `"seq":7`, 1)), 0o644)
		if cp.Seq != 8 {
			t.Fatalf("seq %d", cp.Seq)
		}
	}
	cases := []struct {
		name   string
		damage func(h *anchorHome)
		file   func(h *anchorHome) string
		says   string
	}{
		{"checkpoint deleted", func(h *anchorHome) { os.Remove(h.cpPath) }, cpFile, "is missing"},
		{"checkpoint empty", func(h *anchorHome) { os.WriteFile(h.cpPath, nil, 0o644) }, cpFile, "is damaged"},
		{"checkpoint truncated", func(h *anchorHome) { os.WriteFile(h.cpPath, []byte(`{"format":"packrun.evid`), 0o644) }, cpFile, "is damaged"},
		{"checkpoint garbage", func(h *anchorHome) { os.WriteFile(h.cpPath, []byte("\x00\xff garbage"), 0o644) }, cpFile, "is damaged"},
		{"checkpoint of another shape", func(h *anchorHome) { os.WriteFile(h.cpPath, []byte(`{"seq":"x","head":[1,2]}`), 0o644) }, cpFile, "is damaged"},
		{"checkpoint a directory", func(h *anchorHome) { os.Remove(h.cpPath); os.Mkdir(h.cpPath, 0o700) }, cpFile, "is damaged"},
		{"checkpoint forged", forged, cpFile, "not signed by this host's key"},
		{"host key deleted", func(h *anchorHome) { os.Remove(h.keyPath) }, keyFile, "is missing"},
		{"host key replaced", func(h *anchorHome) { os.WriteFile(h.keyPath, []byte(other+"\n"), 0o600) }, keyFile, "it was replaced"},
		{"host key garbage", func(h *anchorHome) { os.WriteFile(h.keyPath, []byte("nope"), 0o600) }, keyFile, "cannot be read"},
		{"key and checkpoint deleted", func(h *anchorHome) { os.Remove(h.keyPath); os.Remove(h.cpPath) }, keyFile, "is missing"},
		{"key replaced and checkpoint deleted", func(h *anchorHome) {
			os.WriteFile(h.keyPath, []byte(other+"\n"), 0o600)
			os.Remove(h.cpPath)
		}, keyFile, "it was replaced"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newAnchorHome(t)
			if err := h.open(t, 8); err != nil {
				t.Fatalf("new home: %v", err)
			}
			if len(h.recorded) != 1 {
				t.Fatalf("recorded %v", h.recorded)
			}
			if err := h.open(t, 8); err != nil || len(h.recorded) != 1 {
				t.Fatalf("sound home: %v, recorded %v", err, h.recorded)
			}
			c.damage(h)
			cpBefore, _ := os.ReadFile(h.cpPath)
			keyBefore, _ := os.ReadFile(h.keyPath)
			err := h.open(t, 8)
			var ue *UnanchoredError
			if !errors.As(err, &ue) || !errors.Is(err, host.ErrUnanchored) {
				t.Fatalf("open after %s: %v", c.name, err)
			}
			if ue.File != c.file(h) || !strings.Contains(err.Error(), c.file(h)) || !strings.Contains(err.Error(), c.says) ||
				!strings.Contains(err.Error(), "packrun evidence reanchor") || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q: want %q naming %s", err, c.says, c.file(h))
			}
			if cp, _ := os.ReadFile(h.cpPath); string(cp) != string(cpBefore) {
				t.Fatalf("the refused open wrote the checkpoint: %q", cp)
			}
			if key, _ := os.ReadFile(h.keyPath); string(key) != string(keyBefore) {
				t.Fatalf("the refused open wrote the key: %q", key)
			}
			if len(h.recorded) != 1 {
				t.Fatalf("the refused open recorded %v", h.recorded)
			}
			// The operator's re-anchoring opens it, and anchors the head
			// with whatever key is there now (made if missing).
			a := h.anchor()
			if err := a.Open(h.state(8), true); err != nil {
				t.Fatal(err)
			}
			if p := a.State(h.state(8)); p.Problem == "" || p.CheckpointFile != h.cpPath {
				t.Fatalf("state %+v", p)
			}
			os.Remove(h.cpPath) // a directory in one case
			err = a.Reset(9, strings.Repeat("cd", 32))
			if c.name == "host key garbage" {
				// A key file that is not a key is not signed with: the
				// operator moves it away first.
				if err == nil || !strings.Contains(err.Error(), h.keyPath) {
					t.Fatalf("reset with a garbage key: %v", err)
				}
				a.Close()
				os.Remove(h.keyPath)
				a = h.anchor()
				if err := a.Open(h.state(8), true); err != nil {
					t.Fatal(err)
				}
				err = a.Reset(9, strings.Repeat("cd", 32))
			}
			if err != nil {
				t.Fatal(err)
			}
			a.Close()
			if head, brk := a.Check(); brk != nil || head == nil || head.Seq != 9 {
				t.Fatalf("after reset: %+v %+v", head, brk)
			}
			if err := h.open(t, 9); err != nil {
				t.Fatalf("re-anchored home: %v", err)
			}
		})
	}
}

func cpFile(h *anchorHome) string  { return h.cpPath }
func keyFile(h *anchorHome) string { return h.keyPath }

// A home that never anchored (no record, no checkpoint) is anchored at its
// head when it has one; an empty one only once it has something to anchor.
// A home anchored before records were kept (a checkpoint, no record) gets
// its key recorded.
func TestAnchorOpenNewAndOldHomes(t *testing.T) {
	h := newAnchorHome(t)
	if err := h.open(t, 0); err != nil || len(h.recorded) != 0 {
		t.Fatalf("empty home: %v %v", err, h.recorded)
	}
	if _, err := os.Stat(h.cpPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an empty chain was anchored: %v", err)
	}
	if err := h.open(t, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.open(t, 3); err != nil || len(h.recorded) != 1 {
		t.Fatalf("first entries: %v %v", err, h.recorded)
	}
	if cp, err := ReadCheckpoint(h.cpPath); err != nil || cp.Seq != 3 {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	h.recorded = nil // an older packrun kept no record
	if err := h.open(t, 3); err != nil || len(h.recorded) != 1 {
		t.Fatalf("old home: %v %v", err, h.recorded)
	}
	// Anchored with nothing appended: no checkpoint yet is fine.
	h2 := newAnchorHome(t)
	h2.recorded = []string{"aa"}
	if err := h2.open(t, 0); err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("recorded key, no key file: %v", err)
	}
	a := h2.anchor()
	k, _ := a.key.Signing()
	h2.recorded = []string{hex.EncodeToString(k.Public().(ed25519.PublicKey))}
	if err := h2.open(t, 0); err != nil {
		t.Fatalf("anchored, nothing appended: %v", err)
	}
}

// A checkpoint deleted while the store runs is a break of VerifyChain, not
// "no checkpoint".
func TestAnchorCheckAfterDelete(t *testing.T) {
	h := newAnchorHome(t)
	a := h.anchor()
	if err := a.Open(h.state(4), false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if head, brk := a.Check(); brk != nil || head == nil {
		t.Fatalf("%+v %+v", head, brk)
	}
	os.Remove(h.cpPath)
	if head, brk := a.Check(); head != nil || brk == nil || brk.Problem != host.BreakCheckpoint || !strings.Contains(brk.Detail, h.cpPath) {
		t.Fatalf("deleted checkpoint: %+v %+v", head, brk)
	}
}

// Check remembers the checkpoint it verified, but an edit of the same size
// made right after (same second, same inode) is still read and refused, and
// so is a replaced host key.
func TestAnchorCheckCacheSeesEdits(t *testing.T) {
	h := newAnchorHome(t)
	a := h.anchor()
	if err := a.Open(h.state(18), false); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range 3 {
		if head, brk := a.Check(); brk != nil || head == nil || head.Seq != 18 {
			t.Fatalf("%+v %+v", head, brk)
		}
	}
	b, _ := os.ReadFile(h.cpPath)
	f, err := os.OpenFile(h.cpPath, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(strings.Replace(string(b), `"seq":18`, `"seq":17`, 1)), 0)
	f.Close()
	if head, brk := a.Check(); head != nil || brk == nil || !strings.Contains(brk.Detail, "not signed") {
		t.Fatalf("edited in place: %+v %+v", head, brk)
	}
	os.WriteFile(h.cpPath, b, 0o644)
	if head, brk := a.Check(); brk != nil || head == nil {
		t.Fatalf("restored: %+v %+v", head, brk)
	}
	os.WriteFile(h.keyPath, []byte(strings.Repeat("3c", 32)+"\n"), 0o600)
	if head, brk := a.Check(); head != nil || brk == nil {
		t.Fatalf("key replaced: %+v %+v", head, brk)
	}
}

// BenchmarkAnchorCheck is one Check of an unchanged checkpoint, as
// replay --all and export do per attempt.
func BenchmarkAnchorCheck(b *testing.B) {
	d := b.TempDir()
	a := NewAnchor(filepath.Join(d, "evidence-head.json"), NewHostKey(filepath.Join(d, "host.key")), time.Now)
	if err := a.Seed(5, strings.Repeat("ab", 32)); err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	for b.Loop() {
		if _, brk := a.Check(); brk != nil {
			b.Fatal(brk)
		}
	}
}

// The key is recorded only once the checkpoint it signed is on disk: a
// process opening the store between the two must never find a record with
// no checkpoint (it would refuse the store as one whose checkpoint was
// deleted: seen with serve running and install opening the home).
func TestAnchorRecordsAfterTheCheckpointIsWritten(t *testing.T) {
	h := newAnchorHome(t)
	st := h.state(0)
	st.Record = func(pub string) error {
		if _, err := ReadCheckpoint(h.cpPath); err != nil {
			t.Errorf("key recorded before its checkpoint was written: %v", err)
		}
		h.recorded = append(h.recorded, pub)
		return nil
	}
	a := h.anchor()
	if err := a.Open(st, false); err != nil {
		t.Fatal(err)
	}
	a.Offer(1, strings.Repeat("ab", 32))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if len(h.recorded) != 1 {
		t.Fatalf("recorded %v", h.recorded)
	}
	if err := h.open(t, 1); err != nil {
		t.Fatal(err)
	}
}

// countingKey counts the checkpoints signed with it.
type countingKey struct {
	Key
	signed int
}

func (k *countingKey) Signing() (ed25519.PrivateKey, error) {
	k.signed++ // called by the anchor's goroutine only (under a.writing)
	return k.Key.Signing()
}

// A running store offers a head on every commit; the anchor writes at
// most one checkpoint per checkpointEvery (each write is a file signed,
// written and renamed: ≈ 0.3 ms of CPU), whatever the rate of commits.
// Heads offered for 60 ms, one every 100 µs, make at most one write at
// once and one after the pause (the pause is a minimum: a slow machine
// only writes fewer), and Close writes the last head.
func TestAnchorCoalescesWritesPerInterval(t *testing.T) {
	h := newAnchorHome(t)
	k := &countingKey{Key: NewHostKey(h.keyPath)}
	a := NewAnchor(h.cpPath, k, func() time.Time { return time.Unix(1700000000, 0) })
	hash := strings.Repeat("cd", 32)
	seq := int64(0)
	for t0 := time.Now(); time.Since(t0) < 60*time.Millisecond; {
		seq++
		a.Offer(seq, hash)
		time.Sleep(100 * time.Microsecond)
	}
	a.writing.Lock()
	during := k.signed
	a.writing.Unlock()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if during > 2 {
		t.Errorf("%d checkpoints written during 60 ms of commits; want at most 2 (one per %v)", during, checkpointEvery)
	}
	cp, err := ReadCheckpoint(h.cpPath)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Seq != seq {
		t.Errorf("checkpoint after Close at seq %d, want the last head offered, %d", cp.Seq, seq)
	}
}
