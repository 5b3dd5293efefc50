package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
)

func (a *app) sensorsCommand() *cobra.Command {
	sensors := &cobra.Command{
		Use:   "sensors",
		Short: "Installed sensors, the events they reported, and running one now",
		Long: `A sensor is a pack node of kind "sensor". With a "cadence" in its manifest
("5m"), packrun serve runs it on that cadence through a recurring schedule named
sensor:<typeId> (packrun schedules pause sensor:<typeId> disables it). A sensor
reports SensorEvents with the sensor_emit host import (the sensors grant) or in
its output's "sensor_events" array; they are applied when its attempt completes:
recorded, deduped on (sensor_id, dedupe_key), refused past freshness_deadline,
and their proposed_task enqueued.`,
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List installed sensors with their cadence, schedule and last/next run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				l, err := h.Sensors(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if l == nil {
						l = []packrun.Sensor{}
					}
					return a.emit(l)
				}
				w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "SENSOR\tPACK\tCADENCE\tENABLED\tLAST RUN\tNEXT RUN")
				for _, s := range l {
					last, next := "-", "-"
					if sc := s.Schedule; sc != nil {
						if sc.LastRunAt != nil {
							last = sc.LastRunAt.Local().Format(time.DateTime)
						}
						if sc.Enabled {
							next = sc.NextRunAt.Local().Format(time.DateTime)
						}
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\n", s.SensorID, s.Pack, orDash(s.Cadence), s.Enabled, last, next)
				}
				return w.Flush()
			})
		},
	}
	outputVar(list.Flags(), &asJSON)

	var sensor string
	var limit int
	var eventsJSON bool
	events := &cobra.Command{
		Use:   "events [--sensor ID] [--limit N] [--json]",
		Short: "List recorded sensor events, newest first, with what became of each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageError("--limit %d: must be at least 1", limit)
			}
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				l, err := b.ListSensorEvents(cmd.Context(), host.SensorEventFilter{SensorID: sensor, Limit: limit})
				if err != nil {
					return err
				}
				if eventsJSON {
					if l == nil {
						l = []*host.SensorEventRecord{}
					}
					return a.emit(l)
				}
				w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "RECORD\tSENSOR\tDEDUPE KEY\tSTATUS\tTASK\tRECEIVED")
				for _, r := range l {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.RecordID, r.Event.SensorID, r.Event.DedupeKey, r.Status,
						orDash(r.TaskID), r.ReceivedAt.Local().Format(time.DateTime))
				}
				return w.Flush()
			})
		},
	}
	events.Flags().StringVar(&sensor, "sensor", "", "only this sensor's events")
	events.Flags().IntVar(&limit, "limit", 100, "at most this many")
	outputVar(events.Flags(), &eventsJSON)

	run := &cobra.Command{
		Use:     "run SENSOR",
		Short:   "Run an installed sensor once, now (a recorded invocation), and apply the events it reports",
		Example: `  packrun sensors run demo.sensor`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				r, err := h.RunSensor(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				att := r.Invocation.Attempt
				fmt.Fprintf(a.stdout, "%s: %s (attempt %s)\n", args[0], att.Outcome, att.AttemptID)
				for _, e := range r.Events {
					fmt.Fprintf(a.stdout, "  event %s (dedupe_key %s): %s", e.Event.EventID, e.Event.DedupeKey, e.Status)
					if e.TaskID != "" {
						fmt.Fprintf(a.stdout, ", task %s", e.TaskID)
					}
					if e.Detail != "" {
						fmt.Fprintf(a.stdout, " (%s)", e.Detail)
					}
					fmt.Fprintln(a.stdout)
				}
				return nil
			})
		},
	}
	sensors.AddCommand(list, events, run)
	return sensors
}
