package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/api"
)

// commandTree is every command of the CLI, root first.
func commandTree() []*cobra.Command {
	a := &app{}
	var all []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(a.rootCommand())
	return all
}

// eachFlag calls f with every flag of every command (its own and the
// persistent ones it inherits).
func eachFlag(t *testing.T, f func(c *cobra.Command, fl *pflag.Flag)) {
	t.Helper()
	for _, c := range commandTree() {
		c.Flags().VisitAll(func(fl *pflag.Flag) { f(c, fl) })
	}
}

// Every duration flag is the CLI's own (host.ParseDuration), so "2d" works
// wherever a duration does: a new flag defined with pflag's DurationVar
// fails here.
func TestDurationFlagsTakeDays(t *testing.T) {
	n := 0
	eachFlag(t, func(c *cobra.Command, fl *pflag.Flag) {
		if fl.Value.Type() != "duration" {
			return
		}
		n++
		v, ok := fl.Value.(*durationValue)
		if !ok {
			t.Errorf("%s --%s: a %T, not the CLI's durationValue (use durationVar)", c.CommandPath(), fl.Name, fl.Value)
			return
		}
		if err := v.Set("2d"); err != nil || time.Duration(*v) != 2*host.Day {
			t.Errorf("%s --%s 2d: %v, %v", c.CommandPath(), fl.Name, time.Duration(*v), err)
		}
	})
	if n < 7 {
		t.Fatalf("found %d duration flags; the walk missed some", n)
	}
}

// Every --since takes an RFC 3339 time or a duration back from now.
func TestSinceFlagsTakeTimeOrDuration(t *testing.T) {
	n := 0
	eachFlag(t, func(c *cobra.Command, fl *pflag.Flag) {
		if fl.Name != "since" {
			return
		}
		n++
		if _, ok := fl.Value.(*sinceValue); !ok {
			t.Errorf("%s --since: a %T, not the CLI's sinceValue (use sinceVar)", c.CommandPath(), fl.Value)
			return
		}
		for _, v := range []string{"2026-01-02T15:04:05Z", "1h", "7d"} {
			if err := fl.Value.Set(v); err != nil {
				t.Errorf("%s --since %s: %v", c.CommandPath(), v, err)
			}
		}
		if err := fl.Value.Set("yesterday"); err == nil {
			t.Errorf("%s --since yesterday: accepted", c.CommandPath())
		}
	})
	if n < 3 {
		t.Fatalf("found %d --since flags; the walk missed some", n)
	}
}

// The durations end to end: the flags that read durations as text, and a
// few through their commands.
func TestDurationsEndToEnd(t *testing.T) {
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	h.ok("memory", "put", "k", `1`, "--namespace", "notes", "--ttl", "30d")
	if out := h.ok("memory", "get", "k", "--namespace", "notes"); strings.TrimSpace(out) != "1" {
		t.Fatalf("memory get: %q", out)
	}
	h.ok("tokens", "create", "--tenant", "acme", "--scopes", "invoke", "--expires", "1d12h")
	h.ok("events", "--since", "7d")
	h.ok("events", "--since", "2026-01-02T15:04:05Z")
	h.ok("attempts", "list", "--since", "2026-01-02T15:04:05Z")
	h.ok("attempts", "list", "--since", "1d")
	for _, args := range [][]string{{"events", "--since", "yesterday"}, {"attempts", "list", "--since", "-1h"}, {"memory", "put", "k", "1", "--namespace", "n", "--ttl", "1w"}} {
		if code, _, errs := h.run(args...); code != exitUsage || !strings.Contains(errs, `"`+args[len(args)-2]+`" flag`) {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}

// listingNames are the commands that list or show: each has --output.
var listingNames = map[string]bool{"list": true, "show": true, "records": true, "events": true, "subscriptions": true,
	"tail": true, "skills": true, "inspect": true, "version": true}

// Every listing and show command, and every command that prints JSON,
// has --output table|json|jsonl with --json its synonym (one helper).
func TestOutputFlagEverywhere(t *testing.T) {
	n := 0
	for _, c := range commandTree() {
		if !c.Runnable() || !listingNames[c.Name()] && c.Flags().Lookup("json") == nil {
			continue
		}
		n++
		o := c.Flags().Lookup("output")
		if o == nil {
			t.Errorf("%s: no --output", c.CommandPath())
			continue
		}
		if _, ok := o.Value.(*outputValue); !ok {
			t.Errorf("%s --output: a %T, not the shared outputValue (use outputVar)", c.CommandPath(), o.Value)
		}
		if j := c.Flags().Lookup("json"); j == nil || j.NoOptDefVal != "true" {
			t.Errorf("%s: no --json synonym", c.CommandPath())
		} else if _, ok := j.Value.(jsonSynonym); !ok {
			t.Errorf("%s --json: a %T, not the synonym of --output json", c.CommandPath(), j.Value)
		}
	}
	if n < 30 {
		t.Fatalf("found %d listing commands; the walk missed some", n)
	}
}

// The listings of the command tree, run on a home with a task, an
// attempt and a memory key: --json prints what --output json prints (one
// JSON document), --output jsonl one JSON value a line, and a wrong or
// contradicting format is a usage error.
func TestOutputFormatsOfListings(t *testing.T) {
	h := helloHome(t)
	h.ok("tasks", "enqueue", "--type", "hello.c", "--input", `{"name":"a"}`)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"b"}`)
	h.ok("memory", "put", "k", "1", "--namespace", "notes")
	extra := map[string][]string{"packrun memory list": {"--namespace", "notes"}}
	streams := map[string]bool{"packrun events": true} // JSON Lines for json and jsonl alike
	n := 0
	for _, c := range commandTree() {
		if !c.Runnable() || c.Name() != "list" && c.Name() != "events" && c.Name() != "skills" && c.Name() != "records" && c.Name() != "subscriptions" {
			continue
		}
		n++
		path := strings.Fields(c.CommandPath())[1:]
		args := append(path, extra[c.CommandPath()]...)
		js := h.ok(append(args, "--json")...)
		if o := h.ok(append(args, "--output", "json")...); o != js {
			t.Errorf("%s: --json %q, --output json %q", c.CommandPath(), js, o)
		}
		if !streams[c.CommandPath()] && !json.Valid([]byte(js)) {
			t.Errorf("%s --output json: not one JSON document: %q", c.CommandPath(), js)
		}
		for _, line := range strings.Split(strings.TrimSuffix(h.ok(append(args, "--output", "jsonl")...), "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("%s --output jsonl: line %q", c.CommandPath(), line)
			}
		}
		h.ok(append(args, "--output", "table")...)
		for _, bad := range [][]string{{"--output", "yaml"}, {"--json", "--output", "table"}, {"--output", "jsonl", "--json"}} {
			if code, _, errs := h.run(append(args, bad...)...); code != exitUsage || !strings.Contains(errs, "--output") && !strings.Contains(errs, "--json") {
				t.Errorf("%s %v: exit %d, %q", c.CommandPath(), bad, code, errs)
			}
		}
	}
	if n < 12 {
		t.Fatalf("ran %d listings; the walk missed some", n)
	}
	if a, b := h.ok("tasks", "list", "--json=false"), h.ok("tasks", "list"); a != b {
		t.Fatalf("--json=false %q, without it %q", a, b)
	}
	// jsonl of a listing is its items, one a line.
	if out := h.ok("tasks", "list", "--output", "jsonl"); strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, `{"task_id":`) {
		t.Fatalf("tasks list --output jsonl: %q", out)
	}
	if out := h.ok("attempts", "list", "--output", "jsonl"); strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, `{`) {
		t.Fatalf("attempts list --output jsonl: %q", out)
	}
	// A show command that printed JSON only keeps json by default; table
	// is its fields.
	id := strings.TrimSpace(h.ok("tasks", "list", "--output", "jsonl"))
	var rec struct {
		TaskID string `json:"task_id"`
	}
	json.Unmarshal([]byte(id), &rec)
	if out := h.ok("tasks", "show", rec.TaskID); !json.Valid([]byte(out)) {
		t.Fatalf("tasks show: %q", out)
	}
	if out := h.ok("tasks", "show", rec.TaskID, "--output", "table"); !strings.Contains(out, "task_id:") || !strings.Contains(out, rec.TaskID) {
		t.Fatalf("tasks show --output table: %q", out)
	}
}

// userData are the keys whose values are a guest's or a user's own JSON
// (their keys are theirs, not the CLI's).
var userData = map[string]bool{"input": true, "output": true, "payload": true, "interrupt": true, "value": true,
	"data": true, "document": true, "resume_values": true, "trace": true, "context": true,
	"manifest": true} // a pack's manifest is openwop's format (RFC 0008: camelCase), shown as it is

// snakeKeys reports the keys of v that are not snake_case.
func snakeKeys(v any, path string, bad *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.ToLower(k) != k || strings.Contains(k, "-") {
				*bad = append(*bad, path+"."+k)
			}
			if !userData[k] {
				snakeKeys(e, path+"."+k, bad)
			}
		}
	case []any:
		for _, e := range x {
			snakeKeys(e, path+"[]", bad)
		}
	}
}

// The JSON documents of the CLI have snake_case keys: invoke --json and
// attempts show --json included (their limits were camelCase). The pack
// manifest's own format (inspect) is openwop's camelCase and not an
// output document of this rule.
func TestJSONOutputIsSnakeCase(t *testing.T) {
	h := helloHome(t)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"b"}`)
	h.ok("tasks", "enqueue", "--type", "hello.c", "--input", `{"name":"a"}`)
	var atts []map[string]any
	if err := json.Unmarshal([]byte(h.ok("attempts", "list", "--json")), &atts); err != nil || len(atts) == 0 {
		t.Fatalf("attempts list: %v", err)
	}
	id := atts[0]["attempt_id"].(string)
	var tasks []map[string]any
	json.Unmarshal([]byte(h.ok("tasks", "list", "--json")), &tasks)
	for _, args := range [][]string{
		{"invoke", "local.hello.c", "--input", `{"name":"c"}`, "--json"},
		{"invoke", "local.hello.c", "--input", `{"name":"c"}`, "--max-memory", "64KiB", "--json"},
		{"attempts", "show", id, "--json"},
		{"attempts", "list", "--json"},
		{"tasks", "show", tasks[0]["task_id"].(string)},
		{"tasks", "list", "--json"},
		{"list", "--json"},
		{"events", "--json"},
	} {
		_, out, _ := h.run(args...)
		if strings.TrimSpace(out) == "" {
			t.Errorf("%v: no output", args)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if args[0] != "events" {
				line = out
			}
			var v any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%v: %v: %q", args, err, line)
			}
			var bad []string
			snakeKeys(v, "", &bad)
			if len(bad) > 0 {
				t.Errorf("%v: keys not snake_case: %v", args, bad)
			}
			if args[0] != "events" {
				break
			}
		}
	}
	if out := h.ok("attempts", "show", id, "--json"); !strings.Contains(out, `"memory_bytes":`) {
		t.Fatalf("attempts show --json has no snake_case limits: %s", out)
	}
}

// cliOfRoute is the CLI command of each API listing that takes query
// parameters, and the flag of each parameter whose name differs
// (otherwise the parameter with '_' as '-'); "" marks a parameter the
// command takes another way.
var cliOfRoute = map[string]struct {
	command string
	flags   map[string]string
}{
	"GET /v1/tasks":            {"packrun tasks list", map[string]string{"task_type": "type"}},
	"GET /v1/events":           {"packrun events", map[string]string{"task_id": "task", "after": "cursor"}},
	"GET /v1/attempts":         {"packrun attempts list", map[string]string{"task_id": "task"}},
	"GET /v1/messages":         {"packrun messages list", nil},
	"GET /v1/workflow-records": {"packrun workflows records", nil},
	// The entry and the two sizes are arguments.
	"GET /v1/evidence/proof/inclusion":   {"packrun evidence prove", map[string]string{"entry": ""}},
	"GET /v1/evidence/proof/consistency": {"packrun evidence consistency", map[string]string{"from": "", "to": ""}},
	// openwop's audit check walks the whole chain, as evidence verify does;
	// the range it names is only echoed.
	"GET /v1/audit/verify": {"packrun evidence verify", map[string]string{"fromSeq": "", "toSeq": ""}},
	// openwop's registry search over the installed packs: packrun list
	// lists them all; one is read by name with packrun inspect NAME.
	"GET /v1/packs/-/search": {"packrun list", map[string]string{"q": ""}},
}

// The CLI filters as the API does: every query parameter of an API
// listing (read from the API's own refusal of an unknown one, so a new
// parameter or a new listing shows up here) is a flag of its CLI command.
func TestCLIFiltersMatchTheAPI(t *testing.T) {
	home := helloHome(t).home
	h, err := packrun.Open(context.Background(), home, packrun.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	handler, err := h.Handler(context.Background(), packrun.HandlerOptions{Addr: "127.0.0.1:7070", InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string]*cobra.Command{}
	for _, c := range commandTree() {
		commands[c.CommandPath()] = c
	}
	checked := 0
	for _, route := range api.Routes() {
		method, path, _ := strings.Cut(route, " ")
		if method != http.MethodGet || strings.Contains(path, "{") {
			continue // one item, or under one (its listing's command takes the item as an argument)
		}
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7070"+path+"?zz_probe=1", nil)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		_, takes, ok := strings.Cut(rec.Body.String(), " takes ")
		if rec.Code != http.StatusBadRequest || !ok {
			t.Errorf("%s: probe answered %d %s", route, rec.Code, rec.Body)
			continue
		}
		takes, _, _ = strings.Cut(takes, `"`)
		if takes == "none" {
			continue
		}
		m, ok := cliOfRoute[route]
		if !ok {
			t.Errorf("%s takes %s: no CLI command listed in cliOfRoute", route, takes)
			continue
		}
		c := commands[m.command]
		if c == nil {
			t.Errorf("%s: no command %q", route, m.command)
			continue
		}
		for _, p := range strings.Split(takes, ", ") {
			flag, renamed := m.flags[p]
			if !renamed {
				flag = strings.ReplaceAll(p, "_", "-")
			}
			if flag != "" && c.Flags().Lookup(flag) == nil {
				t.Errorf("%s takes %s; %s has no --%s", route, p, m.command, flag)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d parameters; the probe missed some", checked)
	}
}

// tasks list filters by type and tenant and pages with --cursor, its
// "more:" line naming the next page's; attempts list and events page the
// same way.
func TestCLIFiltersAndCursors(t *testing.T) {
	h := helloHome(t)
	var want []string
	for range 3 {
		want = append([]string{strings.TrimSpace(h.ok("tasks", "enqueue", "--type", "hello.c"))}, want...)
	}
	if out := h.ok("tasks", "list", "--type", "nope.type"); strings.Count(out, "\n") != 1 {
		t.Fatalf("--type nope.type: %q", out)
	}
	if out := h.ok("tasks", "list", "--type", "hello.c", "--tenant", host.DefaultTenant); strings.Count(out, "\n") != 4 {
		t.Fatalf("--type hello.c: %q", out)
	}
	var got []string
	cursor := ""
	for pages := 0; pages < 5; pages++ {
		args := []string{"tasks", "list", "--limit", "2", "--output", "jsonl"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		_, out, errs := h.run(args...)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r struct {
				TaskID string `json:"task_id"`
			}
			if line != "" && json.Unmarshal([]byte(line), &r) == nil {
				got = append(got, r.TaskID)
			}
		}
		_, cursor, _ = strings.Cut(strings.TrimSpace(errs), "more: --cursor ")
		if cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	if out := h.ok("tasks", "list", "--limit", "1"); !strings.Contains(out, "more: --cursor "+want[0]) {
		t.Fatalf("table: %q", out)
	}
	for range 2 {
		h.ok("invoke", "local.hello.c", "--input", `{"name":"x"}`)
	}
	out := h.ok("attempts", "list", "--limit", "1")
	_, c, ok := strings.Cut(out, "more: --cursor ")
	if !ok {
		t.Fatalf("attempts list --limit 1: %q", out)
	}
	if next := h.ok("attempts", "list", "--cursor", strings.TrimSpace(c)); strings.Count(next, "\n") != 2 || strings.Contains(next, "more:") {
		t.Fatalf("attempts list --cursor %s: %q", c, next)
	}
	evs := h.ok("events", "--limit", "2", "--output", "jsonl")
	var first struct {
		Seq int64 `json:"seq"`
	}
	json.Unmarshal([]byte(strings.Split(evs, "\n")[0]), &first)
	if next := h.ok("events", "--limit", "1", "--output", "jsonl", "--cursor", fmt.Sprint(first.Seq)); next != strings.SplitAfter(evs, "\n")[1] {
		t.Fatalf("events --cursor %d: %q, want the second of %q", first.Seq, next, evs)
	}
	for _, args := range [][]string{{"attempts", "list", "--cursor", "x"}, {"events", "--cursor", "-1"}, {"messages", "list", "--cursor", "1", "--after", "1"}} {
		if code, _, errs := h.run(args...); code != exitUsage || !strings.Contains(errs, "--cursor") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}
