package witness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// AddCheckpointPath is the tlog-witness endpoint.
const AddCheckpointPath = "/add-checkpoint"

// sizeContentType is the media type of a 409's body (the size held).
const sizeContentType = "text/x.tlog.size"

// Witness cosigns the checkpoints of the logs it is configured for. It is
// an http.Handler serving POST /add-checkpoint.
type Witness struct {
	key   *Key
	logs  map[string]Log
	state stateDir

	mu sync.Mutex // held from reading an origin's state to storing its next
}

// New returns a witness signing with key, for logs, keeping its state in
// the directory stateDir (created if missing).
func New(key *Key, logs []Log, stateDirPath string) (*Witness, error) {
	if key == nil {
		return nil, errors.New("witness: no key")
	}
	if len(logs) == 0 {
		return nil, errors.New("witness: no log to witness")
	}
	m := make(map[string]Log, len(logs))
	for _, l := range logs {
		if _, dup := m[l.Origin]; dup {
			return nil, fmt.Errorf("witness: log %s configured twice", l.Origin)
		}
		m[l.Origin] = l
	}
	if err := os.MkdirAll(stateDirPath, 0o700); err != nil {
		return nil, fmt.Errorf("witness state %s: %w", stateDirPath, err)
	}
	w := &Witness{key: key, logs: m, state: stateDir(stateDirPath)}
	for origin := range m { // a corrupt state file stops the start, not a request
		if _, err := w.state.load(origin); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Key is the witness's own key.
func (w *Witness) Key() *Key { return w.key }

// ServeHTTP answers POST /add-checkpoint as C2SP tlog-witness says: 200 and
// the cosignature line; 400 for a body that does not parse or an old size
// above the checkpoint's; 403 for a checkpoint without a valid signature of
// its log; 404 for an unknown origin; 409 (body: the size held) when the
// old size is not the size last cosigned, or the sizes are equal and the
// root hashes are not; 413 for a body over MaxBodyBytes; 422 for a
// consistency proof that does not verify.
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != AddCheckpointPath {
		http.Error(rw, "not found: this witness serves POST "+AddCheckpointPath, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		http.Error(rw, "method not allowed: POST "+AddCheckpointPath, http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		http.Error(rw, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > MaxBodyBytes {
		http.Error(rw, fmt.Sprintf("request body is over %d bytes", MaxBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	cosig, err := w.Add(body)
	if err != nil {
		var conflict *ConflictError
		if errors.As(err, &conflict) {
			rw.Header().Set("Content-Type", sizeContentType)
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprintf(rw, "%d\n", conflict.Size)
			return
		}
		http.Error(rw, err.Error(), statusOf(err))
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = rw.Write(cosig) // a client gone now finds the state moved: its retry gets a 409
}

// errOldAboveSize: a request whose old size is above its checkpoint's.
var errOldAboveSize = errors.New("old size is above the checkpoint's size")

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrUnknownLog):
		return http.StatusNotFound
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrInconsistent):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrMalformed), errors.Is(err, errOldAboveSize):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// Add handles one add-checkpoint request body: it returns the cosignature
// line, after the checkpoint became the origin's durable state, or an
// error wrapping ErrMalformed, ErrUnknownLog, ErrBadSignature,
// ErrInconsistent or a *ConflictError, and then changes nothing.
func (w *Witness) Add(body []byte) ([]byte, error) {
	req, err := ParseAddCheckpoint(body)
	if err != nil {
		return nil, err
	}
	origin, err := Origin(req.Checkpoint)
	if err != nil {
		return nil, err
	}
	l, ok := w.logs[origin]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownLog, clip([]byte(origin)))
	}
	cp, n, err := OpenCheckpoint(req.Checkpoint, l)
	if err != nil {
		return nil, err
	}
	if req.OldSize > cp.Size {
		return nil, fmt.Errorf("%s: %w (%d > %d)", origin, errOldAboveSize, req.OldSize, cp.Size)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	last, err := w.state.load(origin)
	if err != nil {
		return nil, err
	}
	if req.OldSize != last.Size {
		return nil, &ConflictError{Origin: origin, Size: last.Size}
	}
	if err := consistent(last, cp, req.Proof); err != nil {
		return nil, err
	}
	if cp.Size > last.Size || last.Hash == nil {
		if err := w.state.store(cp); err != nil {
			return nil, err
		}
	}
	return w.key.Cosign(n.Text)
}

// consistent checks that cp extends last with proof. Equal sizes need
// equal roots (else a 409: the log shows two trees of one size); from
// size 0 any tree extends, but a size-0 checkpoint must have the empty
// tree's root.
func consistent(last, cp log.Checkpoint, prf [][]byte) error {
	h := rfc6962.DefaultHasher
	switch {
	case cp.Size == 0:
		if len(prf) != 0 || !bytes.Equal(cp.Hash, h.EmptyRoot()) {
			return fmt.Errorf("%s: %w: a size-0 checkpoint must have the empty root and no proof", cp.Origin, ErrInconsistent)
		}
		return nil
	case last.Size == 0:
		if len(prf) != 0 {
			return fmt.Errorf("%s: %w: a proof from size 0 must be empty", cp.Origin, ErrInconsistent)
		}
		return nil
	case last.Size == cp.Size && !bytes.Equal(last.Hash, cp.Hash):
		return &ConflictError{Origin: cp.Origin, Size: last.Size}
	}
	if err := proof.VerifyConsistency(h, last.Size, cp.Size, prf, last.Hash, cp.Hash); err != nil {
		why := err.Error()
		if _, ok := errors.AsType[proof.RootMismatchError](err); ok {
			why = "the proof leads to another root" // its own message spans lines
		}
		return fmt.Errorf("%s: %w: from size %d to %d: %s", cp.Origin, ErrInconsistent, last.Size, cp.Size, why)
	}
	return nil
}
