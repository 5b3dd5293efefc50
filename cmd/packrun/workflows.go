package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
)

func (a *app) workflowsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "Workflows: register definitions, start, list and cancel records",
		Long: `A workflow (the agent runtime schema §10, §11) is data: states, the signals that move a record between
them, and the signals that complete it. A FILE holds one definition, field names as the
schema writes them:

  {"workflow_type": "goal-loop", "initial_state": "plan",
   "states": [{"state_id": "plan", "task_type": "goal.plan", "emits_task_intent": true,
               "transitions": [{"signal": "planned", "next_state": "execute"}]}, ...]}

A record is one instance, unique per workflow_type and instance_key. Entering a state that
emits a task intent enqueues its task (task_type, default_profile_id, default_skill_ids,
the record's context as payload, workflow_ref naming the record). When such a task
completes, verified, its outcome's workflow_signal moves the record: a transition of the
current state, then, if the signal is one of the state's completion_signals, the record
completes. A signal matching neither blocks the record; a signal for a state the record
has left changes nothing. The built-in goal-loop (plan → execute → verify → complete,
verify may send the work back to execute with "rejected") is registered in every home.`,
	}
	add := &cobra.Command{
		Use:     "add FILE",
		Short:   "Register (or replace) the workflow definition FILE holds",
		Example: `  packrun workflows add examples/goal-loop/workflow.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHost(cmd, readWrite, func(h *packrun.Host) error {
				def, replaced, err := h.AddWorkflow(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s workflow %s (%d states)\n", addedOrReplaced(replaced), def.WorkflowType, len(def.States))
				return nil
			})
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the registered workflow definitions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				all, err := b.ListWorkflows(cmd.Context())
				if err != nil || asJSON {
					return orJSON(a, nonNil(all), err)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "WORKFLOW\tINITIAL STATE\tSTATES")
				for _, d := range all {
					fmt.Fprintf(tw, "%s\t%s\t%d\n", d.WorkflowType, d.InitialState, len(d.States))
				}
				return tw.Flush()
			})
		},
	}
	outputVar(list.Flags(), &asJSON)
	show := &cobra.Command{
		Use:   "show TYPE",
		Short: "Show a workflow definition (JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				d, err := b.Workflow(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return a.emitRecord(d)
			})
		},
	}
	outputVarDefault(show.Flags(), outJSON, nil)
	cmd.AddCommand(add, list, show, a.workflowStartCommand(), a.workflowRecordsCommand(), a.workflowRecordCommand(), a.workflowCancelCommand())
	return cmd
}

// nonNil prints an empty list as [] rather than null.
func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

func (a *app) workflowStartCommand() *cobra.Command {
	var key, state, context string
	start := &cobra.Command{
		Use:   "start TYPE --key K [--state S] [--context JSON]",
		Short: "Start a workflow record (or print the existing one of that key)",
		Example: `  packrun workflows start goal-loop --key ticket-7 --context '{"goal":"ship the docs"}'
  packrun workflows start goal-loop --key ticket-7 --context @ctx.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return usageError("workflows start needs --key")
			}
			st := host.WorkflowStart{WorkflowType: args[0], InstanceKey: key, State: state}
			if context != "" {
				c, err := a.readJSON("--context", context)
				if err != nil {
					return err
				}
				st.Context = c
			}
			return a.withBackend(cmd, readWrite, func(b host.Backend) error {
				if _, err := b.Workflow(cmd.Context(), st.WorkflowType); err != nil {
					return err
				}
				r, created, err := b.StartWorkflow(cmd.Context(), st)
				if err != nil {
					return err
				}
				what := "started"
				if !created {
					what = "exists"
				}
				fmt.Fprintf(a.stdout, "%s %s: %s in state %s\n", r.WorkflowID, what, r.Status, r.CurrentState)
				return nil
			})
		},
	}
	start.Flags().StringVar(&key, "key", "", "instance_key: one record per workflow type and key")
	start.Flags().StringVar(&state, "state", "", "state to start in (default: the definition's initial_state)")
	start.Flags().StringVar(&context, "context", "", "context JSON object (the payload of its tasks), @FILE or @-")
	return start
}

func (a *app) workflowRecordsCommand() *cobra.Command {
	var typ string
	var limit int
	var asJSON bool
	records := &cobra.Command{
		Use:   "records [--type T] [--limit N] [--output F]",
		Short: "List workflow records, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageError("--limit %d: must be at least 1", limit)
			}
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				all, err := b.ListWorkflowRecords(cmd.Context(), host.WorkflowRecordFilter{Tenant: host.DefaultTenant, WorkflowType: typ, Limit: limit})
				if err != nil || asJSON {
					return orJSON(a, nonNil(all), err)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RECORD\tWORKFLOW\tKEY\tSTATE\tSTATUS\tUPDATED")
				for _, r := range all {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.WorkflowID, r.WorkflowType, r.InstanceKey, r.CurrentState, r.Status, host.FormatTime(r.UpdatedAt))
				}
				return tw.Flush()
			})
		},
	}
	records.Flags().StringVar(&typ, "type", "", "only records of this workflow type")
	records.Flags().IntVar(&limit, "limit", 100, "at most this many")
	outputVar(records.Flags(), &asJSON)
	return records
}

func (a *app) workflowRecordCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "record RECORD_ID",
		Short: "Show one workflow record (JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				r, err := b.WorkflowRecord(cmd.Context(), host.DefaultTenant, args[0])
				return orJSON(a, r, err)
			})
		},
	}
}

func (a *app) workflowCancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RECORD_ID",
		Short: "Cancel an active or blocked workflow record (its tasks are not touched)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readWrite, func(b host.Backend) error {
				r, err := b.CancelWorkflowRecord(cmd.Context(), host.DefaultTenant, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s: %s in state %s\n", r.WorkflowID, r.Status, r.CurrentState)
				return nil
			})
		},
	}
}
