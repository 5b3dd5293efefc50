package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// noHome marks a command that runs with no home at all (the auditor's
// `evidence check`): the root's setup does not look for one.
const noHome = "packrun.no-home"

// logCheckpointJSON is what `evidence checkpoint --json` prints.
type logCheckpointJSON struct {
	Size        uint64 `json:"size"`
	Root        []byte `json:"root"`
	Note        string `json:"note"`
	VerifierKey string `json:"verifier_key"`
}

func (a *app) logCheckpointCommand() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "checkpoint [-o FILE] [--json]",
		Short: "Print (or write) the evidence log's newest signed checkpoint",
		Long: `Print the newest checkpoint of this home's evidence log: a C2SP tlog-checkpoint (the
log's origin, its size and root hash) signed with the host key as a C2SP signed note.
With -o FILE, write it there instead. Keep it somewhere the home's owner cannot change:
later, 'packrun evidence verify --checkpoint FILE' proves the log only grew since, and an
auditor checks a bundle against it with 'packrun evidence check'. --json adds the size,
root and the log's verifier key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				cp, err := h.LogCheckpoint(cmd.Context())
				if err != nil {
					return err
				}
				if out != "" {
					if err := os.WriteFile(out, []byte(cp.Note), 0o644); err != nil {
						return err
					}
				}
				if asJSON {
					vkey, err := h.LogVerifierKey()
					if err != nil {
						return err
					}
					return a.emit(logCheckpointJSON{Size: cp.Size, Root: cp.Root, Note: cp.Note, VerifierKey: vkey})
				}
				if out != "" {
					fmt.Fprintln(a.stdout, out)
					return nil
				}
				_, err = fmt.Fprint(a.stdout, cp.Note)
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the signed note to this file")
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

// readSaved reads a saved checkpoint file.
func readSaved(path string) ([]byte, error) {
	return packrun.ReadFile(path, tlog.MaxCheckpointBytes)
}

func (a *app) logProveCommand() *cobra.Command {
	var out, since string
	var size uint64
	cmd := &cobra.Command{
		Use:   "prove ATTEMPT|SEQ [--size N] [--since-checkpoint FILE] [-o FILE]",
		Short: "Write the inclusion proof bundle of an attempt or an event in the evidence log",
		Long: `Write the proof that an attempt (by id) or an event (by seq) is in this home's evidence
log: its entry, index, inclusion proof and the signed checkpoint it was proven against
(the newest, or the one of --size N), and the log's verifier key. With --since-checkpoint FILE (an
older checkpoint, an auditor's), the bundle also carries the consistency proof from it.
'packrun evidence check BUNDLE --checkpoint FILE' verifies it offline.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var saved []byte
			if since != "" {
				var err error
				if saved, err = readSaved(since); err != nil {
					return err
				}
			}
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				b, err := h.ProveEntry(cmd.Context(), args[0], size)
				if err != nil {
					return err
				}
				if saved != nil {
					if err := h.ProveSince(cmd.Context(), b, saved); err != nil {
						return withCode(exitRefused, fmt.Errorf("%s: %w", since, err))
					}
				}
				data, err := json.MarshalIndent(b, "", "  ")
				if err != nil {
					return err
				}
				data = append(data, '\n')
				if out == "" {
					_, err := a.stdout.Write(data)
					return err
				}
				if err := os.WriteFile(out, data, 0o644); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, out)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the bundle to this file (default: standard output)")
	cmd.Flags().StringVar(&since, "since-checkpoint", "", "add the consistency proof from this older checkpoint file")
	cmd.Flags().Uint64Var(&size, "size", 0, "prove against the checkpoint of this log size (default: the newest)")
	return cmd
}

func (a *app) logConsistencyCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "consistency OLD NEW",
		Short: "Prove and check that the evidence log grew only by appending between two checkpoints",
		Long: `Prove that this home's evidence log of checkpoint OLD is a prefix of the log of
checkpoint NEW, and check the proof. OLD and NEW are checkpoint files (as 'packrun
evidence checkpoint -o' writes them) or log sizes. A checkpoint not signed by this log's
key, or a log that did not only grow, exits 5 naming what differs.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				ctx := cmd.Context()
				vkey, err := h.LogVerifierKey()
				if err != nil {
					return err
				}
				notes := make([][]byte, 2)
				sizes := make([]uint64, 2)
				for i, arg := range args {
					if n, err := strconv.ParseUint(arg, 10, 64); err == nil {
						sizes[i] = n
						continue
					}
					if notes[i], err = readSaved(arg); err != nil {
						return err
					}
					cp, err := tlog.OpenCheckpoint(notes[i], vkey)
					if err != nil {
						return withCode(exitRefused, fmt.Errorf("%s: %w", arg, err))
					}
					sizes[i] = cp.Size
				}
				if sizes[0] > sizes[1] {
					return withCode(exitRefused, fmt.Errorf("%s has size %d, larger than %s's %d: the log cannot have shrunk", args[0], sizes[0], args[1], sizes[1]))
				}
				p, err := h.LogConsistency(ctx, sizes[0], sizes[1])
				if err != nil {
					if notes[0] != nil || notes[1] != nil {
						return withCode(exitRefused, fmt.Errorf("the log has no consistency proof from size %d to %d (%v): it is not the log the checkpoints signed", sizes[0], sizes[1], err))
					}
					return err
				}
				if notes[0] != nil {
					p.Old = string(notes[0])
				}
				if notes[1] != nil {
					p.New = string(notes[1])
				}
				old, cur, err := tlog.CheckConsistency([]byte(p.Old), []byte(p.New), p.Proof, vkey)
				if err != nil {
					return withCode(exitRefused, fmt.Errorf("evidence log diverged: %w", err))
				}
				if asJSON {
					return a.emit(p)
				}
				fmt.Fprintf(a.stdout, "consistent: the log of size %d is a prefix of the log of size %d (%d proof hashes)\n", old.Size, cur.Size, len(p.Proof))
				for _, h := range p.Proof {
					fmt.Fprintf(a.stdout, "  %x\n", h)
				}
				return nil
			})
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

func (a *app) logCheckCommand() *cobra.Command {
	var saved, key string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check BUNDLE --checkpoint FILE [--key VKEY]",
		Short: "Verify a proof bundle offline against a checkpoint you saved (the auditor's command)",
		Long: `Verify, offline and with nothing else (no home, no store), that the entry of BUNDLE is
in the evidence log and that the log only grew since the checkpoint you saved in FILE.
BUNDLE is an attempt bundle ('packrun evidence export ... --since-checkpoint FILE') or a proof
bundle ('packrun evidence prove ... --since-checkpoint FILE'). It checks the signature of the
checkpoint in FILE, the bundle's inclusion proof against the bundle's checkpoint, the
consistency proof the bundle carries from FILE's checkpoint to its own and, for an
attempt bundle, that the attempt's record (and its events, artifacts and seal) hashes
to the proven entry.

Whose log: pass the log's verifier key with --key VKEY ('packrun evidence checkpoint
--json' prints it). Without --key, the key the bundle names is trusted only because it
verifies the signature of your own saved checkpoint, which you took from the log: a key
that signs it is the log's key. Exit 0 when every check holds, 5 with one line naming
the one that failed.`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{noHome: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if saved == "" {
				return usageError("evidence check needs --checkpoint FILE (a checkpoint you saved from the log)")
			}
			note, err := readSaved(saved)
			if err != nil {
				return err
			}
			data, err := packrun.ReadFile(args[0], packrun.MaxBundleBytes)
			if err != nil {
				return err
			}
			refuse := func(err error) error { return withCode(exitRefused, fmt.Errorf("%s: %w", args[0], err)) }
			var probe struct {
				Format string `json:"format"`
			}
			_ = json.Unmarshal(data, &probe) // only a hint: a bundle or a proof is decoded strictly below
			rep := checkReport{OK: true}
			var lb *tlog.Bundle
			var cur, old *tlog.Checkpoint
			if probe.Format != "" {
				b, err := packrun.VerifyBundle(data)
				if err != nil {
					return refuse(err)
				}
				if lb, cur, old, err = packrun.CheckBundleLog(b, note, key); err != nil {
					return refuse(err)
				}
				rep.Attempt = b.Attempt.AttemptID
			} else {
				if lb, err = tlog.DecodeBundle(data); err != nil {
					return refuse(err)
				}
				if cur, old, err = tlog.CheckSince(lb, note, key); err != nil {
					return refuse(err)
				}
			}
			rep.Entry, rep.Size, rep.Root, rep.SavedSize = lb.Index+1, cur.Size, cur.Root, old.Size
			rep.VerifierKey, rep.KeyGiven = key, key != ""
			if key == "" {
				rep.VerifierKey = lb.VerifierKey
			}
			if asJSON {
				return a.emit(rep)
			}
			what := fmt.Sprintf("entry %d", rep.Entry)
			if rep.Attempt != "" {
				what = fmt.Sprintf("attempt %s (entry %d)", rep.Attempt, rep.Entry)
			}
			fmt.Fprintf(a.stdout, "ok: %s is in the log of size %d, which only grew since your checkpoint of size %d\n", what, rep.Size, rep.SavedSize)
			trust := "it signs your saved checkpoint"
			if rep.KeyGiven {
				trust = "given with --key"
			}
			fmt.Fprintf(a.stdout, "log key %s (%s)\n", rep.VerifierKey, trust)
			return nil
		},
	}
	cmd.Flags().StringVar(&saved, "checkpoint", "", "a checkpoint of the log you saved earlier (required)")
	cmd.Flags().StringVar(&key, "key", "", "the log's verifier key (default: the bundle's, if it verifies your checkpoint)")
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

// checkReport is what `evidence check --json` prints.
type checkReport struct {
	OK          bool   `json:"ok"`
	Attempt     string `json:"attempt,omitempty"`
	Entry       uint64 `json:"entry"` // the entry's seq (index + 1)
	Size        uint64 `json:"size"`
	Root        []byte `json:"root"`
	SavedSize   uint64 `json:"saved_size"`
	VerifierKey string `json:"verifier_key"`
	KeyGiven    bool   `json:"key_given"`
}

// verifyAgainstCheckpoint is `evidence verify --checkpoint FILE`.
func (a *app) verifyAgainstCheckpoint(cmd *cobra.Command, path string, asJSON bool) error {
	note, err := readSaved(path)
	if err != nil {
		return err
	}
	return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
		old, cur, err := h.CheckLog(cmd.Context(), note)
		if errors.Is(err, packrun.ErrLogDiverged) {
			return withCode(exitRefused, fmt.Errorf("%s: %w", path, err))
		}
		if err != nil {
			return err
		}
		if asJSON {
			return a.emit(struct {
				OK        bool   `json:"ok"`
				Size      uint64 `json:"size"`
				SavedSize uint64 `json:"saved_size"`
			}{true, cur.Size, old.Size})
		}
		fmt.Fprintf(a.stdout, "evidence log consistent: %d entries, its first %d the ones the checkpoint in %s signed\n", cur.Size, old.Size, path)
		return nil
	})
}
