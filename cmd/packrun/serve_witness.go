package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/api"
	"github.com/packrun/packrun/internal/evidence/witness"
	"github.com/packrun/packrun/internal/observe"
)

// EventWitnessRefused is appended when a witness refuses a checkpoint of
// the evidence log (data: witness, size, error).
const EventWitnessRefused = "witness_refused"

// witnessStateFile is the home's record of what each witness cosigned.
const witnessStateFile = "witness-state.json"

// witnessInterval is how often serve looks for a new checkpoint to send:
// the checkpoints of one second go as one.
const witnessInterval = time.Second

// logSource is a host's evidence log as a witness.Source. Its newest
// checkpoint is sent only when it names the log's origin (the verifier
// key's name): one signed before the log was given its log key (serve
// --log-key) names the host key's origin, and the next integration signs
// one under the log key's.
type logSource struct{ l host.EvidenceLog }

func (s logSource) Checkpoint(ctx context.Context) (uint64, []byte, []byte, error) {
	cp, err := s.l.LogCheckpoint(ctx, 0)
	if errors.Is(err, host.ErrNotFound) {
		return 0, nil, nil, nil
	}
	if err != nil {
		return 0, nil, nil, err
	}
	if cp.Note == "" {
		return 0, nil, nil, errors.New("the evidence log's checkpoints are not signed (no host key)")
	}
	vkey, err := s.l.LogVerifierKey()
	if err != nil {
		return 0, nil, nil, err
	}
	name, _, _ := strings.Cut(vkey, "+")
	if origin, err := witness.Origin([]byte(cp.Note)); err == nil && origin != name {
		return 0, nil, nil, nil
	}
	return cp.Size, cp.Root, []byte(cp.Note), nil
}

func (s logSource) Consistency(ctx context.Context, from, to uint64) ([][]byte, error) {
	p, err := s.l.LogConsistency(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return p.Hashes, nil
}

// witnessing is serve --witness: the publisher, seen by the API and the
// observer.
type witnessing struct{ p *witness.Publisher }

func (w witnessing) Cosigned() []byte { return w.p.Cosigned() }

func (w witnessing) Witnesses() []api.WitnessStatus {
	var out []api.WitnessStatus
	for _, s := range w.p.Status() {
		out = append(out, api.WitnessStatus(s))
	}
	return out
}

func (w witnessing) observed() []observe.WitnessState {
	var out []observe.WitnessState
	for _, s := range w.p.Status() {
		out = append(out, observe.WitnessState(s))
	}
	return out
}

// parseWitnesses reads the --witness flags (URL=VKEY each).
func parseWitnesses(specs []string) ([]witness.Target, error) {
	var targets []witness.Target
	for _, s := range specs {
		t, err := witness.ParseTarget(s)
		if err != nil {
			return nil, withCode(exitUsage, fmt.Errorf("--witness: %w", err))
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// startWitnessing returns the publisher of h's checkpoints to targets
// (nil without any); run it with run.
func (a *app) startWitnessing(h *packrun.Host, targets []witness.Target) (*witnessing, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	p, err := witness.NewPublisher(logSource{h.EvidenceLog()}, targets, filepath.Join(a.home, witnessStateFile), &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	p.OnRefused = func(t witness.Target, err error) {
		// Loud: the log, stderr, and the evidence chain itself.
		a.log.Error("WITNESS REFUSED the evidence log's checkpoint: the log may have been rolled back, rewritten or re-keyed", "witness", t.URL, "error", err)
		fmt.Fprintf(a.stderr, "packrun: WITNESS REFUSED: %v\n", err)
		size := uint64(0)
		if re, ok := errors.AsType[*witness.RefusalError](err); ok {
			size = re.Size
		}
		data, _ := json.Marshal(map[string]any{"witness": t.URL, "size": size, "error": err.Error()})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, aerr := h.Store().AppendEvent(ctx, host.Event{Type: EventWitnessRefused, Data: data}); aerr != nil {
			a.log.Error("record witness_refused", "error", aerr)
		}
	}
	return &witnessing{p}, nil
}

// run sends checkpoints until ctx ends.
func (w *witnessing) run(ctx context.Context, a *app) {
	w.p.Run(ctx, witnessInterval, func(err error) {
		if _, ok := errors.AsType[*witness.RefusalError](err); !ok {
			a.log.Warn("witness", "error", err)
		}
	})
}
