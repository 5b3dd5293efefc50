package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/observe"
	"github.com/packrun/packrun/internal/quota"
)

// serve's --quota-* flags: their defaults are the documented ones, 0 is
// no limit, and a bad value is a usage error naming the flag.
func TestServeQuotaFlags(t *testing.T) {
	parse := func(args ...string) (packrun.Quotas, error) {
		var q quotaFlags
		c := &cobra.Command{}
		q.add(c)
		if err := c.Flags().Parse(args); err != nil {
			return packrun.Quotas{}, err
		}
		return q.config()
	}
	got, err := parse()
	d := quota.Defaults
	want := packrun.Quotas{Schedules: d.Schedules, ScheduleMinInterval: d.ScheduleMinInterval, ActiveWorkflows: d.ActiveWorkflows,
		WorkflowSteps: d.WorkflowSteps, QueuedTasks: d.QueuedTasks, SensorEventsPerMinute: d.SensorEventsPerMinute, MessagesPerMinute: d.MessagesPerMinute}
	if err != nil || got != want {
		t.Fatalf("defaults %+v %v, want %+v", got, err, want)
	}
	got, err = parse("--quota-queued-tasks", "0", "--quota-schedule-min-interval", "0s", "--quota-workflow-steps", "7")
	if err != nil || got.QueuedTasks != -1 || got.ScheduleMinInterval != -1 || got.WorkflowSteps != 7 {
		t.Fatalf("0 (none) and 7: %+v %v", got, err)
	}
	for _, args := range [][]string{{"--quota-schedules", "-1"}, {"--quota-schedule-min-interval", "1500ms"}} {
		if _, err := parse(args...); exitCode(err) != exitUsage || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v (exit %d), want a usage error naming the flag", args, err, exitCode(err))
		}
	}
}

// /metrics shows each quota's usage and refusals labelled by quota only,
// never by tenant.
func TestMetricsQuotas(t *testing.T) {
	home := helloHome(t).home
	ctx := context.Background()
	obs := observe.New(observe.Config{Home: home})
	h, err := packrun.Open(ctx, home, packrun.Config{Observer: obs, Quotas: packrun.Quotas{Schedules: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	srv := httptest.NewUnstartedServer(nil)
	apiHandler, err := h.Handler(ctx, packrun.HandlerOptions{Addr: srv.Listener.Addr().String(), InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = observed(obs, h, apiHandler, srv.Listener.Addr().String())
	srv.Start()
	defer srv.Close()
	for i, want := range []int{http.StatusCreated, http.StatusConflict} {
		body := fmt.Sprintf(`{"name":"s%d","interval_seconds":3600,"task":{"task_type":"hello.c","payload":{}}}`, i)
		if code, out := get(t, "POST", srv.URL+"/v1/schedules", "", body); code != want {
			t.Fatalf("schedule %d: %d %s", i, code, out)
		}
	}
	code, text := get(t, "GET", srv.URL+"/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	if v := metricValue(t, text, `packrun_quota_refusals_total{quota="schedules"}`); v != 1 {
		t.Errorf("schedules refusals %v, want 1", v)
	}
	if v := metricValue(t, text, `packrun_quota_usage_ratio{quota="schedules"}`); v != 1 {
		t.Errorf("schedules usage %v, want 1", v)
	}
	if v := metricValue(t, text, `packrun_quota_refusals_total{quota="queued_tasks"}`); v != 0 {
		t.Errorf("queued_tasks refusals %v, want 0", v)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "packrun_quota") && (strings.Contains(line, "tenant") || strings.Contains(line, host.DefaultTenant)) {
			t.Errorf("a quota series names a tenant: %s", line)
		}
	}
}

// `packrun schedules add` goes through the Host: past a tenant's
// schedules quota (its default, 100) it is refused naming the quota, and
// nothing is stored.
func TestSchedulesAddQuota(t *testing.T) {
	h := helloHome(t)
	b := homeStore(t, h.home)
	for i := range quota.Defaults.Schedules {
		if _, err := b.CreateSchedule(context.Background(), host.ScheduleSpec{Name: fmt.Sprintf("s%d", i), IntervalSeconds: 3600,
			Task: host.TaskIntent{TaskType: "hello.c", Payload: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := h.run("schedules", "add", "--name", "one-more", "--every", "1h", "--type", "hello.c")
	if code != exitRefused || !strings.Contains(errs, "quota schedules") || !strings.Contains(errs, "--quota-schedules") {
		t.Fatalf("exit %d, stderr %q: want refused naming the quota", code, errs)
	}
	if _, err := b.Schedule(context.Background(), host.DefaultTenant, "one-more"); err == nil {
		t.Fatal("the refused schedule was stored")
	}
}
