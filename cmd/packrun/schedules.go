package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/host"
)

func (a *app) schedulesCommand() *cobra.Command {
	schedules := &cobra.Command{
		Use:   "schedules",
		Short: "Recurring schedules: enqueue a task every interval (run by packrun serve)",
		Long: `A recurring schedule enqueues a normal task every interval while packrun serve
runs. Missed runs are not replayed: one evaluation creates at most one task per
due schedule, then the next run is one interval later. Each task's source is
schedule:<schedule_id>:<slot>, and a slot never creates two tasks.`,
	}
	var name, every, taskType, input string
	var priority int
	add := &cobra.Command{
		Use:     "add --name N --every D --type T [--input JSON] [--priority P]",
		Short:   "Create a schedule (its first run is one interval from now)",
		Example: `  packrun schedules add --name nightly-report --every 24h --type report.build --input '{"scope":"all"}'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usageError("schedules add needs --name")
			}
			if taskType == "" {
				return usageError("schedules add needs --type")
			}
			secs, err := host.ParseEvery(every)
			if err != nil {
				return usageError("--every %v", err)
			}
			payload, err := a.readInput(input)
			if err != nil {
				return err
			}
			spec := host.ScheduleSpec{Name: name, IntervalSeconds: secs, Task: host.TaskIntent{TaskType: taskType, Payload: payload}}
			if cmd.Flags().Changed("priority") {
				spec.Task.Priority = host.Priority(priority)
			}
			return a.withBackend(cmd, readWrite, func(b host.Backend) error {
				// As tasks enqueue does: a type nothing serves is refused.
				if _, err := b.Resolve(cmd.Context(), taskType); err != nil {
					return err
				}
				s, err := b.CreateSchedule(cmd.Context(), spec)
				if err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, s.ScheduleID)
				return nil
			})
		},
	}
	add.Flags().StringVar(&name, "name", "", "schedule name (unique)")
	add.Flags().StringVar(&every, "every", "", "interval: whole seconds, 1s or more (30s, 5m, 1h)")
	add.Flags().StringVar(&taskType, "type", "", "task type of the tasks it creates")
	add.Flags().StringVar(&input, "input", "{}", "payload JSON object, @FILE or @-")
	add.Flags().IntVar(&priority, "priority", 5, "queue priority of its tasks (lower runs first)")

	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List schedules",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				l, err := b.ListSchedules(cmd.Context(), host.DefaultTenant)
				if err != nil {
					return err
				}
				if asJSON {
					if l == nil {
						l = []*host.RecurringSchedule{}
					}
					return a.emit(l)
				}
				w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "SCHEDULE\tNAME\tEVERY\tTYPE\tENABLED\tNEXT RUN\tLAST RUN")
				for _, s := range l {
					last := "-"
					if s.LastRunAt != nil {
						last = s.LastRunAt.Local().Format(time.DateTime)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\t%s\t%s\n", s.ScheduleID, s.Name, host.FormatEvery(s.IntervalSeconds),
						s.Task.TaskType, s.Enabled, s.NextRunAt.Local().Format(time.DateTime), last)
				}
				return w.Flush()
			})
		},
	}
	outputVar(list.Flags(), &asJSON)

	show := &cobra.Command{
		Use:   "show ID|NAME",
		Short: "Show one schedule (JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				s, err := b.Schedule(cmd.Context(), host.DefaultTenant, args[0])
				if err != nil {
					return err
				}
				return a.emitRecord(s)
			})
		},
	}
	outputVarDefault(show.Flags(), outJSON, nil)
	toggle := func(use, short string, enabled bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID|NAME",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.withBackend(cmd, readOnly, func(b host.Backend) error {
					s, err := b.UpdateSchedule(cmd.Context(), host.DefaultTenant, args[0], host.ScheduleUpdate{Enabled: &enabled})
					if err != nil {
						return err
					}
					fmt.Fprintf(a.stdout, "%s (%s): enabled %t, next run %s\n", s.ScheduleID, s.Name, s.Enabled, s.NextRunAt.Local().Format(time.DateTime))
					return nil
				})
			},
		}
	}
	del := &cobra.Command{
		Use:   "delete ID|NAME",
		Short: "Delete a schedule (the tasks it created stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				if err := b.DeleteSchedule(cmd.Context(), host.DefaultTenant, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s: deleted\n", args[0])
				return nil
			})
		},
	}
	schedules.AddCommand(add, list, show,
		toggle("pause", "Pause a schedule (it creates no task until resumed)", false),
		toggle("resume", "Resume a schedule (its next run is one interval from now)", true), del)
	return schedules
}
