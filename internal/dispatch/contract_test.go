package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
)

// helloPack is examples/hello-wat ({"name":"x"} -> {"greeting":"Hello, x!"})
// with the given schemas on its node, serving task type hello.t.
func helloPack(t *testing.T, in, out string) *packs.Archive {
	t.Helper()
	return testPack(t, "../../examples/hello-wat/hello.wasm", "local.hello.wat", 0,
		`"nodes":[{"typeId":"example.hello","kind":"skill","taskTypes":["hello.t"],"inputSchema":`+in+`,"outputSchema":`+out+`}]`, nil)
}

const (
	nameRequired  = `{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}`
	greetingHello = `{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"string","pattern":"^Hello"}}}`
	greetingHi    = `{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"string","pattern":"^Hi"}}}`
)

func TestInputSchemaRefusesBeforeTheGuestRuns(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, helloPack(t, nameRequired, greetingHello))
	att, res, err := e.d.Invoke(ctx, InvokeRequest{Pack: "local.hello.wat", Input: json.RawMessage(`{"name":7}`)})
	ie, ok := errors.AsType[*InputError](err)
	if !ok || !errors.Is(err, ErrInputRefused) || ie.Path != "name" || ie.AttemptID == "" {
		t.Fatalf("invoke: %v", err)
	}
	if res.HostCalls != 0 || len(res.Trace) != 0 || res.Duration != 0 {
		t.Fatalf("the guest ran: %+v", res)
	}
	got, err := e.backend.Attempt(ctx, att.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != abi.Failed || got.Error == nil || got.Error.Code != CodeInputSchema || got.RetryClass != host.RetryPermanent {
		t.Fatalf("recorded attempt: %+v %+v", got, got.Error)
	}
	if !strings.HasPrefix(got.Error.Message, "input.name: ") {
		t.Fatalf("message %q does not name the path", got.Error.Message)
	}
	// A missing required member is named too.
	_, _, err = e.d.Invoke(ctx, InvokeRequest{Pack: "local.hello.wat", Input: json.RawMessage(`{}`)})
	if ie, ok := errors.AsType[*InputError](err); !ok || ie.Path != "name" || ie.Reason != "required" {
		t.Fatalf("missing name: %v", err)
	}
	// Acceptable input runs.
	_, res, err = e.d.Invoke(ctx, InvokeRequest{Pack: "local.hello.wat", Input: json.RawMessage(`{"name":"x"}`)})
	if err != nil || res.Outcome != abi.Completed {
		t.Fatalf("valid input: %v %+v", err, res)
	}
}

func TestOutputSchemaFailsTheAttempt(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, helloPack(t, nameRequired, greetingHi))
	att, res, err := e.d.Invoke(ctx, InvokeRequest{Pack: "local.hello.wat", Input: json.RawMessage(`{"name":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != abi.Failed || res.Error.Code != CodeOutputSchema {
		t.Fatalf("result: %+v %+v", res, res.Error)
	}
	var d struct{ Path string }
	json.Unmarshal(res.Error.Details, &d)
	if d.Path != "output.greeting" {
		t.Fatalf("details %s", res.Error.Details)
	}
	got, _ := e.backend.Attempt(ctx, att.AttemptID)
	if got.Outcome != abi.Failed || string(got.Output) != `{"greeting":"Hello, x!"}` || got.RetryClass != host.RetryPermanent {
		t.Fatalf("recorded: %s %s %s", got.Outcome, got.Output, got.RetryClass)
	}
}

// A queued task whose payload the skill's inputSchema refuses fails
// permanently with input_schema_violation, its attempt recorded.
func TestQueuedTaskInputSchemaViolation(t *testing.T) {
	ctx := context.Background()
	e := newEnvWith(t, helloPack(t, nameRequired, greetingHello))
	if err := e.backend.SetPackTaskTypes(ctx, "local.hello.wat", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "hello.t"}, Pack: "local.hello.wat", Node: "example.hello"}}); err != nil {
		t.Fatal(err)
	}
	task, err := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: "hello.t", Source: "test", Payload: json.RawMessage(`{"name":[]}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := e.backend.Claim(ctx, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.d.RunTask(ctx, claimed)
	done, _ := e.backend.Task(ctx, task.TaskID)
	if done.Status != host.TaskPermanentFailure || done.LastError == "" || done.LastError[:len(CodeInputSchema)] != CodeInputSchema {
		t.Fatalf("task %s: %q", done.Status, done.LastError)
	}
	atts, _ := e.backend.ListAttempts(ctx, host.AttemptFilter{TaskID: task.TaskID})
	if len(atts) != 1 || atts[0].Error == nil || atts[0].Error.Code != CodeInputSchema {
		t.Fatalf("attempts %+v", atts)
	}
}

// asset_read serves the node's own pack's assets: text as text, binary as
// base64, a missing file 11, a path leaving assets/ refused; the calls
// are in the attempt's trace.
func TestAssetRead(t *testing.T) {
	ctx := context.Background()
	arch := testPack(t, "../../testdata/modules/assets.wasm", "local.assets", 1,
		`"nodes":[{"typeId":"assets.skill","kind":"node"},{"typeId":"assets.escape","kind":"node"},
		{"typeId":"assets.missing","kind":"node"},{"typeId":"assets.bin","kind":"node"}]`,
		map[string]string{"SKILL.md": "# Skill\nDo it.\n", "bin/x.bin": "\xff\x00\x01"})
	e := newEnvWith(t, arch)
	for _, c := range []struct{ node, want string }{
		{"assets.skill", `{"text":"# Skill\nDo it.\n"}`},
		{"assets.bin", `{"base64":"/wAB"}`},
		{"assets.missing", `{"status":11}`},
		{"assets.escape", fmt.Sprintf(`{"status":%d}`, abi.StatusValidation)},
	} {
		att, res, err := e.d.Invoke(ctx, InvokeRequest{Pack: "local.assets", Node: c.node})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != abi.Completed || !jsonEqual(res.Output, c.want) {
			t.Errorf("%s: %s %s %v, want %s", c.node, res.Outcome, res.Output, res.Error, c.want)
		}
		if len(res.Trace) != 1 || !strings.HasSuffix(res.Trace[0].Fn, "."+abi.HostAssetRead) || !strings.Contains(string(att.Trace), "asset_read") {
			t.Errorf("%s: trace %s", c.node, att.Trace)
		}
	}
}

// An asset over packs.MaxAssetBytes is refused as a capability breach.
func TestAssetReadBounded(t *testing.T) {
	arch := testPack(t, "../../testdata/modules/assets.wasm", "local.assets", 1, `"nodes":[{"typeId":"assets.bin","kind":"node"}]`,
		map[string]string{"bin/x.bin": strings.Repeat("x", packs.MaxAssetBytes+1)})
	e := newEnvWith(t, arch)
	_, res, err := e.d.Invoke(context.Background(), InvokeRequest{Pack: "local.assets"})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"status":%d}`, abi.StatusCapabilityBreach); !jsonEqual(res.Output, want) {
		t.Fatalf("output %s, want %s", res.Output, want)
	}
}

func jsonEqual(got []byte, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}
