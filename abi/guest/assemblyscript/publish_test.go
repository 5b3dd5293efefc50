package assdk_test

// publish_test.go is the same file in the four SDK test packages (c, go,
// rust, assemblyscript; TestPublishHelperInSync keeps the copies equal):
// test code cannot be shared across packages, and abi/ may not hold a
// non-test package importing internal/bus (abi/layout_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/bus"
	"github.com/packrun/packrun/internal/hosttest"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/runtime"
)

// The bus envelopes (seed 002) the SDK test modules publish: opsAlert is
// within pubTopics, offGrant is not, invalidMsg lacks the metadata its seed
// requires.
const (
	opsAlert = `{"metadata":{"message_id":"11111111-2222-3333-4444-555555555555","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"ops.alert","version":"1.0"},"payload":{"n":1}}`
	offGrant = `{"metadata":{"message_id":"11111111-2222-3333-4444-666666666666","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"billing.charge","version":"1.0"},"payload":{"n":2}}`
	invalidMsg = `{"metadata":{"source":"probe"},"payload":{}}`
)

// pubTopics is the messages grant pubServices serves; abi12 the ABI a pack
// calling message_publish declares.
var (
	pubTopics = []string{"ops.*"}
	abi12     = abi.Version{Major: 1, Minor: 2}
)

// pubServices is hosttest.Services (which records every call) with
// message_publish served as internal/dispatch serves it to a pack granted
// messages on pubTopics: internal/bus decodes and checks the publish form;
// a topic outside the grant is access denied, another rule a validation
// error (both with {"error":...}); an accepted message is staged and
// answered {"message_id","hash","status":"staged","staged":n}.
type pubServices struct {
	*hosttest.Services
	mu     sync.Mutex
	staged []host.MessageInput
}

func newPubServices(opts ...hosttest.Option) *pubServices {
	return &pubServices{Services: hosttest.NewServices(opts...)}
}

func (s *pubServices) Serve(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	st, resp := s.Services.Serve(ctx, fn, req)
	if fn != abi.HostMessagePublish {
		return st, resp
	}
	in, err := func() (*host.MessageInput, error) {
		r, err := bus.ParseRequest("", req)
		if err != nil {
			return nil, err
		}
		return bus.Prepare(ctx, r, bus.Options{Tenant: "t", Origin: "task:test", Direction: "sent", Topics: pubTopics})
	}()
	if err != nil {
		st = abi.StatusValidation
		var re *message.RuleError
		if errors.As(err, &re) && re.Rule == bus.RuleTopic {
			st = abi.StatusAccessDenied
		}
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		return st, b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staged = append(s.staged, *in)
	b, _ := json.Marshal(map[string]any{"message_id": in.MessageID, "hash": in.Hash, "status": "staged", "staged": len(s.staged)})
	return abi.StatusOK, b
}

// checkStaged fails t unless opsAlert alone was staged and the module
// reported its message_id, hash and staged count (JSON values from its
// output) as the host answered them.
func checkStaged(t testing.TB, s *pubServices, id, hash, staged string) {
	t.Helper()
	s.mu.Lock()
	got := append([]host.MessageInput(nil), s.staged...)
	s.mu.Unlock()
	if len(got) != 1 || got[0].MessageID != "11111111-2222-3333-4444-555555555555" || got[0].Topic != "ops.alert" {
		t.Fatalf("staged %+v, want opsAlert only", got)
	}
	if id != `"`+got[0].MessageID+`"` || hash != `"`+got[0].Hash+`"` || staged != "1" {
		t.Errorf("module saw message_id %s, hash %s, staged %s; the host staged %s %s 1", id, hash, staged, got[0].MessageID, got[0].Hash)
	}
}

// checkPublishRequests fails t unless the module sent opsAlert, then
// offGrant with signature "c2ln", then invalidMsg as an agent-envelope.
func checkPublishRequests(t testing.TB, s *pubServices) {
	t.Helper()
	want := []string{
		`{"format":"bus-envelope","message":` + opsAlert + `}`,
		`{"format":"bus-envelope","message":` + offGrant + `,"signature":"c2ln"}`,
		`{"format":"agent-envelope","message":` + invalidMsg + `}`,
	}
	calls := s.CallsOf(abi.HostMessagePublish)
	if len(calls) != len(want) {
		t.Fatalf("message_publish calls %v, want %d", calls, len(want))
	}
	for i, c := range calls {
		if !hosttest.JSONEqual(c.Raw, want[i]) {
			t.Errorf("message_publish request %d: %s\nwant %s", i, c.Raw, want[i])
		}
	}
}

// checkNoPublishImport fails t if the module at path imports
// message_publish: it must load for a pack declaring ABI 1.0, as every
// module that does not publish messages must.
func checkNoPublishImport(t testing.TB, path string) {
	t.Helper()
	m := hosttest.LoadFile(t, path, runtime.LoadOptions{ABI: abi.Version{Major: 1}})
	for _, imp := range m.Info().Imports {
		if imp == abi.ModuleHostV1+"."+abi.HostMessagePublish {
			t.Errorf("%s imports %s", path, imp)
		}
	}
}

// checkNeedsABI12 fails t unless wasm imports message_publish: a pack
// declaring ABI 1.1 is refused, one declaring 1.2 loads.
func checkNeedsABI12(t testing.TB, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if m, err := rt.Load(ctx, wasm, runtime.LoadOptions{ABI: abi.Version{Major: 1, Minor: 1}}); err == nil {
		m.Close(ctx)
		t.Fatal("a module calling message_publish loads for a pack declaring ABI 1.1")
	} else if !strings.Contains(err.Error(), abi.HostMessagePublish) {
		t.Fatalf("the ABI 1.1 refusal does not name message_publish: %v", err)
	}
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{ABI: abi12})
	if err != nil {
		t.Fatalf("ABI 1.2: %v", err)
	}
	m.Close(ctx)
}

// TestPublishHelperInSync: the four copies of this file differ only in
// their package clause.
func TestPublishHelperInSync(t *testing.T) {
	var first []byte
	for _, sdk := range []string{"c", "go", "rust", "assemblyscript"} {
		b, err := os.ReadFile("../" + sdk + "/publish_test.go")
		if err != nil {
			t.Fatal(err)
		}
		_, b, _ = bytes.Cut(b, []byte("\n"))
		if first == nil {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Errorf("abi/guest/%s/publish_test.go differs from abi/guest/c/publish_test.go (beyond the package clause)", sdk)
		}
	}
}

// TestPublishServices checks the fake itself.
func TestPublishServices(t *testing.T) {
	s := newPubServices()
	for _, c := range []struct {
		name, req string
		status    abi.Status
		resp      string
	}{
		{"staged", `{"format":"bus-envelope","message":` + opsAlert + `}`, abi.StatusOK, `"staged":1,"status":"staged"}`},
		{"off grant", `{"format":"bus-envelope","message":` + offGrant + `}`, abi.StatusAccessDenied, `billing.charge`},
		{"invalid", `{"format":"bus-envelope","message":` + invalidMsg + `}`, abi.StatusValidation, `{"error":`},
		{"format", `{"format":"smoke","message":` + opsAlert + `}`, abi.StatusValidation, `{"error":`},
	} {
		st, resp := s.Serve(context.Background(), abi.HostMessagePublish, []byte(c.req))
		if st != c.status || !strings.Contains(string(resp), c.resp) {
			t.Errorf("%s: %d %s, want %d with %s", c.name, st, resp, c.status, c.resp)
		}
	}
	if st, _ := s.Serve(context.Background(), abi.HostQueueEnqueue, []byte(`{}`)); st != abi.StatusOK {
		t.Errorf("queue_enqueue: %d", st)
	}
}
