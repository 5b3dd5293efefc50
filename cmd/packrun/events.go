package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/host"
)

// followPoll is how often `events --follow` looks for new events.
var followPoll = 500 * time.Millisecond

func (a *app) eventsCommand() *cobra.Command {
	var f host.EventFilter
	var asJSON, follow bool
	var cursor string
	cmd := &cobra.Command{
		Use:   "events [--type T] [--task ID] [--since T] [--limit N] [--json] [--follow]",
		Short: "List the runtime events of this home's store, oldest first",
		Long: `List the runtime events of this home's store (the hash-chained log: task_enqueued,
task_claimed, task_started, task_finished, dispatch_idle, ...), oldest first.

--since takes an RFC 3339 time or a duration back from now (1h). --json prints one
event a line (JSON Lines). --follow keeps printing new events as they are appended,
until interrupted.`,
		Example: `  packrun events --type task_finished --since 1h
  packrun events --task task_01J... --json
  packrun events --follow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Limit < 1 {
				return usageError("--limit %d: must be at least 1", f.Limit)
			}
			var err error
			if f.AfterSeq, err = seqCursor(cursor); err != nil {
				return err
			}
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				return printEvents(cmd.Context(), b, f, a.stdout, asJSON, follow)
			})
		},
	}
	cmd.Flags().StringVar(&f.Type, "type", "", "only events of this type")
	cmd.Flags().StringVar(&f.TaskID, "task", "", "only events of this task")
	cursorVar(cmd.Flags(), &cursor)
	sinceVar(cmd.Flags(), &f.Since, "only events appended since")
	cmd.Flags().IntVar(&f.Limit, "limit", 100, "at most this many (without --follow)")
	outputVar(cmd.Flags(), &asJSON)
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new events until interrupted")
	return cmd
}

// printEvents prints the events f selects, a page at a time; with follow,
// it then polls for new ones until ctx is done (which is not an error).
func printEvents(ctx context.Context, b host.Backend, f host.EventFilter, out io.Writer, asJSON, follow bool) error {
	left := f.Limit
	page := min(f.Limit, 1000)
	header := !asJSON
	for {
		f.Limit = page
		if !follow {
			f.Limit = min(page, left)
		}
		evs, err := b.Events(ctx, f)
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := writeEvents(out, evs, asJSON, header); err != nil {
			return err
		}
		header = false
		if len(evs) > 0 {
			f.AfterSeq, f.Since = evs[len(evs)-1].Seq, time.Time{}
		}
		left -= len(evs)
		switch {
		case len(evs) == f.Limit && (follow || left > 0):
			continue // more may be there now
		case !follow:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

// writeEvents prints events as JSON Lines or as a table (with its header
// line first if header).
func writeEvents(out io.Writer, evs []*host.Event, asJSON, header bool) error {
	if asJSON {
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
				return err
			}
		}
		return nil
	}
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(w, "SEQ\tTIME\tTYPE\tTASK\tDATA")
	}
	for _, e := range evs {
		data := string(e.Data)
		if len(data) > 120 {
			data = data[:117] + "..."
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Local().Format(time.DateTime), e.Type, orDash(e.TaskID), strings.ReplaceAll(data, "\t", " "))
	}
	return w.Flush()
}
