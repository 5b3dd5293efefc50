package main

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// The schedules commands: add, list, show, pause, resume, delete, each
// taking an id or a name; a malformed interval or a missing flag is a
// usage error naming it, and stores nothing.
func TestSchedulesCommands(t *testing.T) {
	h := helloHome(t)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--every", "1.5s"}, exitUsage, "--every"},
		{[]string{"--every", "0s"}, exitUsage, "--every"},
		{[]string{"--every", "500ms"}, exitUsage, "--every"},
		{[]string{"--every", "soon"}, exitUsage, "--every"},
		{[]string{"--every", "5s", "--input", "[1]"}, exitUsage, "payload"},
		{[]string{"--every", "5s", "--type", "no.such"}, exitNotFound, "no.such"},
	} {
		args := append([]string{"schedules", "add", "--name", "bad", "--type", "hello.c"}, c.args...)
		code, _, errs := h.run(args...)
		first, _, _ := strings.Cut(errs, "\n")
		if code != c.code || !strings.Contains(first, c.says) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %s", c.args, code, errs, c.code, c.says)
		}
	}
	if code, _, errs := h.run("schedules", "add", "--every", "5s", "--type", "hello.c"); code != exitUsage || !strings.Contains(errs, "--name") {
		t.Errorf("no --name: exit %d %q", code, errs)
	}
	if out := h.ok("schedules", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("refused adds stored schedules: %s", out)
	}
	id := strings.TrimSpace(h.ok("schedules", "add", "--name", "greet", "--every", "5m", "--type", "hello.c", "--input", `{"name":"s"}`, "--priority", "2"))
	if code, _, _ := h.run("schedules", "add", "--name", "greet", "--every", "5m", "--type", "hello.c"); code != exitRefused {
		t.Errorf("a second schedule named greet: exit %d", code)
	}
	var s host.RecurringSchedule
	if err := json.Unmarshal([]byte(h.ok("schedules", "show", "greet")), &s); err != nil {
		t.Fatal(err)
	}
	if s.ScheduleID != id || s.IntervalSeconds != 300 || *s.Task.Priority != 2 || !s.Enabled {
		t.Fatalf("show: %+v", s)
	}
	if out := h.ok("schedules", "list"); !strings.Contains(out, "greet") || !strings.Contains(out, "5m") {
		t.Fatalf("list:\n%s", out)
	}
	if out := h.ok("schedules", "pause", "greet"); !strings.Contains(out, "enabled false") {
		t.Fatalf("pause: %s", out)
	}
	if out := h.ok("schedules", "resume", id); !strings.Contains(out, "enabled true") {
		t.Fatalf("resume: %s", out)
	}
	h.ok("schedules", "delete", "greet")
	if code, _, _ := h.run("schedules", "show", id); code != exitNotFound {
		t.Fatalf("show after delete: exit %d", code)
	}
}

// scheduledTasks returns the tasks of schedule id, failing if a slot has
// two.
func scheduledTasks(t *testing.T, b host.Backend, id string) int {
	t.Helper()
	tasks, err := b.ListTasks(context.Background(), host.TaskFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, task := range tasks {
		if !strings.HasPrefix(task.Source, "schedule:"+id+":") {
			continue
		}
		if seen[task.Source] {
			t.Fatalf("slot %s produced two tasks", task.Source)
		}
		seen[task.Source] = true
	}
	return len(seen)
}

// A 1s schedule served by two `packrun serve` processes on one home, the
// one holding the dispatch lock killed with SIGKILL (twice) while it fires
// and a new one started each time: no slot ever produced two tasks, and
// there are no more tasks than slots elapsed.
func TestScheduleSlotsAcrossKillAndTwoServes(t *testing.T) {
	home, bin := servedHome(t)
	b := homeStore(t, home)
	ctx := context.Background()
	began := time.Now()
	s, err := b.CreateSchedule(ctx, host.ScheduleSpec{Name: "tick", IntervalSeconds: 1,
		Task: host.TaskIntent{TaskType: "hello.c", Payload: json.RawMessage(`{"name":"tick"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for scheduledTasks(t, b, s.ScheduleID) < n {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d scheduled tasks after a minute", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	procs := []served{startServe(t, bin, home), startServe(t, bin, home)}
	for _, p := range procs {
		p.waitUp(t)
	}
	want := 2
	for kill := 0; kill < 2; kill++ {
		waitFor(want)
		// Kill the one that dispatches (its /readyz says so), while it
		// fires the schedule every second, then start another standby.
		i := dispatcherOf(t, procs)
		if err := procs[i].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		procs[i].Wait()
		procs = append(slices.Delete(procs, i, i+1), startServe(t, bin, home))
		procs[len(procs)-1].waitUp(t)
		want = scheduledTasks(t, b, s.ScheduleID) + 2
	}
	waitFor(want)
	for _, p := range procs {
		p.Process.Signal(syscall.SIGTERM)
		p.Wait()
	}
	n := scheduledTasks(t, b, s.ScheduleID)
	if elapsed := int(time.Since(began)/time.Second) + 1; n > elapsed {
		t.Fatalf("%d scheduled tasks in %d slots", n, elapsed)
	}
}

// dispatcherOf returns the index of the process whose /readyz says it
// holds the dispatch lock, waiting (up to a minute) for one to.
func dispatcherOf(t *testing.T, procs []served) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for i, p := range procs {
			m := regexp.MustCompile(`packrun serving on (http://\S+)`).FindStringSubmatch(p.logs.String())
			if m == nil {
				continue
			}
			if code, body := get(t, "GET", m[1]+"/readyz", "", ""); code == 200 && strings.Contains(body, `"dispatcher"`) {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no serve holds the dispatch lock after a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
