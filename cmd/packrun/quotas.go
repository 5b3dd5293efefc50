package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/internal/quota"
)

// quotaFlags are serve's --quota-* flags (packrun.Quotas; 0: no limit).
type quotaFlags struct {
	schedules, workflows, steps, tasks, sensorEvents, messages int
	interval                                                   time.Duration
}

func (q *quotaFlags) add(cmd *cobra.Command) {
	d := quota.Defaults
	f := cmd.Flags()
	f.IntVar(&q.schedules, strings.TrimPrefix(quota.Flag(quota.Schedules), "--"), d.Schedules, "schedules each tenant may have; 0: no limit")
	durationVar(f, &q.interval, strings.TrimPrefix(quota.Flag(quota.ScheduleMinInterval), "--"), d.ScheduleMinInterval, "shortest interval of a tenant's schedule (whole seconds)")
	f.IntVar(&q.workflows, strings.TrimPrefix(quota.Flag(quota.ActiveWorkflows), "--"), d.ActiveWorkflows, "active workflow records each tenant may have; 0: no limit")
	f.IntVar(&q.steps, strings.TrimPrefix(quota.Flag(quota.WorkflowSteps), "--"), d.WorkflowSteps, "state transitions one workflow record may make before it is blocked; 0: no limit")
	f.IntVar(&q.tasks, strings.TrimPrefix(quota.Flag(quota.QueuedTasks), "--"), d.QueuedTasks, "unfinished tasks each tenant may have (a schedule of a full tenant skips its slot); 0: no limit")
	f.IntVar(&q.sensorEvents, strings.TrimPrefix(quota.Flag(quota.SensorEvents), "--"), d.SensorEventsPerMinute, "sensor events each tenant may post a minute; 0: no limit")
	f.IntVar(&q.messages, strings.TrimPrefix(quota.Flag(quota.Messages), "--"), d.MessagesPerMinute, "agent messages each tenant may publish a minute; 0: no limit")
}

// config is the flags as packrun.Quotas.
func (q *quotaFlags) config() (packrun.Quotas, error) {
	for name, v := range map[string]int{quota.Schedules: q.schedules, quota.ActiveWorkflows: q.workflows, quota.WorkflowSteps: q.steps,
		quota.QueuedTasks: q.tasks, quota.SensorEvents: q.sensorEvents, quota.Messages: q.messages} {
		if v < 0 {
			return packrun.Quotas{}, usageError("%s %d: must be 0 (no limit) or more", quota.Flag(name), v)
		}
	}
	if q.interval < 0 || q.interval%time.Second != 0 {
		return packrun.Quotas{}, usageError("%s %s: must be whole seconds, 0 or more", quota.Flag(quota.ScheduleMinInterval), q.interval)
	}
	none := func(v int) int { // 0 here is no limit; in packrun.Quotas, negative
		if v == 0 {
			return -1
		}
		return v
	}
	out := packrun.Quotas{Schedules: none(q.schedules), ActiveWorkflows: none(q.workflows), WorkflowSteps: none(q.steps),
		QueuedTasks: none(q.tasks), SensorEventsPerMinute: none(q.sensorEvents), MessagesPerMinute: none(q.messages),
		ScheduleMinInterval: q.interval}
	if q.interval == 0 {
		out.ScheduleMinInterval = -1
	}
	return out, nil
}
