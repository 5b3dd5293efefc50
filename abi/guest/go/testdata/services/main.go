//go:build wasip1

// Command services is a test pack for sdk_test.go: it calls every host
// service through the SDK and reports what it got back.
package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/packrun/packrun/abi/guest/go/packrun"
)

func main() {}

// The messages of internal/testing/guesttest (OpsAlert, OffGrant, InvalidMsg): within the grant, outside
// it, refused by its seed.
const (
	opsAlert = `{"metadata":{"message_id":"11111111-2222-3333-4444-555555555555","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"ops.alert","version":"1.0"},"payload":{"n":1}}`
	offGrant = `{"metadata":{"message_id":"11111111-2222-3333-4444-666666666666","timestamp":"2026-01-02T15:04:05Z",` +
		`"source":"probe","message_type":"billing.charge","version":"1.0"},"payload":{"n":2}}`
	invalid = `{"metadata":{"source":"probe"},"payload":{}}`
)

// The sensor events of internal/testing/guesttest (SensorEvent, InvalidEvent).
const (
	sensorEvent = `{"event_id":"ev-1","observed_at":"2026-01-02T15:04:05Z","source_ref":"probe:1",` +
		`"dedupe_key":"k1","payload":{"n":1}}`
	invalidEvent = `{"event_id":"ev-2","payload":{}}`
)

func init() {
	packrun.Pack("local.sdk.services.go")
	packrun.Node("test.services", services)
	packrun.Node("test.panic", func(*packrun.Context, json.RawMessage) (any, error) { panic("boom") })
	packrun.Node("test.error", func(*packrun.Context, json.RawMessage) (any, error) { return nil, errors.New("plain error") })
	packrun.Node("test.raw", func(ctx *packrun.Context, in json.RawMessage) (any, error) {
		return json.RawMessage(`{"raw":true,"in":` + string(in) + `,"run":"` + ctx.RunID + `","tenant":"` + ctx.TenantID + `"}`), nil
	})
	packrun.Node("test.unhandled", func(ctx *packrun.Context, in json.RawMessage) (any, error) {
		_, err := ctx.ConfigGet("x")
		return nil, err // a *StatusError passed through
	})
	packrun.Handle("test.big", func(ctx *packrun.Context, in struct{ N int }) (int, error) {
		if err := ctx.MemoryPut("ns", "big", strings.Repeat("x", in.N)); err != nil {
			return 0, err
		}
		s, err := packrun.As[string](ctx.MemoryGet("ns", "big"))
		return len(s), err
	})
}

func services(ctx *packrun.Context, _ json.RawMessage) (any, error) {
	out := map[string]any{}
	e := func(err error) any {
		if err == nil {
			return nil
		}
		return err.Error()
	}
	ctx.Log(packrun.LevelDebug, "debug line")
	out["now"] = ctx.NowMs()
	r, err := ctx.Random(8)
	out["random"], out["randomErr"] = hex.EncodeToString(r), e(err)

	_, err = ctx.Variable("v")
	out["unsetVar"] = errors.Is(err, packrun.ErrNotFound)
	out["setVar"] = e(ctx.SetVariable("v", map[string]int{"n": 1}))
	v, err := ctx.Variable("v")
	out["var"], out["varErr"] = v, e(err)
	out["write1"] = e(ctx.WriteChannel("c", 1))
	out["write2"] = e(ctx.WriteChannel("c", "two"))
	ch, err := ctx.ReadChannel("c")
	out["channel"], out["channelErr"] = ch, e(err)

	out["put1"] = e(ctx.MemoryPut("ns", "k1", "v1", packrun.Secret()))
	out["put2"] = e(ctx.MemoryPut("ns", "k2", 2))
	keys, err := ctx.MemoryList("ns", "k")
	out["keys"], out["keysErr"] = keys, e(err)
	out["delete"] = e(ctx.MemoryDelete("ns", "k1"))
	_, err = ctx.MemoryGet("ns", "k1")
	out["deleted"] = errors.Is(err, packrun.ErrNotFound)

	staged, err := ctx.QueueEnqueue(packrun.TaskIntent{TaskType: "next", Payload: map[string]string{"from": "sdk"}})
	out["staged"], out["stagedErr"] = staged, e(err)
	ar, err := ctx.AdapterInvoke("echo", map[string]int{"x": 1})
	out["adapter"], out["adapterErr"] = ar, e(err)
	out["evidence"] = e(ctx.EvidenceRecord("note", map[string]string{"a": "b"}))
	ref, err := ctx.ArtifactPut(packrun.Artifact{Name: "a.txt", Text: "hello"})
	out["artifact"], out["artifactErr"] = ref, e(err)
	ref, err = ctx.ArtifactPut(packrun.Artifact{Role: "log", Name: "b.bin", ContentType: "application/octet-stream", Data: []byte{0, 1, 2}})
	out["artifact2"], out["artifact2Err"] = ref, e(err)
	cfg, err := ctx.ConfigGet("greeting")
	out["config"], out["configErr"] = cfg, e(err)
	_, err = ctx.ConfigGet("missing")
	out["configMissing"] = errors.Is(err, packrun.ErrNotFound)
	var se *packrun.StatusError
	out["configMissingFunc"] = ""
	if errors.As(err, &se) {
		out["configMissingFunc"] = se.Func
	}

	p, err := ctx.MessagePublish(packrun.BusEnvelope, json.RawMessage(opsAlert), "")
	out["published"], out["publishedErr"] = p, e(err)
	_, err = ctx.MessagePublish(packrun.BusEnvelope, json.RawMessage(offGrant), "c2ln")
	out["pubDenied"] = e(err)
	out["pubDeniedStatus"] = -1
	if errors.As(err, &se) {
		out["pubDeniedStatus"] = se.Status
	}
	_, err = ctx.MessagePublish(packrun.AgentEnvelope, json.RawMessage(invalid), "")
	out["pubInvalid"] = e(err)

	em, err := ctx.SensorEmit(json.RawMessage(sensorEvent))
	out["emitted"], out["emittedErr"] = em, e(err)
	_, err = ctx.SensorEmit(json.RawMessage(invalidEvent))
	out["sensorInvalid"] = e(err)
	out["sensorInvalidStatus"] = -1
	if errors.As(err, &se) {
		out["sensorInvalidStatus"] = se.Status
	}
	return out, nil
}
