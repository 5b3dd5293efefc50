// Package guesttest is test support shared by the guest SDKs' tests: a
// fake packrun:host/v1 that serves message_publish (ABI 1.2) as the host
// does, over internal/hosttest's fake of the other calls, and the checks
// that a module imports message_publish only when it calls it.
package guesttest

import (
	"context"
	"encoding/json"
	"errors"
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

// Messages the SDK test modules publish (bus envelopes of seed 002, the
// message of the publish form): OpsAlert is within Topics, OffGrant is
// not, Invalid lacks the metadata its seed requires.
const (
	OpsAlert = `{"metadata":{"message_id":"11111111-2222-3333-4444-555555555555","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"ops.alert","version":"1.0"},"payload":{"n":1}}`
	OffGrant = `{"metadata":{"message_id":"11111111-2222-3333-4444-666666666666","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"billing.charge","version":"1.0"},"payload":{"n":2}}`
	Invalid = `{"metadata":{"source":"probe"},"payload":{}}`
)

// Topics is the messages grant the fake host serves.
var Topics = []string{"ops.*"}

// ABI12 is the ABI a pack using message_publish declares.
var ABI12 = abi.Version{Major: 1, Minor: 2}

// Services is hosttest.Services with message_publish served like
// internal/dispatch serves it for a pack granted messages on Topics: the
// publish form is decoded and checked by internal/bus, a topic outside
// the grant is access denied, another rule a validation error (both with
// {"error":...}), and an accepted message is staged and answered
// {"message_id","hash","status":"staged","staged":n}. Its calls are
// recorded with the others (Calls, CallsOf, Last).
type Services struct {
	*hosttest.Services
	mu     sync.Mutex
	staged []host.MessageInput
}

// NewServices returns Services over hosttest.NewServices(opts...).
func NewServices(opts ...hosttest.Option) *Services {
	return &Services{Services: hosttest.NewServices(opts...)}
}

// Serve implements runtime.Services.
func (s *Services) Serve(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	st, resp := s.Services.Serve(ctx, fn, req) // records every call
	if fn != abi.HostMessagePublish {
		return st, resp
	}
	refuse := func(err error) (abi.Status, []byte) {
		st := abi.StatusValidation
		var re *message.RuleError
		if errors.As(err, &re) && re.Rule == bus.RuleTopic {
			st = abi.StatusAccessDenied
		}
		return st, mustJSON(map[string]string{"error": err.Error()})
	}
	r, err := bus.ParseRequest("", req)
	if err != nil {
		return refuse(err)
	}
	in, err := bus.Prepare(ctx, r, bus.Options{Tenant: "t", Origin: "task:test", Direction: "sent", Topics: Topics})
	if err != nil {
		return refuse(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staged = append(s.staged, *in)
	return abi.StatusOK, mustJSON(map[string]any{"message_id": in.MessageID, "hash": in.Hash, "status": "staged", "staged": len(s.staged)})
}

// Staged returns the messages staged so far, in order.
func (s *Services) Staged() []host.MessageInput {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]host.MessageInput(nil), s.staged...)
}

// CheckStaged fails t unless exactly one message was staged, OpsAlert,
// and the module reported its id, hash and staged count (JSON values
// from its output) as the host answered them.
func CheckStaged(t testing.TB, s *Services, id, hash, staged string) {
	t.Helper()
	got := s.Staged()
	if len(got) != 1 || got[0].MessageID != "11111111-2222-3333-4444-555555555555" || got[0].Topic != "ops.alert" {
		t.Fatalf("staged %+v, want OpsAlert only", got)
	}
	if id != `"`+got[0].MessageID+`"` || hash != `"`+got[0].Hash+`"` || staged != "1" {
		t.Errorf("module saw message_id %s, hash %s, staged %s; host staged %s %s 1", id, hash, staged, got[0].MessageID, got[0].Hash)
	}
}

// CheckNoPublishImport fails t if the module at path imports
// message_publish: it must load for a pack declaring ABI 1.0, as every
// module that does not publish messages must.
func CheckNoPublishImport(t testing.TB, path string) {
	t.Helper()
	m := hosttest.LoadFile(t, path, runtime.LoadOptions{ABI: abi.Version{Major: 1}})
	for _, imp := range m.Info().Imports {
		if imp == abi.ModuleHostV1+"."+abi.HostMessagePublish {
			t.Errorf("%s imports %s", path, imp)
		}
	}
}

// CheckNeedsABI12 fails t unless wasm imports message_publish: a pack
// declaring ABI 1.1 is refused, one declaring 1.2 loads.
func CheckNeedsABI12(t testing.TB, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{ABI: abi.Version{Major: 1, Minor: 1}})
	if err == nil {
		m.Close(ctx)
		t.Fatal("a module calling message_publish loads for a pack declaring ABI 1.1")
	}
	if !strings.Contains(err.Error(), abi.HostMessagePublish) {
		t.Fatalf("ABI 1.1 refusal does not name message_publish: %v", err)
	}
	m, err = rt.Load(ctx, wasm, runtime.LoadOptions{ABI: ABI12})
	if err != nil {
		t.Fatalf("ABI 1.2: %v", err)
	}
	m.Close(ctx)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
