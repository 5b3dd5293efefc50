package witness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	fnote "github.com/transparency-dev/formats/note"
)

// Source is the log a Publisher sends to witnesses: its newest signed
// checkpoint and consistency proofs between its checkpointed sizes.
type Source interface {
	// Checkpoint returns the newest checkpoint: its size, root hash and
	// signed note; size 0 when the log has none yet.
	Checkpoint(ctx context.Context) (size uint64, root, note []byte, err error)
	// Consistency proves that the log of size from is a prefix of the log
	// of size to.
	Consistency(ctx context.Context, from, to uint64) ([][]byte, error)
}

// Target is a witness a log sends its checkpoints to: its base URL and
// its verifier key (cosignature/v1), which every cosignature it returns
// must verify with.
type Target struct {
	URL  string
	VKey string
}

// ParseTarget reads "URL=VKEY", serve's --witness flag. The URL is
// http(s) with a host; the key is a signed-note verifier key.
func ParseTarget(spec string) (Target, error) {
	i := strings.LastIndex(spec, "=")
	if i <= 0 || i == len(spec)-1 {
		return Target{}, fmt.Errorf("witness %q: want URL=VKEY (the witness's verifier key, as packrun witness prints it)", clip([]byte(spec)))
	}
	raw, vkey := spec[:i], spec[i+1:]
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Target{}, fmt.Errorf("witness %q: want an http(s) URL with a host", clip([]byte(raw)))
	}
	if _, err := fnote.NewVerifierForCosignatureV1(vkey); err != nil {
		return Target{}, fmt.Errorf("witness %s: verifier key %q: %w", raw, clip([]byte(vkey)), err)
	}
	return Target{URL: strings.TrimSuffix(raw, "/"), VKey: vkey}, nil
}

// TargetStatus is what a Publisher knows of one witness.
type TargetStatus struct {
	URL string `json:"url"`
	// Size is the size of the newest checkpoint it cosigned for us.
	Size uint64 `json:"size"`
	// Refusals counts its refusals since the Publisher started.
	Refusals uint64 `json:"refusals"`
	// Problem is why the last send failed ("" when it cosigned);
	// Refused says the witness refused (a fork, a rollback, an unknown
	// key), not that it could not be reached.
	Problem string `json:"problem,omitempty"`
	Refused bool   `json:"refused,omitempty"`
}

// RefusalError is a witness's refusal to cosign a checkpoint, or a
// cosignature that does not verify with the witness's configured key.
type RefusalError struct {
	URL  string
	Size uint64
	Err  error
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("witness %s refused the checkpoint of size %d: %v", e.URL, e.Size, e.Err)
}

func (e *RefusalError) Unwrap() error { return e.Err }

// Publisher sends a log's checkpoints to witnesses, each with the
// consistency proof from the last checkpoint that witness cosigned, and
// keeps what they cosigned in a state file (written durably) so that a
// restart goes on from it.
type Publisher struct {
	src     Source
	targets []Target
	path    string
	client  Client
	// RetryRefused is how long a refused witness is left before the
	// next checkpoint is sent to it (default one minute).
	RetryRefused time.Duration
	// OnRefused is called with each refusal (a *RefusalError) when a
	// witness that cosigned before, or never answered, refuses: once per
	// change into the refused state, not per retry.
	OnRefused func(t Target, err error)
	// beforeRecord, set by tests, runs after a witness cosigned and
	// before the state file records it (a crash there).
	beforeRecord func() error

	mu     sync.Mutex
	state  publishState
	status map[string]*targetStatus
}

type targetStatus struct {
	TargetStatus
	retryAt time.Time
}

// publishState is the state file: per witness URL, the last checkpoint it
// cosigned.
type publishState struct {
	Format    string                   `json:"format"`
	Witnesses map[string]cosignedState `json:"witnesses"`
}

type cosignedState struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   []byte `json:"root"`
	Note   []byte `json:"note"`   // the log's signed note
	Cosig  []byte `json:"cosig"`  // the witness's cosignature line(s) of it
	Signed string `json:"signed"` // when the witness cosigned it (RFC 3339)
}

const publishFormat = "packrun.witness-state/v1"

// maxStateBytes bounds the state file read back.
const maxStateBytes = 4 << 20

// NewPublisher returns a Publisher of src's checkpoints to targets, its
// state in statePath (read now; created on the first cosignature).
func NewPublisher(src Source, targets []Target, statePath string, hc *http.Client) (*Publisher, error) {
	if len(targets) == 0 {
		return nil, errors.New("witness publisher: no witness")
	}
	p := &Publisher{src: src, targets: targets, path: statePath, client: Client{HTTP: hc, Prove: src.Consistency},
		RetryRefused: time.Minute, status: map[string]*targetStatus{}}
	seen := map[string]bool{}
	for _, t := range targets {
		if seen[t.URL] {
			return nil, fmt.Errorf("witness %s: configured twice", t.URL)
		}
		seen[t.URL] = true
	}
	b, err := os.ReadFile(statePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.state = publishState{Format: publishFormat, Witnesses: map[string]cosignedState{}}
	case err != nil:
		return nil, fmt.Errorf("witness state %s: %w", statePath, err)
	case len(b) > maxStateBytes:
		return nil, fmt.Errorf("witness state %s: over %d bytes", statePath, maxStateBytes)
	default:
		if err := json.Unmarshal(b, &p.state); err != nil || p.state.Format != publishFormat {
			return nil, fmt.Errorf("witness state %s: not a %s file (move it away to start over: the witnesses then tell their sizes)", statePath, publishFormat)
		}
		if p.state.Witnesses == nil {
			p.state.Witnesses = map[string]cosignedState{}
		}
	}
	for _, t := range targets {
		p.status[t.URL] = &targetStatus{TargetStatus: TargetStatus{URL: t.URL, Size: p.state.Witnesses[t.URL].Size}}
	}
	return p, nil
}

// Publish sends the newest checkpoint to every witness that has not
// cosigned it, and returns the first failure (a *RefusalError when a
// witness refused). A failed witness is retried by the next call (a
// refused one after RetryRefused).
func (p *Publisher) Publish(ctx context.Context) error {
	size, root, note, err := p.src.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("witness publisher: the log's checkpoint: %w", err)
	}
	if size == 0 {
		return nil
	}
	origin, err := Origin(note)
	if err != nil {
		return err
	}
	var first error
	for _, t := range p.targets {
		if err := p.publishTo(ctx, t, origin, size, root, note); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (p *Publisher) publishTo(ctx context.Context, t Target, origin string, size uint64, root, note []byte) error {
	p.mu.Lock()
	last, ok := p.state.Witnesses[t.URL]
	st := p.status[t.URL]
	wait := st.Refused && time.Now().Before(st.retryAt)
	p.mu.Unlock()
	if ok && last.Origin == origin && last.Size == size && bytes.Equal(last.Root, root) {
		return nil // cosigned already
	}
	if wait {
		return nil
	}
	old := uint64(0)
	var prf [][]byte
	if ok && last.Origin == origin && last.Size <= size {
		old = last.Size
	}
	if old > 0 && old < size {
		var err error
		if prf, err = p.src.Consistency(ctx, old, size); err != nil {
			// The log cannot prove it grew from there: let the witness
			// say what it holds (its 409), and prove from that.
			old, prf = 0, nil
		}
	}
	cosig, err := p.client.AddCheckpoint(ctx, t.URL, old, prf, note)
	if conflict, ok := errors.AsType[*ConflictError](err); ok && conflict.Size > size {
		err = fmt.Errorf("a rollback: the log is at size %d, below the %d the witness cosigned: %w", size, conflict.Size, err)
	}
	if err == nil {
		if _, verr := VerifyCosignature(AppendCosignature(note, cosig), t.VKey); verr != nil {
			err = fmt.Errorf("its answer: %w", verr)
		}
	}
	if err != nil {
		return p.failed(ctx, t, size, err)
	}
	if p.beforeRecord != nil {
		if err := p.beforeRecord(); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Witnesses[t.URL] = cosignedState{Origin: origin, Size: size, Root: root, Note: note, Cosig: cosig, Signed: time.Now().UTC().Format(time.RFC3339)}
	b, err := json.Marshal(p.state)
	if err == nil {
		err = writeFileDurably(p.path, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("witness state %s: %w", p.path, err)
	}
	st.Size, st.Problem, st.Refused = size, "", false
	return nil
}

// failed records a failed send: a witness that could not be reached, or
// one that refused (anything it answered but a cosignature that
// verifies).
func (p *Publisher) failed(ctx context.Context, t Target, size uint64, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ue *url.Error
	refused := !errors.As(err, &ue)
	p.mu.Lock()
	st := p.status[t.URL]
	wasRefused := st.Refused
	st.Problem, st.Refused = err.Error(), refused
	if refused {
		st.Refusals++
		st.retryAt = time.Now().Add(p.RetryRefused)
	}
	p.mu.Unlock()
	if !refused {
		return fmt.Errorf("witness %s unreachable: %w", t.URL, err)
	}
	rerr := &RefusalError{URL: t.URL, Size: size, Err: err}
	if !wasRefused && p.OnRefused != nil {
		p.OnRefused(t, rerr)
	}
	return rerr
}

// Status reports each witness's state, in the order configured.
func (p *Publisher) Status() []TargetStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]TargetStatus, 0, len(p.targets))
	for _, t := range p.targets {
		out = append(out, p.status[t.URL].TargetStatus)
	}
	return out
}

// Cosigned returns the newest checkpoint some witness cosigned, with the
// cosignature lines of every witness that cosigned that same checkpoint
// appended; nil when none has.
func (p *Publisher) Cosigned() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *cosignedState
	for _, t := range p.targets {
		s, ok := p.state.Witnesses[t.URL]
		if ok && (best == nil || s.Size > best.Size) {
			best = &s
		}
	}
	if best == nil {
		return nil
	}
	out := append([]byte(nil), best.Note...)
	for _, t := range p.targets {
		s, ok := p.state.Witnesses[t.URL]
		if ok && bytes.Equal(s.Note, best.Note) {
			out = append(out, s.Cosig...)
		}
	}
	return out
}

// Run publishes every interval until ctx ends, calling logf with each
// failure.
func (p *Publisher) Run(ctx context.Context, interval time.Duration, logf func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := p.Publish(ctx); err != nil && ctx.Err() == nil && logf != nil {
			logf(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
