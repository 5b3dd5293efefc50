package postgres

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// Artifacts are stored in the database, where every node reads them; the
// same name again is the same record, other bytes under it a conflict;
// a task requiring one completes only once it is stored.
func TestArtifacts(t *testing.T) {
	ns := nodes(t, 2, nil)
	a, b := ns[0], ns[1]
	task := mustEnqueue(t, a, host.TaskIntent{TaskType: "w", Source: "t", Payload: []byte(`{}`),
		EvidenceRequirements: &host.EvidenceRequirements{RequiredArtifacts: []string{"report.md"}}})
	claimed := mustClaim(t, a, "r")
	in := okFinish(claimed)
	if err := a.RecordAttempt(ctx, in.Record); err != nil {
		t.Fatal(err)
	}
	data := []byte("# report\n")
	art, err := a.PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, AttemptID: in.Record.AttemptID, Role: host.RoleOutput, Name: "report.md", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, AttemptID: in.Record.AttemptID, Role: host.RoleOutput, Name: "report.md", Data: data})
	if err != nil || again.ArtifactID != art.ArtifactID {
		t.Fatalf("the same artifact again: %+v %v", again, err)
	}
	_, err = b.PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, AttemptID: in.Record.AttemptID, Role: host.RoleOutput, Name: "report.md", Data: []byte("other")})
	wantErr(t, err, host.ErrConflict)
	_, err = b.PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, Role: host.RoleOutput, Name: "../x", Data: data})
	wantErr(t, err, host.ErrValidation)
	got, err := b.ArtifactContent(ctx, art.ArtifactID)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("content read by the other node: %q %v", got, err)
	}
	rec, err := b.Artifact(ctx, art.ArtifactID)
	if err != nil || rec.SHA256 != art.SHA256 || !rec.CreatedAt.Equal(art.CreatedAt) {
		t.Fatalf("%+v %v (put returned %+v)", rec, err, art)
	}
	in.Record = nil
	in.AttemptID = recordedAttemptID(t, a, claimed.TaskID)
	done, err := a.Finish(ctx, claimed.TaskID, in)
	if err != nil || done.Status != host.TaskCompleted {
		t.Fatalf("%+v %v", done, err)
	}
	if rec, _ := b.Artifact(ctx, art.ArtifactID); rec.VerifiedAt == nil {
		t.Fatal("the completing attempt's artifact is not verified")
	}
	rep := verify(t, b)
	if rep.Artifacts != 1 {
		t.Fatalf("%+v", rep)
	}
	t.Run("bytes changed", func(t *testing.T) {
		tamper(t, a, `UPDATE blobs SET data = 'x' WHERE sha256 = $1`, art.SHA256)
		_, err := b.ArtifactContent(ctx, art.ArtifactID)
		wantErr(t, err, host.ErrTampered)
	})
	t.Run("record changed", func(t *testing.T) {
		tamper(t, a, `UPDATE artifacts SET size = 1 WHERE artifact_id = $1`, art.ArtifactID)
		rep, err := b.VerifyChain(ctx)
		if err != nil || rep.OK || rep.Broken.Problem != host.BreakArtifactHash {
			t.Fatalf("%+v %v", rep, err)
		}
	})
	t.Run("record removed", func(t *testing.T) {
		tamper(t, a, `DELETE FROM artifacts WHERE artifact_id = $1`, art.ArtifactID)
		rep, err := b.VerifyChain(ctx)
		if err != nil || rep.OK || rep.Broken.Problem != host.BreakArtifactMissing || rep.Broken.ArtifactID != art.ArtifactID {
			t.Fatalf("%+v %v", rep, err)
		}
	})
}

// recordedAttemptID is the id of the attempt recorded for a task.
func recordedAttemptID(t *testing.T, s *Store, taskID string) string {
	t.Helper()
	as, err := s.ListAttempts(ctx, host.AttemptFilter{TaskID: taskID})
	if err != nil || len(as) != 1 {
		t.Fatalf("%v %v", as, err)
	}
	return as[0].AttemptID
}

// EachVerifiedAttempt hands every attempt over with what VerifyAttempt
// says of it, a page at a time, newest first.
func TestEachVerifiedAttempt(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	n := storecore.VerifyPageSize + 5
	for range n {
		if err := s.RecordAttempt(ctx, &host.Attempt{Node: "n", Pack: "p@1.0.0", Outcome: abi.Completed}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListAttempts(ctx, host.AttemptFilter{Limit: n})
	if err != nil || len(all) != n {
		t.Fatal(len(all), err)
	}
	bad := all[7]
	tamper(t, s, `UPDATE attempt_records SET record = set_byte(record, length(record) - 1, (get_byte(record, length(record) - 1) + 1) % 256) WHERE attempt_id = $1`, bad.AttemptID)
	var seen []string
	broken := 0
	err = s.EachVerifiedAttempt(ctx, host.AttemptFilter{Pack: "p"}, func(a *host.Attempt, verr error) error {
		seen = append(seen, a.AttemptID)
		if verr != nil {
			broken++
			if a.AttemptID != bad.AttemptID {
				t.Errorf("attempt %s reported broken: %v", a.AttemptID, verr)
			}
		}
		return nil
	})
	if err != nil || len(seen) != n || broken != 1 || seen[0] != all[0].AttemptID || seen[n-1] != all[n-1].AttemptID {
		t.Fatalf("%d seen, %d broken, %v", len(seen), broken, err)
	}
}

// An exported attempt carries its artifacts and events, sealed with the
// node's key, and verifies without the database.
func TestExportAttempt(t *testing.T) {
	dsn := pgtest.DSN(t)
	_, key, _ := ed25519.GenerateKey(nil)
	s, err := Open(ctx, dsn, Options{HostKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustEnqueue(t, s, intent("w", 5))
	task := mustClaim(t, s, "r")
	in := okFinish(task)
	if err := s.RecordAttempt(ctx, in.Record); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutArtifact(ctx, host.ArtifactInput{AttemptID: in.Record.AttemptID, Role: host.RoleOutput, Name: "out.txt", Data: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	b, err := s.ExportAttempt(ctx, in.Record.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.VerifyBundle(b); err != nil {
		t.Fatal(err)
	}
	digest, _ := evidence.BundleDigest(b)
	if err := evidence.VerifySeal(b.Seal, host.BundleFormat, digest); err != nil || len(b.Artifacts) != 1 || len(b.Events) < 2 {
		t.Fatalf("%v: %d artifacts, %d events", err, len(b.Artifacts), len(b.Events))
	}
	// Without a key, nothing is exported.
	other, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExportAttempt(ctx, in.Record.AttemptID); err == nil {
		t.Fatal("exported without a host key")
	}
}
