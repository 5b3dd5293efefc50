package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// logCheckpoint is GET /v1/evidence/checkpoint under Accept:
// application/json.
type logCheckpoint struct {
	Size        uint64    `json:"size"`
	Root        []byte    `json:"root"`
	Note        string    `json:"note"`
	VerifierKey string    `json:"verifier_key"`
	Time        time.Time `json:"time"`
}

// logInclusionProof is GET /v1/evidence/proof/inclusion: the bundle
// `packrun evidence check` reads (tlog.Bundle).
type logInclusionProof tlog.Bundle

// logConsistencyProof is GET /v1/evidence/proof/consistency: both signed
// checkpoints and the proof (tlog.ConsistencyBundle).
type logConsistencyProof tlog.ConsistencyBundle

// newestCheckpoint is the log's newest checkpoint, integrating first when
// nothing is yet.
func (s *server) newestCheckpoint(ctx context.Context) (*host.LogCheckpoint, error) {
	cp, err := s.cfg.Backend.LogCheckpoint(ctx, 0)
	if errors.Is(err, host.ErrNotFound) {
		return s.cfg.Backend.LogSync(ctx)
	}
	return cp, err
}

// evidenceCheckpoint is GET /v1/evidence/checkpoint: the newest signed
// checkpoint note (text/plain), or with Accept: application/json its
// size, root, note and verifier key. Every valid token may read it.
func (s *server) evidenceCheckpoint(w http.ResponseWriter, r *http.Request) error {
	cp, err := s.newestCheckpoint(r.Context())
	if err != nil {
		return err
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		vkey, err := s.cfg.Backend.LogVerifierKey()
		if err != nil {
			return err
		}
		reply(w, http.StatusOK, logCheckpoint{Size: cp.Size, Root: cp.Root, Note: cp.Note, VerifierKey: vkey, Time: cp.Time})
		return nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write([]byte(cp.Note))
	return err
}

// logSizeParam reads an optional log size (0 when absent).
func logSizeParam(r *http.Request, name string, required bool) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" && !required {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < 1 || n > 1<<62 {
		return 0, refuse(http.StatusBadRequest, CodeInvalid, name, fmt.Sprintf("%s: must be a log size, an integer from 1", name))
	}
	return n, nil
}

// evidenceInclusion is GET /v1/evidence/proof/inclusion?entry=&size=:
// the inclusion bundle of an attempt (its id) or an event (its seq). A
// token proves only its tenant's entries; another tenant's answers as
// one that does not exist.
func (s *server) evidenceInclusion(w http.ResponseWriter, r *http.Request) error {
	ref := r.URL.Query().Get("entry")
	if ref == "" {
		return refuse(http.StatusBadRequest, CodeInvalid, "entry", "entry: name an attempt id or an event seq")
	}
	size, err := logSizeParam(r, "size", false)
	if err != nil {
		return err
	}
	// As for an attempt (owns): the token's tenant's entries only, the
	// operator's included; every entry without authentication.
	tenant := ""
	if p := auth.From(r.Context()); !p.Insecure {
		tenant = p.Tenant
	}
	seq, entry, err := evidence.ResolveEntry(r.Context(), s.cfg.Backend, ref, tenant)
	if errors.Is(err, host.ErrNotFound) {
		return refuse(http.StatusNotFound, CodeNotFound, "entry", fmt.Sprintf("no evidence entry %s", host.ShortName(ref)))
	}
	if err != nil {
		return err
	}
	b, err := evidence.ProveEntry(r.Context(), s.cfg.Backend, seq, entry, size)
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, (*logInclusionProof)(b))
	return nil
}

// evidenceConsistency is GET /v1/evidence/proof/consistency?from=&to=:
// the proof that the log of size from is a prefix of the log of size to
// (absent: the newest), with both signed checkpoints.
func (s *server) evidenceConsistency(w http.ResponseWriter, r *http.Request) error {
	from, err := logSizeParam(r, "from", true)
	if err != nil {
		return err
	}
	to, err := logSizeParam(r, "to", false)
	if err != nil {
		return err
	}
	if to != 0 && from > to {
		return refuse(http.StatusBadRequest, CodeInvalid, "from", fmt.Sprintf("from: size %d is larger than to, %d", from, to))
	}
	b := s.cfg.Backend
	p, err := b.LogConsistency(r.Context(), from, to)
	if err != nil {
		return err
	}
	old, err := b.LogCheckpoint(r.Context(), p.From)
	if err != nil {
		return err
	}
	cur, err := b.LogCheckpoint(r.Context(), p.Size)
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, logConsistencyProof{Old: old.Note, New: cur.Note, Proof: p.Hashes})
	return nil
}
