package witness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

func post(t *testing.T, url string, body []byte) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url+AddCheckpointPath, "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestAddCheckpointCosigns: a first checkpoint is cosigned (old 0), then
// each that extends it with a valid proof; the cosignature verifies with
// the witness's verifier key and names it.
func TestAddCheckpointCosigns(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(20, "a")
	w, state := newTestWitness(t, l)
	srv := httptest.NewServer(w)
	defer srv.Close()

	old := uint64(0)
	for _, size := range []uint64{1, 3, 3, 8, 13, 20} {
		code, _, body := post(t, srv.URL, l.body(old, size))
		if code != http.StatusOK {
			t.Fatalf("old %d size %d: %d %s", old, size, code, body)
		}
		c, err := ParseCosignature([]byte(body))
		if err != nil || c.Name != "test-witness" {
			t.Fatalf("size %d: cosignature %q: %+v %v", size, body, c, err)
		}
		if _, err := VerifyCosignature(AppendCosignature(l.checkpoint(size), []byte(body)), w.Key().VKey()); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got, err := stateDir(state).load(l.origin)
		if err != nil || got.Size != size || !bytes.Equal(got.Hash, l.tree.HashAt(size)) {
			t.Fatalf("size %d: state %+v %v", size, got, err)
		}
		old = size
	}
}

// TestAddCheckpointRefusals: every refusal has the tlog-witness status,
// names what is wrong, and leaves the witness's state as it was.
func TestAddCheckpointRefusals(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(20, "a")
	other := newTestLog(t, "example.com/other").grow(4, "o")
	w, state := newTestWitness(t, l)
	srv := httptest.NewServer(w)
	defer srv.Close()
	if code, _, body := post(t, srv.URL, l.body(0, 8)); code != http.StatusOK {
		t.Fatalf("setup: %d %s", code, body)
	}

	// The same origin and key, another history: entry 2 rewritten.
	rewritten := newTestLogWithKey(t, l.origin, l.skey, l.vkey).grow(2, "a").grow(3, "b").grow(16, "a")
	// The same origin and key, the tail after 6 deleted and regrown.
	regrown := newTestLogWithKey(t, l.origin, l.skey, l.vkey).grow(6, "a").grow(12, "c")
	// A key of the same name that the witness does not hold for the log.
	forgerSkey, forgerVkey, _ := note.GenerateKey(nil, l.origin)
	forger := newTestLogWithKey(t, l.origin, forgerSkey, forgerVkey).grow(16, "a")

	valid := l.body(8, 12)
	swapped := l.proof(8, 20)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	tampered := bytes.Replace(l.checkpoint(12), []byte("\n12\n"), []byte("\n13\n"), 1)
	zeroBad := other.sign("example.com/other\n0\n" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")

	tooLong := make([][]byte, MaxProofHashes+1)
	for i := range tooLong {
		tooLong[i] = make([]byte, HashSize)
	}
	cases := []struct {
		name   string
		method string
		path   string
		body   []byte
		code   int
		want   string
	}{
		{"fork: entry rewritten", "", "", rewritten.body(8, 12), 422, "not consistent"},
		{"fork: tail deleted and regrown", "", "", regrown.body(8, 12), 422, "not consistent"},
		{"fork: same size, other root", "", "", AddRequest{OldSize: 8, Checkpoint: rewritten.checkpoint(8)}.Marshal(), 409, "8\n"},
		{"rollback: old size behind", "", "", l.body(4, 12), 409, "8\n"},
		{"rollback: older checkpoint", "", "", l.body(4, 4), 409, "8\n"},
		{"rollback: smaller than old", "", "", AddRequest{OldSize: 8, Checkpoint: l.checkpoint(6)}.Marshal(), 400, "old size is above"},
		{"stale: old size ahead", "", "", l.body(12, 16), 409, "8\n"},
		{"forged signature", "", "", forger.body(8, 12), 403, "no valid signature"},
		{"tampered checkpoint", "", "", AddRequest{OldSize: 8, Proof: l.proof(8, 12), Checkpoint: tampered}.Marshal(), 403, "no valid signature"},
		{"unsigned checkpoint", "", "", []byte("old 8\n\nexample.com/log\n12\nAAAA\n"), 400, "malformed"},
		{"unknown origin", "", "", other.body(0, 4), 404, "unknown log origin"},
		{"reordered proof", "", "", AddRequest{OldSize: 8, Proof: swapped, Checkpoint: l.checkpoint(20)}.Marshal(), 422, "not consistent"},
		{"proof missing", "", "", AddRequest{OldSize: 8, Checkpoint: l.checkpoint(12)}.Marshal(), 422, "not consistent"},
		{"reordered body: checkpoint first", "", "", append(l.checkpoint(12), "\nold 8\n"...), 400, "first line"},
		{"truncated: no blank line", "", "", valid[:bytes.Index(valid, []byte("\n\n"))+1], 400, "no blank line"},
		{"truncated: no checkpoint", "", "", valid[:bytes.Index(valid, []byte("\n\n"))+2], 400, "no checkpoint"},
		{"truncated: note cut", "", "", valid[:len(valid)-20], 400, "malformed"},
		{"truncated: empty", "", "", nil, 400, "no \"old\" line"},
		{"old size not canonical", "", "", bytes.Replace(valid, []byte("old 8\n"), []byte("old 08\n"), 1), 400, "not a decimal size"},
		{"proof line not a hash", "", "", bytes.Replace(valid, []byte("old 8\n"), []byte("old 8\nAAAA\n"), 1), 400, "proof line 1"},
		{"oversized", "", "", append(bytes.Repeat([]byte("x"), MaxBodyBytes), valid...), 413, "over 65536 bytes"},
		{"too many proof hashes", "", "", AddRequest{OldSize: 8, Proof: tooLong, Checkpoint: l.checkpoint(12)}.Marshal(), 400, "proof has over 63 hashes"},
		{"size 0 with a root", "", "", AddRequest{Checkpoint: zeroBad}.Marshal(), 404, "unknown"},
		{"GET", http.MethodGet, "", nil, 405, "method not allowed"},
		{"other path", "", "/checkpoint", valid, 404, "not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, path := c.method, c.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = AddCheckpointPath
			}
			req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(c.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.code || !strings.Contains(string(b), c.want) {
				t.Fatalf("%d %q, want %d containing %q", resp.StatusCode, b, c.code, c.want)
			}
			if c.code == 409 && resp.Header.Get("Content-Type") != sizeContentType {
				t.Fatalf("409 Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if c.code != 409 && strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
				t.Fatalf("refusal is not one line: %q", b)
			}
			got, err := stateDir(state).load(l.origin)
			if err != nil || got.Size != 8 || !bytes.Equal(got.Hash, l.tree.HashAt(8)) {
				t.Fatalf("state changed: %+v %v", got, err)
			}
		})
	}
	// Still usable: the true extension is cosigned.
	if code, _, body := post(t, srv.URL, valid); code != http.StatusOK {
		t.Fatalf("valid extension after refusals: %d %s", code, body)
	}
}

// TestSizeZeroCheckpoint: a size-0 checkpoint is cosigned only with the
// empty tree's root (422 otherwise).
func TestSizeZeroCheckpoint(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	w, _ := newTestWitness(t, l)
	bad := l.sign("example.com/log\n0\n" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	if _, err := w.Add(AddRequest{Checkpoint: bad}.Marshal()); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("size 0, zero root: %v", err)
	}
	if _, err := w.Add(AddRequest{Checkpoint: l.checkpoint(0)}.Marshal()); err != nil {
		t.Fatalf("size 0, empty root: %v", err)
	}
}

// TestClientAddCheckpoint: the client returns the cosignature, retries a
// 409 once from the size the witness holds (with a new proof from Prove,
// or none when the witness holds nothing), and reports refusals typed.
func TestClientAddCheckpoint(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t, "example.com/log").grow(20, "a")
	w, _ := newTestWitness(t, l)
	srv := httptest.NewServer(w)
	defer srv.Close()

	// The witness holds nothing; the log believes it holds 4.
	cosig, err := AddCheckpoint(ctx, srv.URL, 4, l.proof(4, 8), l.checkpoint(8))
	if err != nil {
		t.Fatalf("retry from 0: %v", err)
	}
	if _, err := VerifyCosignature(AppendCosignature(l.checkpoint(8), cosig), w.Key().VKey()); err != nil {
		t.Fatal(err)
	}
	// Holds 8; the log believes 4 and has no prover: a *ConflictError.
	_, err = AddCheckpoint(ctx, srv.URL, 4, l.proof(4, 12), l.checkpoint(12))
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Size != 8 || conflict.Origin != l.origin {
		t.Fatalf("no prover: %v", err)
	}
	// With a prover the retry succeeds.
	var asked [2]uint64
	c := &Client{Prove: func(_ context.Context, from, to uint64) ([][]byte, error) {
		asked = [2]uint64{from, to}
		return l.proof(from, to), nil
	}}
	if _, err := c.AddCheckpoint(ctx, srv.URL, 4, l.proof(4, 12), l.checkpoint(12)); err != nil || asked != [2]uint64{8, 12} {
		t.Fatalf("with prover: %v (asked %v)", err, asked)
	}
	// A fork is a *RefusedError with the status.
	fork := newTestLogWithKey(t, l.origin, l.skey, l.vkey).grow(16, "b")
	_, err = c.AddCheckpoint(ctx, srv.URL, 12, fork.proof(12, 16), fork.checkpoint(16))
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Status != 422 {
		t.Fatalf("fork: %v", err)
	}
}

// TestClientRefusesBadAnswers: a 200 that is not cosignature lines, or a
// 409 without a size, is an error naming the witness.
func TestClientRefusesBadAnswers(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(4, "a")
	for _, c := range []struct {
		code int
		body string
		want string
	}{
		{200, "hello\n", "malformed cosignature"},
		{200, "", "malformed answer"},
		{409, "eight\n", "409 answer"},
		{409, "8\n", "409 answer: want the size it holds as text/x.tlog.size"}, // no Content-Type
		{500, "boom\nmore", "witness refused (500): boom"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.WriteHeader(c.code)
			io.WriteString(rw, c.body)
		}))
		_, err := AddCheckpoint(context.Background(), srv.URL, 0, nil, l.checkpoint(4))
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d %q: %v, want %q", c.code, c.body, err, c.want)
		}
	}
}

// TestVerifyCosignatureRefusals: another witness's key, a cosignature over
// other text, a missing or cut cosignature are all refused.
func TestVerifyCosignatureRefusals(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(8, "a")
	w, _ := newTestWitness(t, l)
	w2, _ := newTestWitness(t, l)
	cosig, err := w.Add(l.body(0, 8))
	if err != nil {
		t.Fatal(err)
	}
	good := AppendCosignature(l.checkpoint(8), cosig)
	if _, err := VerifyCosignature(good, w.Key().VKey()); err != nil {
		t.Fatal(err)
	}
	otherText := AppendCosignature(l.checkpoint(7), cosig)
	for _, c := range []struct {
		name, vkey string
		note       []byte
		want       error
	}{
		{"other witness", w2.Key().VKey(), good, ErrNoCosignature},
		{"no cosignature", w.Key().VKey(), l.checkpoint(8), ErrNoCosignature},
		{"cosignature over other text", w.Key().VKey(), otherText, ErrNoCosignature},
		{"cut cosignature", w.Key().VKey(), good[:len(good)-10], ErrMalformed},
	} {
		if _, err := VerifyCosignature(c.note, c.vkey); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := VerifyCosignature(good, "not a key"); err == nil || !strings.Contains(err.Error(), "witness key") {
		t.Errorf("bad key: %v", err)
	}
}

// TestParseLog: the --log syntax and its refusals.
func TestParseLog(t *testing.T) {
	l := newTestLog(t, "example.com/log")
	if got, err := ParseLog(l.origin + "=" + l.vkey); err != nil || got.Origin != l.origin {
		t.Fatalf("%+v %v", got, err)
	}
	for _, s := range []string{"", "example.com/log", "=" + l.vkey, "example.com/log=nokey", "example.com/log=" + l.skey} {
		if _, err := ParseLog(s); err == nil {
			t.Errorf("ParseLog(%q) accepted", s)
		}
	}
}

// TestNewLogKeyKeepsHistory: a witness restarted with a new key for a log
// (its operator accepted a replaced host key) still holds the old root,
// so a rewritten history signed by the new key fails the proof; before
// the operator accepts the key, its checkpoints are refused outright.
func TestNewLogKeyKeepsHistory(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(12, "a")
	w, state := newTestWitness(t, l)
	if _, err := w.Add(l.body(0, 8)); err != nil {
		t.Fatal(err)
	}
	replaced := newTestLog(t, l.origin).grow(2, "a").grow(12, "b") // new key, entry 2 rewritten
	if _, err := w.Add(replaced.body(8, 12)); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("new key before the operator accepts it: %v", err)
	}
	w2, err := New(w.Key(), []Log{replaced.logConfig()}, state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Add(replaced.body(8, 12)); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("rewritten history under the accepted new key: %v", err)
	}
}

// TestConcurrentAddsCosignOnce: requests racing from one old size get one
// cosignature between them; the others get the 409 of the size it moved
// to (the check and the update are one step).
func TestConcurrentAddsCosignOnce(t *testing.T) {
	l := newTestLog(t, "example.com/log").grow(20, "a")
	w, state := newTestWitness(t, l)
	if _, err := w.Add(l.body(0, 4)); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for i := uint64(1); i <= n; i++ {
		body := l.body(4, 4+i)
		go func() { _, err := w.Add(body); errs <- err }()
	}
	ok := 0
	for range n {
		err := <-errs
		var conflict *ConflictError
		switch {
		case err == nil:
			ok++
		case !errors.As(err, &conflict) || conflict.Size == 4:
			t.Errorf("racing add: %v", err)
		}
	}
	got, err := stateDir(state).load(l.origin)
	if ok != 1 || err != nil || got.Size <= 4 {
		t.Fatalf("%d cosigned (want 1); state %d %v", ok, got.Size, err)
	}
}
