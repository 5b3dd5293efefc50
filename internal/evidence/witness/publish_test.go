package witness

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var ctx = context.Background()

// logSource is a testLog as a Publisher's Source.
type logSource struct{ l *testLog }

func (s logSource) Checkpoint(context.Context) (uint64, []byte, []byte, error) {
	n := s.l.tree.Size()
	if n == 0 {
		return 0, nil, nil, nil
	}
	return n, s.l.tree.HashAt(n), s.l.checkpoint(n), nil
}

func (s logSource) Consistency(_ context.Context, from, to uint64) ([][]byte, error) {
	return s.l.proof(from, to), nil
}

func newTestPublisher(t *testing.T, l *testLog, w *Witness, url, state string) *Publisher {
	t.Helper()
	p, err := NewPublisher(logSource{l}, []Target{{URL: url, VKey: w.Key().VKey()}}, state, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A Publisher gets each new checkpoint cosigned, proving it from the one
// the witness cosigned last (kept in its state file across restarts), and
// serves the cosigned note, which VerifyCosigned checks.
func TestPublisherCosignsAsTheLogGrows(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(3, "a")
	w, _ := newTestWitness(t, l)
	srv := httptest.NewServer(w)
	defer srv.Close()
	state := filepath.Join(t.TempDir(), "witness-state.json")

	p := newTestPublisher(t, l, w, srv.URL, state)
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if size, _, err := VerifyCosigned(p.Cosigned(), l.vkey, w.Key().VKey()); err != nil || size != 3 {
		t.Fatalf("cosigned: size %d: %v\n%s", size, err, p.Cosigned())
	}
	l.grow(9, "a")
	p = newTestPublisher(t, l, w, srv.URL, state) // a restart
	if st := p.Status(); st[0].Size != 3 {
		t.Fatalf("status after restart: %+v", st)
	}
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if size, _, err := VerifyCosigned(p.Cosigned(), l.vkey, w.Key().VKey()); err != nil || size != 9 {
		t.Fatalf("cosigned: size %d: %v", size, err)
	}
	// Another witness's key, or another log's, is refused.
	other, _ := newTestWitness(t, l)
	if _, _, err := VerifyCosigned(p.Cosigned(), l.vkey, other.Key().VKey()); !errors.Is(err, ErrNoCosignature) {
		t.Fatalf("another witness's key: %v", err)
	}
	if _, _, err := VerifyCosigned(p.Cosigned(), newTestLog(t, "example.com/log").vkey, w.Key().VKey()); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another log key: %v", err)
	}
}

// A crash after the witness cosigned and before the state file recorded
// it: the restarted publisher sends from the older size, the witness
// answers 409 with the size it holds, and the publisher proves from there;
// nothing is cosigned twice inconsistently.
func TestPublisherCrashBetweenSendAndRecord(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(4, "a")
	w, _ := newTestWitness(t, l)
	srv := httptest.NewServer(w)
	defer srv.Close()
	state := filepath.Join(t.TempDir(), "witness-state.json")
	p := newTestPublisher(t, l, w, srv.URL, state)
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	l.grow(7, "a")
	crash := errors.New("killed")
	p.beforeRecord = func() error { return crash }
	if err := p.Publish(ctx); !errors.Is(err, crash) {
		t.Fatalf("crash: %v", err)
	}
	// Restarted with the checkpoint the witness cosigned: cosigned again.
	p = newTestPublisher(t, l, w, srv.URL, state)
	if st := p.Status(); st[0].Size != 4 {
		t.Fatalf("state after the crash: %+v", st)
	}
	if err := p.Publish(ctx); err != nil {
		t.Fatalf("the same checkpoint after the crash: %v", err)
	}
	if got, _, err := VerifyCosigned(p.Cosigned(), l.vkey, w.Key().VKey()); err != nil || got != 7 {
		t.Fatalf("cosigned: size %d: %v", got, err)
	}
	// Crashed again at 9, restarted at 12: proved from the witness's 9.
	l.grow(9, "a")
	p.beforeRecord = func() error { return crash }
	if err := p.Publish(ctx); !errors.Is(err, crash) {
		t.Fatalf("crash: %v", err)
	}
	l.grow(12, "a")
	p = newTestPublisher(t, l, w, srv.URL, state)
	if st := p.Status(); st[0].Size != 7 {
		t.Fatalf("state after the crash: %+v", st)
	}
	if err := p.Publish(ctx); err != nil {
		t.Fatalf("a newer checkpoint after the crash: %v", err)
	}
	if got, _, err := VerifyCosigned(p.Cosigned(), l.vkey, w.Key().VKey()); err != nil || got != 12 {
		t.Fatalf("cosigned: size %d: %v", got, err)
	}
}

// A fork and a rollback are refused: a *RefusalError, counted, the
// status degraded, OnRefused called once (not per retry), and the
// cosigned checkpoint served stays the last good one.
func TestPublisherReportsRefusals(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(5, "a")
	w, _ := newTestWitness(t, l)
	srv := httptest.NewServer(w)
	defer srv.Close()
	dir := t.TempDir()
	p := newTestPublisher(t, l, w, srv.URL, filepath.Join(dir, "s1"))
	if err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		log  *testLog
		says string
	}{
		{"fork", newTestLogWithKey(t, l.origin, l.skey, l.vkey).grow(8, "b"), "refused (422)"},
		{"rollback", newTestLogWithKey(t, l.origin, l.skey, l.vkey).grow(3, "a"), "holds size 5"},
		{"same size, another root", newTestLogWithKey(t, l.origin, l.skey, l.vkey).grow(5, "c"), "holds size 5"},
		{"another key", newTestLog(t, l.origin).grow(8, "a"), "refused (403)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var called []error
			q := newTestPublisher(t, c.log, w, srv.URL, filepath.Join(dir, "s1"))
			q.RetryRefused = 0
			q.OnRefused = func(_ Target, err error) { called = append(called, err) }
			for range 2 {
				err := q.Publish(ctx)
				var re *RefusalError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("publish: %v (want a refusal saying %q)", err, c.says)
				}
			}
			st := q.Status()[0]
			if !st.Refused || st.Refusals != 2 || st.Problem == "" || len(called) != 1 {
				t.Fatalf("status %+v, OnRefused called %d times", st, len(called))
			}
			if size, _, err := VerifyCosigned(q.Cosigned(), l.vkey, w.Key().VKey()); err != nil || size != 5 {
				t.Fatalf("served: size %d: %v", size, err)
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	w, _ := newTestWitness(t, l)
	if tg, err := ParseTarget("http://127.0.0.1:9/=" + w.Key().VKey()); err != nil || tg.URL != "http://127.0.0.1:9" {
		t.Fatalf("%+v %v", tg, err)
	}
	for _, bad := range []string{"", "http://x", "=" + w.Key().VKey(), "ftp://x=" + w.Key().VKey(), "http://x=nokey", "http://x="} {
		if _, err := ParseTarget(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseTarget(%q): %v", bad, err)
		}
	}
}

// A damaged or foreign state file is refused naming it (serve then does
// not start), and a witness configured twice is refused; nothing is
// written.
func TestPublisherRefusesBadState(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(2, "a")
	w, _ := newTestWitness(t, l)
	dir := t.TempDir()
	tg := Target{URL: "http://127.0.0.1:9", VKey: w.Key().VKey()}
	for _, c := range []struct{ name, body string }{
		{"garbage", "\x7fELF"},
		{"other format", `{"format":"other/v1","witnesses":{}}`},
		{"truncated", `{"format":"packrun.witness-state/v1","witn`},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := NewPublisher(logSource{l}, []Target{tg}, p, nil)
		if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", c.name, err)
		}
		if b, _ := os.ReadFile(p); string(b) != c.body {
			t.Errorf("%s: the file changed", c.name)
		}
	}
	if _, err := NewPublisher(logSource{l}, []Target{tg, tg}, filepath.Join(dir, "s"), nil); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a witness twice: %v", err)
	}
}
