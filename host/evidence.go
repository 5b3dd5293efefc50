package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/packrun/packrun/abi"
)

// Evidence records what attempts did, tamper-evidently: every attempt,
// artifact and runtime event is appended to one hash chain (each event
// carries the sha256 of the previous one; an attempt's or artifact's event
// carries its content hash), which VerifyChain walks.
type Evidence interface {
	// RecordAttempt stores an attempt and appends attempt_recorded. It sets
	// a.AttemptID (if empty), a.ContentHash and a.EventSeq. Attempts are
	// immutable: recording the same id again is a no-op when the content is
	// identical and ErrConflict otherwise.
	RecordAttempt(ctx context.Context, a *Attempt) error
	// Attempt returns one attempt.
	Attempt(ctx context.Context, attemptID string) (*Attempt, error)
	// ListAttempts returns attempts, most recently recorded first.
	ListAttempts(ctx context.Context, f AttemptFilter) ([]*Attempt, error)
	// CountAttempts counts the attempts f selects (f.Limit is ignored).
	CountAttempts(ctx context.Context, f AttemptFilter) (int, error)

	// PutArtifact stores content-addressed bytes and their ArtifactRecord
	// (event artifact_recorded). Storing the same name again for the same
	// task and attempt returns the existing record if the bytes are the
	// same and ErrConflict if not.
	PutArtifact(ctx context.Context, in ArtifactInput) (*Artifact, error)
	// Artifact returns one artifact record.
	Artifact(ctx context.Context, artifactID string) (*Artifact, error)
	// ArtifactContent returns an artifact's bytes, checked against its digest.
	ArtifactContent(ctx context.Context, artifactID string) ([]byte, error)

	// AppendEvent appends a runtime event and returns it with its seq,
	// time and hashes.
	AppendEvent(ctx context.Context, e Event) (*Event, error)
	// Events returns events in chain order.
	Events(ctx context.Context, f EventFilter) ([]*Event, error)
	// VerifyChain walks the whole chain and reports the first broken link.
	// A broken chain is a report, not an error.
	VerifyChain(ctx context.Context) (*ChainReport, error)
	// VerifyAttempt checks one stored attempt against the event that
	// recorded it: the event's own hash, and the attempt's content against
	// the hash the event chained. A mismatch is a *ChainBreak (matched by
	// ErrTampered) returned as the error.
	VerifyAttempt(ctx context.Context, attemptID string) error
	// EachVerifiedAttempt calls fn with every attempt f selects, most
	// recently recorded first (f.Limit is ignored), and what VerifyAttempt
	// says of it, reading a bounded page at a time. An attempt whose record
	// no longer reads comes with only its AttemptID and EventSeq set, and
	// its break. It stops at fn's first error and returns it.
	EachVerifiedAttempt(ctx context.Context, f AttemptFilter, fn func(a *Attempt, verr error) error) error

	// ExportAttempt returns a self-contained bundle of one attempt (with its
	// trace), its artifacts (with their bytes) and its events;
	// evidence.VerifyBundle checks one without the database.
	ExportAttempt(ctx context.Context, attemptID string) (*Bundle, error)
}

// Attempt is one execution of one node with one input (schema §8, extended
// with what a Wasm invocation produces). JSON fields are stored as given
// (compacted) and are opaque to the store.
type Attempt struct {
	AttemptID    string `json:"attempt_id"`
	TaskID       string `json:"task_id,omitempty"`
	RunnerID     string `json:"runner_id,omitempty"`
	Pack         string `json:"pack"`          // name@version ("" for a bare module)
	ModuleSHA256 string `json:"module_sha256"` // hex digest of the module
	Node         string `json:"node"`          // typeId
	Tenant       string `json:"tenant"`        // "" means "default"
	RunID        string `json:"run_id"`
	Attempt      int    `json:"attempt"` // as the node was handed it: for a task, its attempt_count at the claim (from 1); an openwop run counts from 0
	ABIVersion   string `json:"abi_version"`

	Input     json.RawMessage `json:"input"`
	Output    json.RawMessage `json:"output,omitempty"`
	Interrupt json.RawMessage `json:"interrupt,omitempty"`
	Outcome   abi.Outcome     `json:"outcome"` // completed | suspended | failed
	Error     *abi.Error      `json:"error,omitempty"`
	// ExitStatus defaults from Outcome (failed → error, else ok).
	ExitStatus ExitStatus `json:"exit_status"`
	// RetryClass defaults to none.
	RetryClass RetryClass `json:"retry_class"`

	Stdout []byte          `json:"stdout,omitempty"`
	Stderr []byte          `json:"stderr,omitempty"`
	Logs   json.RawMessage `json:"logs,omitempty"`   // [{level,message}]
	Events json.RawMessage `json:"events,omitempty"` // [{type:"cap.breached",...}]
	// Trace is the ordered host-call results, as the runtime produced
	// them; replay reads it back.
	Trace        json.RawMessage `json:"trace,omitempty"`
	Limits       json.RawMessage `json:"limits,omitempty"`
	AdapterCalls json.RawMessage `json:"adapter_calls,omitempty"`
	Diagnostics  json.RawMessage `json:"diagnostics,omitempty"`

	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`

	// Set by RecordAttempt.
	ContentHash string `json:"content_hash,omitempty"` // evidence.HashAttempt
	EventSeq    int64  `json:"event_seq,omitempty"`    // seq of its attempt_recorded event

	// Compact, set by a caller, promises that every JSON field is valid
	// and already in its stored form (evidence.CompactJSON's): the store
	// then neither validates nor compacts them again. The dispatcher sets
	// it for JSON it validated where it entered or marshalled itself.
	Compact bool `json:"-"`
}

// JSONField is one of an attempt's JSON fields, by its JSON name.
type JSONField struct {
	Name  string
	Value *json.RawMessage
}

// JSONFields are the attempt's JSON fields (error.details aside), for code
// that treats them alike: validating, compacting, hashing.
func (a *Attempt) JSONFields() [9]JSONField {
	return [9]JSONField{
		{"input", &a.Input}, {"output", &a.Output}, {"interrupt", &a.Interrupt}, {"logs", &a.Logs},
		{"events", &a.Events}, {"trace", &a.Trace}, {"limits", &a.Limits},
		{"adapter_calls", &a.AdapterCalls}, {"diagnostics", &a.Diagnostics},
	}
}

// AttemptFilter selects attempts for ListAttempts; zero fields match all.
type AttemptFilter struct {
	TaskID   string
	TaskType string // attempts of tasks of this type
	Pack     string // "name" (any version) or "name@version"
	Tenant   string
	Since    time.Time // started at or after
	// BeforeSeq, if not 0, selects attempts recorded before this event
	// seq: pass the last EventSeq of a page to read the next one.
	BeforeSeq int64
	Limit     int // 0 means 100
}

// ArtifactRole is ArtifactRecord.role.
type ArtifactRole string

const (
	RolePlan          ArtifactRole = "plan"
	RoleExecuteReport ArtifactRole = "execute-report"
	RoleVerifyReport  ArtifactRole = "verify-report"
	RoleOutput        ArtifactRole = "output"
	RoleSnapshot      ArtifactRole = "snapshot"
	RoleAdapterAudit  ArtifactRole = "adapter-audit"
)

// Valid reports whether r is one of the schema's roles.
func (r ArtifactRole) Valid() bool {
	switch r {
	case RolePlan, RoleExecuteReport, RoleVerifyReport, RoleOutput, RoleSnapshot, RoleAdapterAudit:
		return true
	}
	return false
}

// ArtifactInput is what PutArtifact stores. At least one of TaskID and
// AttemptID is required. Name is a relative path ("reports/run.md").
type ArtifactInput struct {
	TaskID      string
	AttemptID   string
	Role        ArtifactRole
	Name        string
	ContentType string
	Data        []byte
	// Tenant, for an artifact of no task, is its attempt's tenant: a
	// direct invocation stores its artifacts while it runs, before its
	// attempt is recorded, so its artifact_recorded event names the
	// tenant in its data (whose the event is: EventFilter.Tenant).
	// Ignored with a TaskID (the task's tenant is the event's).
	Tenant string
}

// Artifact is an ArtifactRecord (schema §12) with its digest and size.
type Artifact struct {
	ArtifactID   string       `json:"artifact_id"`
	TaskID       string       `json:"task_id,omitempty"`
	AttemptID    string       `json:"attempt_id,omitempty"`
	Role         ArtifactRole `json:"role"`
	RelativePath string       `json:"relative_path"`
	ContentType  string       `json:"content_type,omitempty"`
	SHA256       string       `json:"sha256"`
	Size         int64        `json:"size"`
	CreatedAt    time.Time    `json:"created_at"`
	// VerifiedAt is set when a task completes on this artifact's attempt.
	VerifiedAt *time.Time `json:"verified_at,omitempty"`
}

// Runtime event types: the schema's (§14) that packrun emits, and its own.
const (
	EventTaskEnqueued          = "task_enqueued"
	EventTaskClaimed           = "task_claimed"
	EventTaskAttemptFinished   = "task_attempt_finished"
	EventTaskRetryScheduled    = "task_retry_scheduled"
	EventTaskFinished          = "task_finished" // terminal status or blocked: data.status
	EventTaskCancelRequested   = "task_cancel_requested"
	EventTaskResumed           = "task_resumed"         // data.by, data.resume_values (the count)
	EventTaskRetryRequested    = "task_retry_requested" // data.by, data.from, data.max_attempts
	EventBootSweepReclaimed    = "boot_sweep_reclaimed"
	EventDispatchLocked        = "dispatch_locked"
	EventDispatchLockReleased  = "dispatch_lock_released"
	EventDispatchLockStale     = "dispatch_lock_stale_cleared"
	EventAttemptRecorded       = "attempt_recorded"  // data.content_hash = evidence.HashAttempt
	EventArtifactRecorded      = "artifact_recorded" // data.sha256, data.size
	EventTaskTypesUpdated      = "task_types_updated"
	EventTaskTypeOverrideSet   = "task_type_override_set"
	EventTaskTypeOverrideUnset = "task_type_override_removed"
	// EventTaskStarted is appended by Queue.Finish with the settlement of
	// an attempt (data.started_at is when its node started).
	EventTaskStarted = "task_started"
	// EventDispatchIdle is appended by the dispatcher once per busy → idle
	// transition (no task to claim, none running).
	EventDispatchIdle = "dispatch_idle"
	// Schema types for callers to append (the store does not emit them).
	EventBundleCompiled = "bundle_compiled"
)

// Event is one entry of the runtime event log.
type Event struct {
	Seq       int64           `json:"seq"`
	Time      time.Time       `json:"time"`
	Type      string          `json:"type"`
	TaskID    string          `json:"task_id,omitempty"`
	AttemptID string          `json:"attempt_id,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	PrevHash  string          `json:"prev_hash"`
	Hash      string          `json:"hash"` // evidence.HashEvent
}

// EventFilter selects events; zero fields match all.
type EventFilter struct {
	TaskID    string
	AttemptID string
	Type      string
	// AfterSeq selects events after this seq: pass the last Seq of a page
	// to read the next one.
	AfterSeq int64
	// Since, if not zero, starts the listing at the chain's position at
	// that time: after the last event stamped before it. Entries are
	// appended in time order (one writer), so these are the events
	// appended at or after Since; an attempt_recorded event counts by
	// where it was appended, not by its attempt's ended_at.
	Since time.Time
	// Tenant, if set, selects that tenant's events only ("default" for
	// the default tenant): those of its tasks and attempts, and those
	// tied to no task that were appended for it (schedule_upserted,
	// workflow_created, sensor_event_recorded, message_accepted,
	// api_call, ...: their data names it). Events of the whole host,
	// which belong to no tenant (dispatch_*, task_types_updated,
	// workflow_upserted, ...), are left out; only an unset Tenant
	// selects them.
	Tenant string
	Limit  int // 0 means 1000
}

// Anchoring is the operator's hold on a store's evidence anchor: the
// signed head checkpoint and the host key that signs it, which a store
// refuses to open without (ErrUnanchored) once its chain is anchored.
type Anchoring interface {
	// AnchorState reports the anchor and what is wrong with it.
	AnchorState(ctx context.Context) (*AnchorState, error)
	// Reanchor appends e and anchors the chain's head after it, signed by
	// the current host key, which becomes the key the chain is anchored
	// with. e records why (the operator's reason, the old and new head and
	// key).
	Reanchor(ctx context.Context, e Event) (*Event, error)
}

// AnchorState is a store's evidence anchor as it is on disk.
type AnchorState struct {
	CheckpointFile string `json:"checkpoint_file"`
	// Checkpoint is the head the checkpoint file names, its signature
	// unchecked; nil when the file is missing or unreadable.
	Checkpoint    *ChainHead `json:"checkpoint,omitempty"`
	CheckpointKey string     `json:"checkpoint_key,omitempty"` // the key the checkpoint names (hex)
	KeyFile       string     `json:"key_file"`
	HostKey       string     `json:"host_key,omitempty"`     // the host key's public half (hex); "" when missing
	RecordedKey   string     `json:"recorded_key,omitempty"` // the key the store recorded as anchoring its chain
	// Problem is why the store refuses to open without re-anchoring; ""
	// when the anchor is sound.
	Problem string `json:"problem,omitempty"`
}

// Runtime events of the operator's anchor commands (data: reason,
// problem, old and new head and key; a rotation also the old key's
// signature handing over to the new).
const (
	EventEvidenceReanchored = "evidence_reanchored"
	EventHostKeyRotated     = "host_key_rotated"
)

// ChainReport is the result of VerifyChain.
type ChainReport struct {
	OK        bool   `json:"ok"`
	Events    int64  `json:"events"`   // events checked
	Attempts  int64  `json:"attempts"` // attempt contents re-hashed
	Artifacts int64  `json:"artifacts"`
	Messages  int64  `json:"messages"` // accepted messages re-hashed
	Head      string `json:"head"`     // hash of the last event; anchor it elsewhere to detect truncation
	HeadSeq   int64  `json:"head_seq"` // seq of the last event
	// Checkpoint is the signed head the store anchored outside the
	// database that the chain was checked against; nil if there is none.
	Checkpoint *ChainHead `json:"checkpoint,omitempty"`
	// Broken is the first broken link, nil when OK.
	Broken *ChainBreak `json:"broken,omitempty"`
}

// Problems a ChainBreak reports.
const (
	BreakSeqGap          = "seq_gap"           // an event is missing (deleted)
	BreakPrevHash        = "prev_hash"         // prev_hash is not the previous event's hash
	BreakEventHash       = "event_hash"        // the event's fields no longer match its hash
	BreakAttemptHash     = "attempt_hash"      // the attempt's content no longer matches the hash chained in its event
	BreakAttemptMissing  = "attempt_missing"   // the event names an attempt that is not stored
	BreakAttemptUnchain  = "attempt_unchained" // a stored attempt has no event in the chain
	BreakArtifactHash    = "artifact_hash"     // the artifact record no longer matches its event
	BreakArtifactMissing = "artifact_missing"
	BreakArtifactUnchain = "artifact_unchained"
	BreakMessageHash     = "message_hash" // the stored message no longer matches its message_accepted event
	BreakMessageMissing  = "message_missing"
	BreakMessageUnchain  = "message_unchained"
	BreakCheckpoint      = "checkpoint"   // the head checkpoint is unreadable or not signed by the host key
	BreakHeadRewound     = "head_rewound" // the chain ends before, or differs at, an anchored head: newest events were removed or rewritten
)

// ChainHead is a point of the chain: an event's seq and hash, as a signed
// checkpoint or an operator's pin records it.
type ChainHead struct {
	Seq  int64     `json:"seq"`
	Hash string    `json:"hash"`
	Time time.Time `json:"time,omitzero"`
}

// ChainBreak names the first broken link.
type ChainBreak struct {
	Seq        int64  `json:"seq"` // 0 for an unchained record
	Type       string `json:"type,omitempty"`
	AttemptID  string `json:"attempt_id,omitempty"`
	ArtifactID string `json:"artifact_id,omitempty"`
	MessageID  string `json:"message_id,omitempty"`
	Problem    string `json:"problem"` // one of the Break* constants
	Detail     string `json:"detail"`
}

func (b *ChainBreak) Error() string {
	if b.Seq > 0 {
		return fmt.Sprintf("evidence tampered at event %d: %s", b.Seq, b.Detail)
	}
	return "evidence tampered: " + b.Detail
}

// Is makes a *ChainBreak match ErrTampered.
func (b *ChainBreak) Is(target error) bool { return target == ErrTampered }

// Bundle is an exported attempt.
type Bundle struct {
	Format     string           `json:"format"` // BundleFormat
	ExportedAt time.Time        `json:"exported_at"`
	Attempt    *Attempt         `json:"attempt"`
	Artifacts  []BundleArtifact `json:"artifacts"`
	Events     []*Event         `json:"events"`
	// Seal is the exporting host's signature over the rest (see Seal),
	// Log excepted.
	Seal *Seal `json:"seal,omitempty"`
	// Log (optional) is the inclusion proof of the attempt's chain entry
	// in the evidence log with the signed checkpoint it was proven
	// against, and optionally a consistency proof from an older
	// checkpoint: a tlog.Bundle in its JSON form. It is outside the seal:
	// the checkpoint's signature and the proof check themselves.
	Log json.RawMessage `json:"log,omitempty"`
}

// Seal is a host's Ed25519 signature over the digest of an exported file
// (an evidence bundle, a trace): without the host key, a file edited and
// given a matching digest again does not verify. HostKey names the key;
// whether it is a key the reader trusts is the reader's decision (its own
// host's key, or one it was told).
type Seal struct {
	HostKey   string `json:"host_key"`  // hex Ed25519 public key
	Signature string `json:"signature"` // base64 Ed25519 signature
}

// BundleFormat identifies the bundle layout.
const BundleFormat = "packrun.attempt-bundle/v1"

// BundleArtifact is an artifact record with its bytes (base64 in JSON).
type BundleArtifact struct {
	Artifact
	Content []byte `json:"content"`
}

// Document is the attempt as the CLI's and the API's output documents
// show it: every key snake_case. The recorded limits and diagnostics keep
// the runtime's camelCase keys (memoryBytes, timeoutMs, hostCalls...)
// because the record is hashed as written; the document renames them
// (memory_bytes, timeout_ms...). Evidence bundles carry the record as
// written.
func (a *Attempt) Document() *Attempt {
	if a == nil || len(a.Limits) == 0 && len(a.Diagnostics) == 0 {
		return a
	}
	c := *a
	if len(a.Limits) > 0 {
		c.Limits = SnakeKeys(a.Limits)
	}
	if len(a.Diagnostics) > 0 {
		c.Diagnostics = SnakeKeys(a.Diagnostics)
	}
	return &c
}

// SnakeKeys renames the keys of a JSON object from camelCase to
// snake_case (memoryBytes: memory_bytes), one level deep, keeping their
// order; anything else is returned as it is.
func SnakeKeys(raw json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return raw
	}
	out := []byte{'{'}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return raw
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return raw
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		key, _ := json.Marshal(snake(k.(string)))
		out = append(append(append(out, key...), ':'), v...)
	}
	return append(out, '}')
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// EvidenceLog is the Merkle-tree log over the evidence chain (RFC 6962 hashing, RATIONALE.md "Why a Merkle-tree log over the evidence?"):
// leaf i is the chain entry of seq i+1 (its entry bytes the 32 bytes of
// the entry's chain hash), integrated in batches by the store's
// sequencer. An entry is durable when its write commits and provable
// once its batch is integrated; LogSync integrates what is pending now.
// Every integration writes a checkpoint (C2SP tlog-checkpoint) signed by
// the host key as a C2SP signed note; LogVerifierKey is the note
// verifier key that opens it.
type EvidenceLog interface {
	// LogCheckpoint returns the checkpoint of the given size (0: the
	// newest); ErrNotFound when the log has none of that size.
	LogCheckpoint(ctx context.Context, size uint64) (*LogCheckpoint, error)
	// LogInclusion proves that the entry of seq is in the log of the
	// given size (0: the newest). An entry not yet integrated, or a size
	// never checkpointed, is ErrNotFound; a seq below 1 ErrValidation.
	LogInclusion(ctx context.Context, seq int64, size uint64) (*LogProof, error)
	// LogConsistency proves that the log of size from is a prefix of
	// the log of size to (0: the newest). from > to is ErrValidation; a
	// size never checkpointed is ErrNotFound.
	LogConsistency(ctx context.Context, from, to uint64) (*LogProof, error)
	// LogSync integrates every entry committed before it was called and
	// returns the newest checkpoint.
	LogSync(ctx context.Context) (*LogCheckpoint, error)
	// LogVerifierKey is the signed-note verifier key of the log's
	// checkpoints ("origin+hash+base64key"); "" when the store has no
	// key to sign them with (its checkpoints then carry no signature).
	LogVerifierKey() (string, error)
}

// LogCheckpoint is one integrated size of the evidence log: its root
// hash and the signed checkpoint note saying so.
type LogCheckpoint struct {
	Size uint64    `json:"size"`
	Root []byte    `json:"root"`
	Note string    `json:"note"`
	Time time.Time `json:"time"`
}

// LogProof is an inclusion proof (Index: the leaf index, seq-1; LeafHash
// its leaf hash; Size the log's size) or a consistency proof (From and
// Size the two sizes), Hashes the proof's hashes in RFC 6962 order.
type LogProof struct {
	Index    uint64   `json:"index,omitempty"`
	Size     uint64   `json:"size"`
	From     uint64   `json:"from,omitempty"`
	LeafHash []byte   `json:"leaf_hash,omitempty"`
	Hashes   [][]byte `json:"hashes"`
}
