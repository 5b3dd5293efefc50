package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// homeNode is a node with a home of its own: its host key and its head
// checkpoint file (evidence-head.json), as root stores.go opens one.
type homeNode struct {
	*Store
	home string
	key  ed25519.PrivateKey
}

// checkpointPath is the node's checkpoint file.
func (n *homeNode) checkpointPath() string { return filepath.Join(n.home, "evidence-head.json") }

// openHomeNode opens a store on dsn as a node with a fresh home and host
// key.
func openHomeNode(t testing.TB, dsn string) *homeNode {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return reopenHomeNode(t, dsn, &homeNode{home: t.TempDir(), key: key})
}

// reopenHomeNode opens a store on dsn as node n (its home, its key), as
// the node's next process would.
func reopenHomeNode(t testing.TB, dsn string, n *homeNode) *homeNode {
	t.Helper()
	s, err := Open(ctx, dsn, Options{HostKey: n.key, CheckpointFile: filepath.Join(n.home, "evidence-head.json")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &homeNode{Store: s, home: n.home, key: n.key}
}

// closeNode closes the node's store, which writes the last head it
// committed to its checkpoint.
func closeNode(t testing.TB, n *homeNode) {
	t.Helper()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

// appendEntries appends n events and n attempts, alternately, ending
// with an attempt; it returns the head the node appended last.
func appendEntries(t testing.TB, s *Store, tag string, n int) host.ChainHead {
	t.Helper()
	for i := range n {
		if _, err := s.AppendEvent(ctx, host.Event{Type: "custom.note", Data: json.RawMessage(fmt.Sprintf(`{"%s":%d}`, tag, i))}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordAttempt(ctx, &host.Attempt{AttemptID: fmt.Sprintf("%s-%d", tag, i), Node: tag, Outcome: abi.Completed}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.Attempt(ctx, fmt.Sprintf("%s-%d", tag, n-1))
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, s, host.EventFilter{AfterSeq: a.EventSeq - 1})
	return host.ChainHead{Seq: evs[0].Seq, Hash: evs[0].Hash}
}

// readCheckpoint reads the node's checkpoint file.
func readCheckpoint(t testing.TB, n *homeNode) *evidence.Checkpoint {
	t.Helper()
	cp, err := evidence.ReadCheckpoint(n.checkpointPath())
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// tamperRows runs statements as the superuser with the append-only
// triggers off, whatever number of rows they touch.
func tamperRows(t testing.TB, s *Store, sqls ...string) {
	t.Helper()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		for _, q := range sqls {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cutChain deletes every chain entry from seq on, and the rows that point
// at them, as someone hiding the newest attempts would: what is left is a
// whole chain.
func cutChain(t testing.TB, s *Store, from int64) {
	t.Helper()
	tamperRows(t, s,
		fmt.Sprintf(`DELETE FROM attempt_records WHERE seq >= %d`, from),
		fmt.Sprintf(`DELETE FROM runtime_events WHERE seq >= %d`, from))
}

// wantBreak fails t unless VerifyChain reports problem with detail in its
// message.
func wantBreak(t testing.TB, s interface {
	VerifyChain(context.Context) (*host.ChainReport, error)
}, problem, detail string) *host.ChainReport {
	t.Helper()
	rep, err := s.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Broken == nil || rep.Broken.Problem != problem || !strings.Contains(rep.Broken.Detail, detail) {
		t.Fatalf("report %+v %+v, want %s (%q)", rep, rep.Broken, problem, detail)
	}
	return rep
}

// Deleting the newest entries leaves a chain that is whole; the node's
// signed head checkpoint shows it was cut. Rewriting the newest entry
// with a hash recomputed to match is found the same way.
func TestCheckpointFindsACutChain(t *testing.T) {
	dsn := pgtest.DSN(t)
	n := openHomeNode(t, dsn)
	head := appendEntries(t, n.Store, "a", 3)
	closeNode(t, n)
	if cp := readCheckpoint(t, n); cp.Seq != head.Seq || cp.Hash != head.Hash {
		t.Fatalf("checkpoint %+v, want the head the node committed, %+v", cp, head)
	}
	n = reopenHomeNode(t, dsn, n)
	rep := verify(t, n)
	if rep.Checkpoint == nil || rep.Checkpoint.Seq != head.Seq || rep.Checkpoint.Hash != head.Hash || rep.HeadSeq != head.Seq {
		t.Fatalf("intact chain: %+v", rep)
	}

	// The attacker removes the last attempt and the event before it.
	cutChain(t, n.Store, head.Seq-1)
	rep = wantBreak(t, n, host.BreakHeadRewound, "were removed")
	if rep.Checkpoint == nil || rep.Checkpoint.Seq != head.Seq || rep.HeadSeq != head.Seq-2 {
		t.Fatalf("cut chain: %+v", rep)
	}
	t.Log(rep.Broken.Detail)
	// Without the checkpoint the cut would not show.
	bare, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if rep := verify(t, bare); rep.Checkpoint != nil {
		t.Fatalf("a store without a checkpoint file reports one: %+v", rep)
	}
}

// The newest attempt rewritten, with its link recomputed to match: the
// chain is whole, but its entry at the checkpointed seq has another hash.
// VerifyChain and VerifyAttempt both say so.
func TestCheckpointFindsARewrittenHead(t *testing.T) {
	dsn := pgtest.DSN(t)
	n := openHomeNode(t, dsn)
	head := appendEntries(t, n.Store, "a", 2)
	closeNode(t, n)
	n = reopenHomeNode(t, dsn, n)
	verify(t, n)

	var rec []byte
	var prev string
	if err := n.pool.QueryRow(ctx, `SELECT record, prev_hash FROM attempt_records WHERE seq = $1`, head.Seq).Scan(&rec, &prev); err != nil {
		t.Fatal(err)
	}
	rec[len(rec)-1]++
	link := evidence.LinkAttempt(head.Seq, prev, evidence.HashRecord(rec))
	err := pgx.BeginFunc(ctx, n.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE attempt_records SET record = $1, hash = $2 WHERE seq = $3`, rec, link, head.Seq)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantBreak(t, n, host.BreakHeadRewound, "the chain was rewritten")
	err = n.VerifyAttempt(ctx, "a-1")
	wantErr(t, err, host.ErrTampered)
	if !strings.Contains(err.Error(), "signed checkpoint anchored") {
		t.Fatalf("VerifyAttempt of the rewritten head: %v", err)
	}
}

// A checkpoint edited to match a cut chain is not signed by the node's
// host key, nor is one signed by another node's key.
func TestCheckpointForged(t *testing.T) {
	dsn := pgtest.DSN(t)
	n := openHomeNode(t, dsn)
	head := appendEntries(t, n.Store, "a", 3)
	closeNode(t, n)
	n = reopenHomeNode(t, dsn, n)
	verify(t, n)

	cp := readCheckpoint(t, n)
	cutChain(t, n.Store, head.Seq-1)
	cp.Seq -= 2
	evs := events(t, n.Store, host.EventFilter{AfterSeq: cp.Seq - 1, Limit: 1})
	cp.Hash = evs[0].Hash
	b, _ := json.Marshal(cp)
	if err := os.WriteFile(n.checkpointPath(), b, 0o644); err != nil {
		t.Fatal(err)
	}
	wantBreak(t, n, host.BreakCheckpoint, "not signed by this host's key")

	// Signed properly, by a key that is not this node's.
	_, other, _ := ed25519.GenerateKey(nil)
	forger := evidence.NewAnchor(n.checkpointPath(), evidence.GivenKey(other, "forger"), time.Now)
	os.Remove(n.checkpointPath())
	if err := forger.Seed(cp.Seq, cp.Hash); err != nil {
		t.Fatal(err)
	}
	forger.Close()
	if got := readCheckpoint(t, n); got.Seq != cp.Seq {
		t.Fatalf("forged checkpoint %+v", got)
	}
	wantBreak(t, n, host.BreakCheckpoint, "not signed by this host's key")
}

// Two nodes, each with its own home and host key, on one database: each
// anchors the heads its own transactions committed, and each verifies an
// intact chain against its own checkpoint. Cutting the entries only the
// second node appended is caught by the second node; the first, whose
// newest entry is still there, cannot see it.
func TestCheckpointPerNode(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openHomeNode(t, dsn), openHomeNode(t, dsn)
	headA := appendEntries(t, a.Store, "a", 2)
	headB := appendEntries(t, b.Store, "b", 2)
	if headB.Seq <= headA.Seq {
		t.Fatalf("heads %+v %+v", headA, headB)
	}
	// Each node anchors its head while it runs, without waiting for Close.
	for _, c := range []struct {
		n    *homeNode
		want host.ChainHead
	}{{a, headA}, {b, headB}} {
		waitFor(t, func() bool {
			cp, err := evidence.ReadCheckpoint(c.n.checkpointPath())
			return err == nil && cp.Seq == c.want.Seq && cp.Hash == c.want.Hash
		})
		rep := verify(t, c.n)
		if rep.Checkpoint == nil || rep.Checkpoint.Seq != c.want.Seq || rep.Checkpoint.Hash != c.want.Hash || rep.HeadSeq != headB.Seq {
			t.Fatalf("node %s: %+v, checkpoint %+v, want %+v", c.n.home, rep, rep.Checkpoint, c.want)
		}
		if cp := readCheckpoint(t, c.n); cp.PublicKey != fmt.Sprintf("%x", c.n.key.Public()) {
			t.Fatalf("node %s: checkpoint signed by %s", c.n.home, cp.PublicKey)
		}
	}
	// A node that appended nothing anchors, when it opens, the head it
	// finds.
	c := openHomeNode(t, dsn)
	if rep := verify(t, c); rep.Checkpoint == nil || rep.Checkpoint.Seq != headB.Seq {
		t.Fatalf("new node: %+v", rep)
	}

	cutChain(t, a.Store, headA.Seq+1)
	if rep := verify(t, a); rep.Checkpoint == nil || rep.Checkpoint.Seq != headA.Seq || rep.HeadSeq != headA.Seq {
		t.Fatalf("node a after the cut: %+v", rep)
	}
	wantBreak(t, b, host.BreakHeadRewound, "were removed")
	wantBreak(t, c, host.BreakHeadRewound, "were removed")
}

// A node whose checkpoint is removed or damaged, or whose host key no
// longer signs it, refuses to open (host.ErrUnanchored, naming the file),
// as the SQLite home does; Options.Reanchor opens it and Reanchor anchors
// the chain anew, recorded in the chain. Another node is not affected.
func TestLostAnchorRefusesToOpen(t *testing.T) {
	dsn := pgtest.DSN(t)
	other := openHomeNode(t, dsn)
	appendEntries(t, other.Store, "o", 1)
	for _, c := range []struct {
		name, says string
		damage     func(n *homeNode)
	}{
		{"checkpoint removed", "is missing", func(n *homeNode) { os.Remove(n.checkpointPath()) }},
		{"checkpoint damaged", "is damaged", func(n *homeNode) { os.WriteFile(n.checkpointPath(), []byte(`{"x":1}`), 0o644) }},
		{"host key replaced", "the key was replaced", func(n *homeNode) { _, n.key, _ = ed25519.GenerateKey(nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := openHomeNode(t, dsn)
			head := appendEntries(t, n.Store, strings.ReplaceAll(c.name, " ", "-"), 2)
			closeNode(t, n)
			cutChain(t, other.Store, head.Seq-1)
			c.damage(n)
			opts := Options{HostKey: n.key, CheckpointFile: n.checkpointPath()}
			if _, err := Open(ctx, dsn, opts); !errors.Is(err, host.ErrUnanchored) || !strings.Contains(err.Error(), n.checkpointPath()) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("open: %v", err)
			}
			opts.Reanchor = true
			s, err := Open(ctx, dsn, opts)
			if err != nil {
				t.Fatal(err)
			}
			e, err := s.Reanchor(ctx, host.Event{Type: host.EventEvidenceReanchored, Data: json.RawMessage(`{"reason":"test"}`)})
			if err != nil {
				t.Fatal(err)
			}
			closeNode(t, &homeNode{Store: s})
			n = reopenHomeNode(t, dsn, n)
			if rep := verify(t, n); rep.Checkpoint == nil || rep.Checkpoint.Seq != e.Seq {
				t.Fatalf("re-anchored: %+v", rep)
			}
		})
	}
	if rep := verify(t, other); !rep.OK {
		t.Fatalf("the other node: %+v", rep.Broken)
	}
}

// A checkpoint file needs a host key to sign it.
func TestCheckpointNeedsAHostKey(t *testing.T) {
	_, err := Open(ctx, pgtest.DSN(t), Options{CheckpointFile: filepath.Join(t.TempDir(), "evidence-head.json")})
	if err == nil || !strings.Contains(err.Error(), "host key") {
		t.Fatalf("Open: %v", err)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 5s")
}
