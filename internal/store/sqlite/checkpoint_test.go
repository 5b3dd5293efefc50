package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// reopen closes the fixture's store (which writes the last head
// checkpoint) and opens the database again, as the next process would.
func reopen(t *testing.T, f *fixture) *fixture {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, f.path, Options{Now: f.opts.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{Store: s, path: f.path, clock: f.clock}
}

// Deleting the newest attempt together with its events leaves a chain
// that is whole; the signed head checkpoint shows it was cut.
func TestCheckpointFindsACutChain(t *testing.T) {
	f := newFixture(t, Options{})
	a, _ := seedEvidence(t, f)
	f = reopen(t, f)
	rep, err := f.VerifyChain(ctx)
	if err != nil || !rep.OK || rep.Checkpoint == nil || rep.Checkpoint.Seq != rep.HeadSeq || rep.Checkpoint.Hash != rep.Head {
		t.Fatalf("intact store: %+v %+v (%v)", rep, rep.Broken, err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(f.path), "host.key")); err != nil || len(strings.TrimSpace(string(b))) != 64 {
		t.Fatalf("host key: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(f.path), "host.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("host key mode: %v %v", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(f.path), "*.new-*")); len(left) > 0 {
		t.Fatalf("temporary key files left: %v", left)
	}

	// The attacker removes the attempt and every event from its recording on.
	tamper(t, f, `DELETE FROM attempt_records WHERE attempt_id = '`+a.AttemptID+`'`,
		`DELETE FROM artifacts`, `DELETE FROM runtime_events WHERE seq >= `+itoa(a.EventSeq))
	rep, err = f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Broken == nil || rep.Broken.Problem != host.BreakHeadRewound || !strings.Contains(rep.Broken.Detail, "were removed") {
		t.Fatalf("cut chain reported as %+v %+v", rep, rep.Broken)
	}
	t.Log(rep.Broken.Detail)
}

// A checkpoint edited to match a cut chain is not signed by the host key.
func TestCheckpointForged(t *testing.T) {
	f := newFixture(t, Options{})
	seedEvidence(t, f)
	f = reopen(t, f)
	path := filepath.Join(filepath.Dir(f.path), "evidence-head.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cp evidence.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	cp.Seq--
	evs, _ := f.Events(ctx, host.EventFilter{AfterSeq: cp.Seq - 1, Limit: 1})
	cp.Hash = evs[0].Hash
	b, _ = json.Marshal(cp)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Broken == nil || rep.Broken.Problem != host.BreakCheckpoint || !strings.Contains(rep.Broken.Detail, "not signed by this host's key") {
		t.Fatalf("forged checkpoint reported as %+v %+v", rep, rep.Broken)
	}
}

// A store anchored before anchors were recorded (a checkpoint, no
// record) gets its key recorded at the next open; one from before
// checkpoints existed (neither) is anchored when opened; a running store
// anchors each commit's head without waiting for Close.
func TestCheckpointSeededAndKeptCurrent(t *testing.T) {
	f := newFixture(t, Options{})
	seedEvidence(t, f)
	f = reopen(t, f)
	path := filepath.Join(filepath.Dir(f.path), "evidence-head.json")
	tamper(t, f, `DELETE FROM evidence_anchors`)
	f = reopen(t, f)
	var n int
	if err := f.db.QueryRow(`SELECT count(*) FROM evidence_anchors`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("old home's key recorded %d times (%v)", n, err)
	}
	tamper(t, f, `DELETE FROM evidence_anchors`)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	f = reopen(t, f)
	rep, err := f.VerifyChain(ctx)
	if err != nil || !rep.OK || rep.Checkpoint == nil || rep.Checkpoint.Seq != rep.HeadSeq {
		t.Fatalf("old store not anchored on open: %+v %+v (%v)", rep, rep.Broken, err)
	}
	e, err := f.AppendEvent(ctx, host.Event{Type: "custom.note", Data: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		cp, err := evidence.ReadCheckpoint(path)
		return err == nil && cp.Seq == e.Seq && cp.Hash == e.Hash
	})
}

// The attack of issue 29: the newest events are deleted (triggers dropped
// and recreated) and the checkpoint removed, or damaged in any way, or the
// host key replaced or removed. Before, the next open signed a fresh
// checkpoint at the cut head and the chain verified clean; now the open is
// refused, naming the file, and nothing is written. Options.Reanchor opens
// it, and Reanchor records the re-anchoring in the chain.
func TestLostAnchorRefusesToOpen(t *testing.T) {
	for _, c := range []struct {
		name, file, says string
		damage           func(dir string)
	}{
		{"checkpoint removed", "evidence-head.json", "is missing", func(dir string) { os.Remove(filepath.Join(dir, "evidence-head.json")) }},
		{"checkpoint truncated", "evidence-head.json", "is damaged", func(dir string) { os.Truncate(filepath.Join(dir, "evidence-head.json"), 10) }},
		{"checkpoint garbage", "evidence-head.json", "is damaged", func(dir string) {
			os.WriteFile(filepath.Join(dir, "evidence-head.json"), []byte("\x00garbage\xff"), 0o644)
		}},
		{"checkpoint of another shape", "evidence-head.json", "is damaged", func(dir string) {
			os.WriteFile(filepath.Join(dir, "evidence-head.json"), []byte(`{"head":{"seq":3}}`), 0o644)
		}},
		{"host key removed", "host.key", "is missing", func(dir string) { os.Remove(filepath.Join(dir, "host.key")) }},
		{"host key replaced", "host.key", "it was replaced", func(dir string) {
			os.WriteFile(filepath.Join(dir, "host.key"), []byte(strings.Repeat("7", 64)+"\n"), 0o600)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			a, _ := seedEvidence(t, f)
			f = reopen(t, f)
			dir := filepath.Dir(f.path)
			tamper(t, f, `DELETE FROM attempt_records WHERE attempt_id = '`+a.AttemptID+`'`,
				`DELETE FROM artifacts`, `DELETE FROM runtime_events WHERE seq >= `+itoa(a.EventSeq))
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			c.damage(dir)
			before := snapshot(dir)
			_, err := Open(ctx, f.path, Options{Now: f.clock.Now})
			if !errors.Is(err, host.ErrUnanchored) || !strings.Contains(err.Error(), filepath.Join(dir, c.file)) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("open: %v", err)
			}
			if after := snapshot(dir); after != before {
				t.Fatalf("the refused open changed the home:\n%s\n%s", before, after)
			}
			s, err := Open(ctx, f.path, Options{Now: f.clock.Now, Reanchor: true})
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.AnchorState(ctx)
			if err != nil || st.Problem == "" {
				t.Fatalf("state %+v %v", st, err)
			}
			os.Remove(filepath.Join(dir, "evidence-head.json"))
			if st.HostKey == "" {
				evidence.NewHostKey(filepath.Join(dir, "host.key")).Signing()
			}
			e, err := s.Reanchor(ctx, host.Event{Type: host.EventEvidenceReanchored, Data: json.RawMessage(`{"reason":"test"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			g, err := Open(ctx, f.path, Options{Now: f.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			rep, err := g.VerifyChain(ctx)
			if err != nil || !rep.OK || rep.Checkpoint == nil || rep.Checkpoint.Seq != e.Seq {
				t.Fatalf("re-anchored: %+v %+v %v", rep, rep.Broken, err)
			}
		})
	}
}

// snapshot is the names, sizes and modes of a directory's files and the
// bytes of its key and checkpoint.
func snapshot(dir string) string {
	var b strings.Builder
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fi, _ := e.Info()
		fmt.Fprintf(&b, "%s %d %v\n", e.Name(), fi.Size(), fi.Mode())
	}
	for _, name := range []string{"host.key", "evidence-head.json"} {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		fmt.Fprintf(&b, "%s=%q\n", name, data)
	}
	return b.String()
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 5s")
}
