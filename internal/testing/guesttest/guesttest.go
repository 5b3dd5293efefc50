// Package guesttest is the guest SDKs' test support for the host calls
// their typed wrappers keep out of modules that do not call them,
// sensor_emit (ABI 1.1) and message_publish (ABI 1.2): a runtime.Services
// that serves both as internal/dispatch does (host.DecodeSensorEvent
// checks an event, internal/message the publish form), the events and
// messages the SDK test modules send, and the checks their tests share.
// Only tests import it (the SDK tests under abi/guest, which
// abi/layout_test.go does not let a non-test package there import
// internal/message).
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
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

// The bus envelopes (the AICO message formats) the SDK test modules publish: OpsAlert is
// within Topics, OffGrant is not, InvalidMsg lacks the metadata its spec
// requires.
const (
	OpsAlert = `{"metadata":{"message_id":"11111111-2222-3333-4444-555555555555","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"ops.alert","version":"1.0"},"payload":{"n":1}}`
	OffGrant = `{"metadata":{"message_id":"11111111-2222-3333-4444-666666666666","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"billing.charge","version":"1.0"},"payload":{"n":2}}`
	InvalidMsg = `{"metadata":{"source":"probe"},"payload":{}}`
)

// Topics is the messages grant Services serves; ABI12 the ABI a pack
// calling message_publish declares.
var (
	Topics = []string{"ops.*"}
	ABI12  = abi.Version{Major: 1, Minor: 2}
)

// Services is hosttest.Services (which records every call) with
// sensor_emit served as sensorEmit says and message_publish served as internal/dispatch serves it to a pack granted
// messages on Topics: internal/message decodes and checks the publish form;
// a topic outside the grant is access denied, another rule a validation
// error (both with {"error":...}); an accepted message is staged and
// answered {"message_id","hash","status":"staged","staged":n}.
type Services struct {
	*hosttest.Services
	mu     sync.Mutex
	staged []host.MessageInput
	events []host.SensorEvent // staged by sensor_emit
}

func NewServices(opts ...hosttest.Option) *Services {
	return &Services{Services: hosttest.NewServices(opts...)}
}

func (s *Services) Serve(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	st, resp := s.Services.Serve(ctx, fn, req)
	switch fn {
	case abi.HostSensorEmit:
		return s.sensorEmit(req)
	case abi.HostHTTPRequest:
		if s.Granted(fn) {
			return s.httpRequest(req)
		}
		return st, resp
	case abi.HostMessagePublish:
	default:
		return st, resp
	}
	in, err := func() (*host.MessageInput, error) {
		r, err := message.ParseRequest("", req)
		if err != nil {
			return nil, err
		}
		return message.Prepare(ctx, r, message.Options{Tenant: "t", Origin: "task:test", Direction: "sent", Topics: Topics})
	}()
	if err != nil {
		st = abi.StatusValidation
		var re *message.RuleError
		if errors.As(err, &re) && re.Rule == message.RuleTopic {
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

// CheckStaged fails t unless OpsAlert alone was staged and the module
// reported its message_id, hash and staged count (JSON values from its
// output) as the host answered them.
func CheckStaged(t testing.TB, s *Services, id, hash, staged string) {
	t.Helper()
	s.mu.Lock()
	got := append([]host.MessageInput(nil), s.staged...)
	s.mu.Unlock()
	if len(got) != 1 || got[0].MessageID != "11111111-2222-3333-4444-555555555555" || got[0].Topic != "ops.alert" {
		t.Fatalf("staged %+v, want OpsAlert only", got)
	}
	if id != `"`+got[0].MessageID+`"` || hash != `"`+got[0].Hash+`"` || staged != "1" {
		t.Errorf("module saw message_id %s, hash %s, staged %s; the host staged %s %s 1", id, hash, staged, got[0].MessageID, got[0].Hash)
	}
}

// CheckRequests fails t unless the module sent OpsAlert, then
// OffGrant with signature "c2ln", then InvalidMsg as an agent-envelope.
func CheckRequests(t testing.TB, s *Services) {
	t.Helper()
	want := []string{
		`{"format":"bus-envelope","message":` + OpsAlert + `}`,
		`{"format":"bus-envelope","message":` + OffGrant + `,"signature":"c2ln"}`,
		`{"format":"agent-envelope","message":` + InvalidMsg + `}`,
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

// CheckNoImport fails t if the module at path imports sensor_emit or
// message_publish: it must load for a pack declaring ABI 1.0, as every
// module that neither emits sensor events nor publishes messages must.
func CheckNoImport(t testing.TB, path string) {
	t.Helper()
	m := hosttest.LoadFile(t, path, runtime.LoadOptions{ABI: abi.Version{Major: 1}})
	for _, imp := range m.Info().Imports {
		if imp == abi.ModuleHostV1+"."+abi.HostSensorEmit || imp == abi.ModuleHostV1+"."+abi.HostMessagePublish {
			t.Errorf("%s imports %s", path, imp)
		}
	}
}

// CheckNeedsABI12 fails t unless wasm imports sensor_emit and
// message_publish: a pack declaring ABI 1.0 is refused naming both, one
// declaring 1.1 is refused naming message_publish only, one declaring 1.2
// loads.
func CheckNeedsABI12(t testing.TB, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, c := range []struct {
		minor      int
		named, not []string
	}{
		{0, []string{abi.HostSensorEmit, abi.HostMessagePublish}, nil},
		{1, []string{abi.HostMessagePublish}, []string{abi.HostSensorEmit}},
	} {
		m, err := rt.Load(ctx, wasm, runtime.LoadOptions{ABI: abi.Version{Major: 1, Minor: c.minor}})
		if err == nil {
			m.Close(ctx)
			t.Fatalf("a module calling sensor_emit and message_publish loads for a pack declaring ABI 1.%d", c.minor)
		}
		for _, fn := range c.named {
			if !strings.Contains(err.Error(), fn) {
				t.Errorf("the ABI 1.%d refusal does not name %s: %v", c.minor, fn, err)
			}
		}
		for _, fn := range c.not {
			if strings.Contains(err.Error(), fn) {
				t.Errorf("the ABI 1.%d refusal names %s: %v", c.minor, fn, err)
			}
		}
	}
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{ABI: ABI12})
	if err != nil {
		t.Fatalf("ABI 1.2: %v", err)
	}
	m.Close(ctx)
}
