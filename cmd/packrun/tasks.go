package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

func (a *app) tasksCommand() *cobra.Command {
	tasks := &cobra.Command{Use: "tasks", Short: "Enqueue, list, show, cancel, resume and retry tasks"}
	var taskType, input, source, adapterID, model, profileID string
	var skillIDs []string
	var priority, maxAttempts int
	var delay time.Duration
	enqueue := &cobra.Command{
		Use:   "enqueue --type T --input JSON [--priority N] [--delay 5m] [--max-attempts N] [--skill ID]... [--adapter ID] [--model M] [--profile ID]",
		Short: "Add a task to the queue (served by the installed pack whose manifest lists the task type)",
		Example: `  packrun tasks enqueue --type hello.c --input '{"name":"Ada"}' --priority 1 --delay 5m
  packrun tasks enqueue --type review --input @task.json --adapter codex --model gpt-5-mini --profile reviewer --skill code.review`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if taskType == "" {
				return usageError("tasks enqueue needs --type")
			}
			if delay < 0 {
				return usageError("--delay %s: must not be negative", delay)
			}
			if cmd.Flags().Changed("max-attempts") && maxAttempts < 1 {
				return usageError("--max-attempts %d: must be at least 1", maxAttempts)
			}
			payload, err := a.readInput(input)
			if err != nil {
				return err
			}
			intent := host.TaskIntent{TaskType: taskType, Source: source, Payload: payload, SkillIDs: skillIDs,
				RequestedAdapterID: adapterID, RequestedModel: model, RequestedProfileID: profileID}
			if cmd.Flags().Changed("priority") {
				intent.Priority = host.Priority(priority)
			}
			if delay > 0 {
				intent.AvailableAt = time.Now().Add(delay).UTC().Format(time.RFC3339Nano)
			}
			return a.withHost(cmd, readWrite, func(h *packrun.Host) error {
				// As the API does: a task nothing serves, or one naming an
				// unknown skill, adapter, profile or model, is refused,
				// not queued to fail.
				t, err := h.Enqueue(cmd.Context(), intent, host.EnqueueOptions{MaxAttempts: maxAttempts})
				if err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, t.TaskID)
				return nil
			})
		},
	}
	enqueue.Flags().StringVar(&taskType, "type", "", "task type")
	enqueue.Flags().StringVar(&input, "input", "{}", "payload JSON object, @FILE or @-")
	enqueue.Flags().StringVar(&source, "source", "operator", "who asks")
	enqueue.Flags().IntVar(&priority, "priority", 5, "queue priority (lower runs first)")
	durationVar(enqueue.Flags(), &delay, "delay", 0, "do not run before this delay, e.g. 5m")
	enqueue.Flags().IntVar(&maxAttempts, "max-attempts", 0, "attempts before a retryable failure becomes permanent (default 3)")
	enqueue.Flags().StringArrayVar(&skillIDs, "skill", nil, "skill_ids: an installed skill the task uses (repeatable)")
	enqueue.Flags().StringVar(&adapterID, "adapter", "", "requested_adapter_id: a configured adapter")
	enqueue.Flags().StringVar(&model, "model", "", "requested_model: a model that adapter offers")
	enqueue.Flags().StringVar(&profileID, "profile", "", "requested_profile_id: a registered profile")

	var status, listType, listTenant, cursor string
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--status S] [--type T] [--tenant T] [--cursor C] [--limit N] [--output F]",
		Short: "List tasks, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status != "" && !host.TaskStatus(status).Valid() {
				return usageError("--status %q: want pending, running, completed, retryable_failure, permanent_failure, blocked or operator_canceled", status)
			}
			if limit < 1 {
				return usageError("--limit %d: must be at least 1", limit)
			}
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				ts, err := b.ListTasks(cmd.Context(), host.TaskFilter{Status: host.TaskStatus(status), TaskType: listType, Tenant: listTenant, After: cursor, Limit: limit})
				if err != nil {
					return err
				}
				next := ""
				if len(ts) == limit {
					next = ts[len(ts)-1].TaskID
				}
				defer a.more(next)
				if asJSON {
					if ts == nil {
						ts = []*host.TaskRecord{}
					}
					return a.emit(ts)
				}
				w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TASK\tTYPE\tSTATUS\tPRIORITY\tATTEMPTS\tUPDATED")
				for _, t := range ts {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d/%d\t%s\n", t.TaskID, t.TaskType, t.Status, t.Priority, t.AttemptCount, t.MaxAttempts, t.UpdatedAt.Local().Format(time.DateTime))
				}
				return w.Flush()
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "only tasks with this status")
	list.Flags().StringVar(&listType, "type", "", "only tasks of this task type")
	list.Flags().StringVar(&listTenant, "tenant", "", "only tasks of this tenant")
	cursorVar(list.Flags(), &cursor)
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	outputVar(list.Flags(), &asJSON)

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one task (JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				t, err := b.Task(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return a.emitRecord(t)
			})
		},
	}
	outputVarDefault(show.Flags(), outJSON, nil)
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task (a running one is canceled when its attempt ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				t, err := b.Cancel(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if t.CancelRequested && t.Status == host.TaskRunning {
					fmt.Fprintf(a.stdout, "%s: cancel requested (running)\n", t.TaskID)
				} else {
					fmt.Fprintf(a.stdout, "%s: %s\n", t.TaskID, t.Status)
				}
				return nil
			})
		},
	}
	var value string
	resume := &cobra.Command{
		Use:   "resume ID --value JSON",
		Short: "Resume a task its node suspended (openwop_interrupt), with the value the interrupt returns",
		Long: `Resume a blocked task whose node suspended with openwop_interrupt. The task goes back to
pending with the value added to its resume values; its next attempt re-runs the node, whose
successive openwop_interrupt calls return the task's resume values in order (so a node that
interrupts twice is resumed twice). A task with no attempts left gets one more.`,
		Example: `  packrun tasks resume task_01J... --value '{"approved":true}'
  packrun tasks resume task_01J... --value @answer.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("value") {
				return usageError("tasks resume needs --value JSON (null is a value)")
			}
			v, err := a.readJSON("--value", value)
			if err != nil {
				return err
			}
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				t, err := b.Resume(cmd.Context(), args[0], v, cliUser())
				return a.printControl(t, err)
			})
		},
	}
	resume.Flags().StringVar(&value, "value", "", "the JSON value (or @FILE, @-) openwop_interrupt returns")
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Queue a failed or blocked task again for a new attempt",
		Long: `Queue a permanent_failure, retryable_failure or blocked task again, available at once,
for a new attempt. A task that used all its attempts gets one more (max_attempts grows by
one), so a retryable failure of that attempt is permanent again.`,
		Example: `  packrun tasks retry task_01J...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				t, err := b.Retry(cmd.Context(), args[0], cliUser())
				return a.printControl(t, err)
			})
		},
	}
	tasks.AddCommand(enqueue, list, show, cancel, resume, retry)
	return tasks
}

// printControl prints the outcome of resume or retry; refused (the task is
// in another status: host.ErrConflict) exits 5.
func (a *app) printControl(t *host.TaskRecord, err error) error {
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s: %s (attempt %d of %d next)\n", t.TaskID, t.Status, t.AttemptCount+1, t.MaxAttempts)
	return nil
}

// cliUser names the operator in the events of a control: "cli:<login>".
func cliUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli:uid-" + strconv.Itoa(os.Getuid())
}

// attemptsPage is how many attempts `attempts list` reads at a time.
var attemptsPage = 256

func (a *app) attemptsCommand() *cobra.Command {
	attempts := &cobra.Command{Use: "attempts", Short: "Inspect recorded attempts (evidence)"}
	var taskID, pack, tenant, attCursor string
	var since time.Time
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--task ID] [--pack NAME] [--tenant T] [--since 24h|RFC3339] [--json]",
		Short: "List recorded attempts, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageError("--limit %d: must be at least 1", limit)
			}
			f := host.AttemptFilter{TaskID: taskID, Pack: pack, Tenant: tenant, Limit: limit, Since: since}
			var err error
			if f.BeforeSeq, err = seqCursor(attCursor); err != nil {
				return err
			}
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				// A page at a time, printed as it comes: memory stays flat
				// however many attempts --limit asks for.
				var w *tabwriter.Writer
				lines := a.output() == outJSONL
				if asJSON && !lines {
					fmt.Fprint(a.stdout, "[")
				} else if !asJSON {
					w = tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
					fmt.Fprintln(w, "ATTEMPT\tTASK\tPACK\tNODE\tOUTCOME\tSTARTED")
				}
				n := 0
				next := ""
				defer func() { a.more(next) }()
				for left := limit; left > 0; {
					f.Limit = min(left, attemptsPage)
					page, err := b.ListAttempts(cmd.Context(), f)
					if err != nil {
						return err
					}
					for _, at := range page {
						if asJSON {
							raw, err := json.Marshal(at.Document())
							if err != nil {
								return err
							}
							switch {
							case lines:
								fmt.Fprintf(a.stdout, "%s\n", raw)
							case n > 0:
								fmt.Fprintf(a.stdout, ",\n%s", raw)
							default:
								fmt.Fprintf(a.stdout, "\n%s", raw)
							}
						} else {
							fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", at.AttemptID, orDash(at.TaskID), orDash(at.Pack), at.Node, at.Outcome, at.StartedAt.Local().Format(time.DateTime))
						}
						n++
					}
					if w != nil {
						// Columns are sized per page.
						if err := w.Flush(); err != nil {
							return err
						}
					}
					left -= len(page)
					if len(page) < f.Limit {
						break
					}
					f.BeforeSeq = page[len(page)-1].EventSeq
					if left == 0 {
						next = strconv.FormatInt(f.BeforeSeq, 10)
					}
				}
				if asJSON && !lines {
					_, err := fmt.Fprint(a.stdout, "\n]\n")
					return err
				}
				return nil
			})
		},
	}
	list.Flags().StringVar(&taskID, "task", "", "only attempts of this task")
	list.Flags().StringVar(&pack, "pack", "", "only attempts of this pack (name or name@version)")
	list.Flags().StringVar(&tenant, "tenant", "", "only attempts of this tenant")
	cursorVar(list.Flags(), &attCursor)
	sinceVar(list.Flags(), &since, "only attempts started since")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many")
	outputVar(list.Flags(), &asJSON)
	var showJSON bool
	show := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one attempt: input, output, outcome, logs, events, trace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(cmd, readOnly, func(b host.Backend) error {
				at, err := b.Attempt(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if showJSON {
					return a.emit(at.Document())
				}
				w := a.stdout
				fmt.Fprintf(w, "attempt:  %s\ntask:     %s\npack:     %s (module sha256 %s)\nnode:     %s\noutcome:  %s (exit %s, retry %s)\n",
					at.AttemptID, orDash(at.TaskID), orDash(at.Pack), at.ModuleSHA256, at.Node, at.Outcome, at.ExitStatus, at.RetryClass)
				if at.Error != nil {
					fmt.Fprintf(w, "error:    %s\n", at.Error)
				}
				fmt.Fprintf(w, "input:    %s\noutput:   %s\n", at.Input, orDash(string(at.Output)))
				fmt.Fprintf(w, "time:     %s .. %s (%s)\n", at.StartedAt.Format(time.RFC3339Nano), at.EndedAt.Format(time.RFC3339Nano), at.EndedAt.Sub(at.StartedAt))
				var trace []json.RawMessage
				_ = json.Unmarshal(at.Trace, &trace) // a summary line: the trace's integrity is evidence verify's (its hash)
				fmt.Fprintf(w, "trace:    %d host calls\n", len(trace))
				printHTTPCalls(w, at.Trace)
				fmt.Fprintf(w, "hash:     %s\n", at.ContentHash)
				return nil
			})
		},
	}
	outputVar(show.Flags(), &showJSON)
	attempts.AddCommand(list, show)
	return attempts
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) evidenceCommand() *cobra.Command {
	ev := &cobra.Command{Use: "evidence", Short: "Verify and export the tamper-evident evidence log"}
	var asJSON bool
	var bundlePath, headFlag, checkpointPath string
	var seals sealFlags
	verify := &cobra.Command{
		Use:   "verify [--json] [--bundle FILE]",
		Short: "Walk the evidence hash chain and report the first broken link, or check an exported bundle",
		Long: `Walk the evidence hash chain of this home's store and report the first broken link.

With --bundle FILE, check a bundle written by 'packrun evidence export' instead: the
attempt's content hash, every event's hash, the event that chains the attempt, and every
artifact's digest. If this home's store holds the same attempt, the bundle must also match
what the store recorded (its attempt and its events, hash for hash). Every bundle is
sealed by the host that exported it (an Ed25519 signature with its host key, so an edit
cannot be hidden by recomputing the hashes); the seal must be by this host's key or one
passed with --host-key (with neither, as on a machine without a store, any host's seal is
accepted and its key printed). A bundle that fails any check exits 5.

The chain alone cannot show that its newest events were not removed together. The store
anchors its head after each commit in evidence-head.json, signed with the host key
(host.key, or $PACKRUN_HOST_KEY_FILE: keep it apart from the database), and verify
checks the chain against it. Once anchored, a home whose checkpoint is missing, damaged or
not signed by the host key, or whose host key is missing or replaced, refuses to open (exit
5, naming the file) until 'packrun evidence reanchor' is run. For an anchor no one with access
to the home can move, record the "head SEQ:HASH" line printed here somewhere else and
pass it later with --head. A broken chain exits 5.

With --checkpoint FILE (a checkpoint of the evidence log saved earlier, anywhere, by
'packrun evidence checkpoint -o FILE'), prove instead that the current log is consistent
with it: it exits 5 naming where it diverges (fewer entries than the checkpoint's, other
entries under its size, or a checkpoint not signed by this log's key).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bundlePath != "" {
				return a.verifyBundle(cmd.Context(), bundlePath, seals.policy(), asJSON)
			}
			if checkpointPath != "" {
				return a.verifyAgainstCheckpoint(cmd, checkpointPath, asJSON)
			}
			var pin *host.ChainHead
			if headFlag != "" {
				var err error
				if pin, err = packrun.ParseHead(headFlag); err != nil {
					return err
				}
			}
			// A walk allocates each row it reads and keeps a few chunks:
			// collecting at four times Go's default heap growth (unless
			// GOGC says otherwise) spends ≈ 20 % less CPU for a few MB
			// more at peak (BENCHMARKS.md).
			if os.Getenv("GOGC") == "" {
				defer debug.SetGCPercent(debug.SetGCPercent(400))
			}
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				r, err := h.VerifyChain(cmd.Context(), pin)
				if err != nil {
					return err
				}
				if asJSON {
					if err := a.emit(r); err != nil {
						return err
					}
				} else if r.OK {
					fmt.Fprintf(a.stdout, "evidence intact: %d events, %d attempts, %d artifacts\nhead %d:%s\n", r.Events, r.Attempts, r.Artifacts, r.HeadSeq, r.Head)
					switch {
					case r.Checkpoint != nil:
						fmt.Fprintf(a.stdout, "checked against the host's signed checkpoint of event %d (%s)\n", r.Checkpoint.Seq, r.Checkpoint.Time.Format(time.RFC3339))
					case r.Events > 0:
						fmt.Fprintln(a.stdout, "no signed head checkpoint: events removed from the end of the chain would not show")
					}
					if pin != nil {
						fmt.Fprintf(a.stdout, "holds the pinned head %d:%.12s…\n", pin.Seq, pin.Hash)
					}
					if key, err := h.HostKey(); err == nil && key != "" {
						fmt.Fprintf(a.stdout, "host key %s (seals its checkpoints, traces and bundles)\n", key)
					}
				}
				if !r.OK {
					return withCode(exitRefused, fmt.Errorf("evidence chain broken at seq %d: %s", r.Broken.Seq, brokenText(r.Broken)))
				}
				return nil
			})
		},
	}
	outputVar(verify.Flags(), &asJSON)
	verify.Flags().StringVar(&headFlag, "head", "", "also check that the chain holds this head, SEQ:HASH, recorded earlier (as printed here)")
	verify.Flags().StringVar(&bundlePath, "bundle", "", "check this exported bundle instead of the store's chain")
	verify.Flags().StringVar(&checkpointPath, "checkpoint", "", "instead, prove the evidence log only grew since this saved checkpoint (exit 5 naming where it diverges)")
	seals.register(verify, "bundle")
	var out, since string
	export := &cobra.Command{
		Use:   "export ATTEMPT -o FILE [--since-checkpoint FILE]",
		Short: "Write a self-contained JSON bundle of an attempt, its trace, artifacts and events",
		Long: `Write a self-contained JSON bundle of an attempt: its record, trace, artifacts and
events, sealed with the host key, and the proof that the attempt is in the evidence log
(its inclusion proof and the signed checkpoint it was proven against). With --since-checkpoint FILE
(an auditor's older checkpoint) it also carries the consistency proof from it, so that
'packrun evidence check BUNDLE --checkpoint FILE' verifies it offline.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError("evidence export needs -o FILE")
			}
			var saved []byte
			if since != "" {
				var err error
				if saved, err = readSaved(since); err != nil {
					return err
				}
			}
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				bundle, err := h.ExportBundle(cmd.Context(), args[0], saved)
				if err != nil {
					if since != "" && errors.Is(err, host.ErrValidation) {
						return withCode(exitRefused, fmt.Errorf("%s: %w", since, err))
					}
					return err
				}
				data, err := json.MarshalIndent(bundle, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, out)
				return nil
			})
		},
	}
	export.Flags().StringVarP(&out, "out", "o", "", "output file")
	export.Flags().StringVar(&since, "since-checkpoint", "", "add the consistency proof from this older checkpoint of the log (an auditor's)")
	ev.AddCommand(verify, export, a.reanchorCommand(), a.rotateKeyCommand(),
		a.logCheckpointCommand(), a.logProveCommand(), a.logConsistencyCommand(), a.logCheckCommand())
	return ev
}

func (a *app) reanchorCommand() *cobra.Command {
	return a.anchorCommand("reanchor --reason \"...\"",
		"Anchor the evidence chain anew after its checkpoint or host key was lost (recorded in the chain)",
		`Anchor the evidence chain at its current head with the current host key.

Once a home has anchored its chain, it refuses to open (every command, serve included;
exit 5) when its signed head checkpoint (evidence-head.json) is missing, damaged or not
signed by the host key, or when the host key is missing or not the one the chain is
anchored with. Nothing re-creates them silently: find out why, then run this command.
It appends an evidence_reanchored event recording your reason, what was wrong, the old
checkpoint's head and key and the new key, and anchors the chain at that event (a
missing host key is created). Events removed before it stay undetectable by this home's
checkpoint: compare the old head it records with one you kept elsewhere.`,
		"why the chain is re-anchored (required; recorded in the chain)", packrun.Reanchor)
}

func (a *app) rotateKeyCommand() *cobra.Command {
	return a.anchorCommand("rotate-key --reason \"...\"",
		"Replace the host key; the old key signs the hand-over (recorded in the chain)",
		`Replace the host key that signs the evidence head checkpoint and seals exports.

The anchor must be sound. A new key is written to the host key file; the old one is kept
beside it as <file>.retired-<first 16 hex digits> (bundles and traces it sealed verify
with --host-key and its public key). The old key signs a hand-over to the new one, which
a host_key_rotated event records with both keys and your reason; the chain is anchored
at that event with the new key.`,
		"why the key is rotated (required; recorded in the chain)", packrun.RotateHostKey)
}

// anchorCommand is an operator action on the chain's anchor (reanchor,
// rotate-key): it takes a required reason, recorded in the chain.
func (a *app) anchorCommand(use, short, long, reasonHelp string,
	do func(context.Context, string, packrun.Config, string) (*packrun.Reanchoring, error)) *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := do(cmd.Context(), a.home, a.config(), reason)
			if err != nil {
				return err
			}
			return a.printReanchoring(r, asJSON)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", reasonHelp)
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

// printReanchoring prints what reanchor or rotate-key did.
func (a *app) printReanchoring(r *packrun.Reanchoring, asJSON bool) error {
	if asJSON {
		return a.emit(r)
	}
	b := r.Before
	if b.Problem != "" {
		fmt.Fprintf(a.stdout, "was:         %s\n", b.Problem)
	}
	if b.Checkpoint != nil {
		fmt.Fprintf(a.stdout, "old anchor:  event %d (%.12s…) signed by %.16s…\n", b.Checkpoint.Seq, b.Checkpoint.Hash, b.CheckpointKey)
	} else {
		fmt.Fprintln(a.stdout, "old anchor:  none readable")
	}
	fmt.Fprintf(a.stdout, "anchored:    event %d (%s), %s\nhost key:    %s\n", r.Event.Seq, r.Event.Type, r.Event.Hash, r.HostKey)
	if r.RetiredKeyFile != "" {
		fmt.Fprintf(a.stdout, "old key in:  %s\n", r.RetiredKeyFile)
	}
	return nil
}

// bundleReport is what `evidence verify --bundle --json` prints.
type bundleReport struct {
	OK        bool   `json:"ok"`
	Attempt   string `json:"attempt"`
	Events    int    `json:"events"`
	Artifacts int    `json:"artifacts"`
	// InStore: this home's store holds the attempt, and the bundle matches
	// its record.
	InStore bool `json:"in_store"`
	// SealedBy is the host key that sealed the bundle ("" if unsealed and
	// allowed); Trusted, whether it was checked against a trusted key.
	SealedBy string `json:"sealed_by"`
	Trusted  bool   `json:"trusted"`
}

// verifyBundle checks an exported bundle on its own and, when this home's
// store holds its attempt, against the store's record.
func (a *app) verifyBundle(ctx context.Context, path string, p packrun.SealPolicy, asJSON bool) error {
	data, err := packrun.ReadFile(path, packrun.MaxBundleBytes)
	if err != nil {
		return err
	}
	refuse := func(err error) error { return withCode(exitRefused, fmt.Errorf("%s: %w", path, err)) }
	b, err := packrun.VerifyBundle(data)
	if err != nil {
		return refuse(err)
	}
	rep := bundleReport{OK: true, Attempt: b.Attempt.AttemptID, Events: len(b.Events), Artifacts: len(b.Artifacts)}
	trusted := p.HostKeys
	if _, err := os.Stat(filepath.Join(a.home, "packrun.db")); err == nil {
		h, err := a.open(ctx, readOnly, packrun.Config{})
		if err != nil {
			return err
		}
		defer h.Close(context.Background())
		if trusted, err = h.TrustedKeys(p); err != nil {
			return err
		}
		rep.InStore, err = h.BundleMatches(ctx, b)
		if err != nil {
			return refuse(err)
		}
	}
	// With no key to expect (no store here, no --host-key), any host's
	// seal is accepted, and whose it is printed.
	p.AnyHostKey = len(trusted) == 0
	if err := packrun.CheckBundleSeal(b, trusted, p); err != nil {
		return refuse(err)
	}
	if b.Seal != nil {
		rep.SealedBy, rep.Trusted = b.Seal.HostKey, !p.AnyHostKey
	}
	if asJSON {
		return a.emit(rep)
	}
	where := "checked on its own (this store does not hold the attempt)"
	if rep.InStore {
		where = "matches this store's record"
	}
	fmt.Fprintf(a.stdout, "bundle intact: attempt %s, %d events, %d artifacts; %s\n", rep.Attempt, rep.Events, rep.Artifacts, where)
	switch {
	case rep.SealedBy == "":
		fmt.Fprintln(a.stdout, "not sealed (accepted with --allow-unsealed): an edit with its hashes recomputed would not show")
	case rep.Trusted:
		fmt.Fprintf(a.stdout, "sealed by host key %.16s…, a trusted key\n", rep.SealedBy)
	default:
		fmt.Fprintf(a.stdout, "sealed by host key %s: pass --host-key with the key of the host you expect to check who sealed it\n", rep.SealedBy)
	}
	return nil
}

func brokenText(b *host.ChainBreak) string {
	s, _ := json.Marshal(b)
	return strings.Trim(string(s), "{}")
}

func (a *app) memoryCommand() *cobra.Command {
	mem := &cobra.Command{Use: "memory", Short: "Operator access to key-value memory (per tenant and namespace)"}
	var tenant, ns string
	mem.PersistentFlags().StringVar(&tenant, "tenant", "default", "tenant")
	mem.PersistentFlags().StringVar(&ns, "namespace", "", "namespace (required)")
	scope := func() (host.Scope, error) {
		if ns == "" {
			return host.Scope{}, usageError("memory needs --namespace")
		}
		return host.Scope{Tenant: tenant, Namespace: ns}, nil
	}
	with := func(acc access, f func(cmd *cobra.Command, b *hostBackend, s host.Scope, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			s, err := scope()
			if err != nil {
				return err
			}
			return a.withBackend(cmd, acc, func(b host.Backend) error {
				return f(cmd, &hostBackend{b}, s, args)
			})
		}
	}
	get := &cobra.Command{Use: "get KEY", Short: "Print a value", Args: cobra.ExactArgs(1),
		RunE: with(readOnly, func(cmd *cobra.Command, b *hostBackend, s host.Scope, args []string) error {
			e, err := b.Get(cmd.Context(), s, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s\n", e.Value)
			return nil
		})}
	var ttl time.Duration
	var secret bool
	put := &cobra.Command{Use: "put KEY JSON [--ttl 1h] [--secret]", Short: "Store a value", Args: cobra.ExactArgs(2),
		RunE: with(readWrite, func(cmd *cobra.Command, b *hostBackend, s host.Scope, args []string) error {
			if !json.Valid([]byte(args[1])) {
				return usageError("value %q is not JSON (quote strings: '\"text\"')", args[1])
			}
			return b.Put(cmd.Context(), s, args[0], json.RawMessage(args[1]), host.PutOptions{TTL: ttl, Secret: secret})
		})}
	durationVar(put.Flags(), &ttl, "ttl", 0, "expire after this long, e.g. 1h or 30d")
	put.Flags().BoolVar(&secret, "secret", false, "redact this value in evidence and logs")
	list := &cobra.Command{Use: "list [PREFIX]", Short: "List keys", Args: cobra.MaximumNArgs(1),
		RunE: with(readOnly, func(cmd *cobra.Command, b *hostBackend, s host.Scope, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			keys, err := b.List(cmd.Context(), s, prefix)
			if err != nil {
				return err
			}
			if a.output() != outTable {
				return a.emit(append([]string{}, keys...))
			}
			for _, k := range keys {
				fmt.Fprintln(a.stdout, k)
			}
			return nil
		})}
	outputVar(list.Flags(), nil)
	del := &cobra.Command{Use: "delete KEY", Short: "Delete a value", Args: cobra.ExactArgs(1),
		RunE: with(readOnly, func(cmd *cobra.Command, b *hostBackend, s host.Scope, args []string) error {
			return b.Delete(cmd.Context(), s, args[0])
		})}
	mem.AddCommand(get, put, list, del)
	return mem
}

// hostBackend narrows the store to what memory commands use.
type hostBackend struct{ host.Memory }

// printHTTPCalls prints one line per http_request of a trace: the guest's
// request (method and URL, when the trace keeps it verbatim) and what it
// got (the HTTP status, or the refusal).
func printHTTPCalls(w io.Writer, trace []byte) {
	var calls []struct {
		Fn     string `json:"fn"`
		Args   []byte `json:"args"` // as runtime.Call records them
		Status int32  `json:"status"`
		Result []byte `json:"result"`
	}
	if json.Unmarshal(trace, &calls) != nil {
		return
	}
	for _, c := range calls {
		if c.Fn != abi.ModuleHostV1+"."+abi.HostHTTPRequest {
			continue
		}
		var req struct{ Method, URL string }
		what := "(request recorded by digest)"
		if json.Unmarshal(c.Args, &req) == nil && req.URL != "" {
			what = cmp.Or(req.Method, "GET") + " " + req.URL
		}
		var resp struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
			Kind   string `json:"kind"`
		}
		_ = json.Unmarshal(c.Result, &resp) // a summary line: an unreadable result shows as status 0
		got := fmt.Sprintf("HTTP %d, %d bytes", resp.Status, len(c.Result))
		if c.Status != 0 {
			got = fmt.Sprintf("%s: %s", abi.Status(c.Status), cmp.Or(resp.Kind, resp.Error))
		}
		fmt.Fprintf(w, "http_request: %s -> %s\n", what, got)
	}
}
