package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// chainQuery reads both tables' entries in one pass, in seq order (an
// event before an attempt claiming the same place), each
// artifact_recorded event with the artifact row it names, if any: the
// walk then needs no other query while it streams.
const chainQuery = `SELECT e.seq, true, e.time, e.type, e.task_id, e.attempt_id, e.data, e.prev_hash, e.hash, 0::bigint, '', '', '', NULL::bytea,
		ar.artifact_id IS NOT NULL, coalesce(ar.task_id, ''), coalesce(ar.attempt_id, ''), coalesce(ar.role, ''), coalesce(ar.relative_path, ''),
		coalesce(ar.sha256, ''), coalesce(ar.size, 0), ` + messageJoinColumns + `
	FROM runtime_events e LEFT JOIN artifacts ar
		ON ar.artifact_id = CASE WHEN e.type = 'artifact_recorded' THEN e.data::jsonb ->> 'artifact_id' END` + messageJoin + `
	WHERE e.seq >= 0
	UNION ALL SELECT seq, false, '', '', task_id, attempt_id, '', prev_hash, hash, attempt, tenant, pack, started_at, record,
		false, '', '', '', '', '', 0, false, '', '', '', 0
	FROM attempt_records WHERE seq > 0
	ORDER BY 1, 2 DESC`

func scanChainEntry(rows pgx.Rows) (*storecore.ChainEntry, error) {
	var seq, attempt int64
	var isEvent, hasArt bool
	var t, typ, taskID, attemptID, data, prev, hash, tenant, pack, started string
	var rec []byte
	var art host.Artifact
	var role string
	var msg joinedMessage
	if err := rows.Scan(append([]any{&seq, &isEvent, &t, &typ, &taskID, &attemptID, &data, &prev, &hash, &attempt, &tenant, &pack, &started, &rec,
		&hasArt, &art.TaskID, &art.AttemptID, &role, &art.RelativePath, &art.SHA256, &art.Size}, msg.dest()...)...); err != nil {
		return nil, err
	}
	if isEvent {
		e := &host.Event{Seq: seq, Time: parseTS(t), Type: typ, TaskID: taskID, AttemptID: attemptID, PrevHash: prev, Hash: hash}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		ce := &storecore.ChainEntry{Seq: seq, Ev: e, Msg: msg.record()}
		if hasArt {
			art.Role = host.ArtifactRole(role)
			ce.Art = &art
		}
		return ce, nil
	}
	return &storecore.ChainEntry{Seq: seq, At: &storecore.AttemptRow{Seq: seq, AttemptID: attemptID, TaskID: taskID, Tenant: tenant, Pack: pack, StartedAt: started,
		Attempt: attempt, Record: rec, Prev: prev, Hash: hash}}, nil
}

// VerifyChain implements host.Evidence (storecore.VerifyChain): the walk
// reads both tables in one statement (chainQuery) in one REPEATABLE READ
// snapshot, so appends committed meanwhile by other nodes are not half
// seen; the unchained rows and the values are checked in that snapshot.
// The chain must hold this node's signed head checkpoint (checkpoint.go).
func (s *Store) VerifyChain(ctx context.Context) (*host.ChainReport, error) {
	var tx pgx.Tx
	defer func() {
		if tx != nil {
			tx.Rollback(ctx)
		}
	}()
	return storecore.VerifyChain(s.checkAnchor, func(rep *host.ChainReport, anchor *host.ChainHead) (*host.ChainBreak, error) {
		var err error
		if tx, err = s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}); err != nil {
			return nil, err
		}
		return walkChain(ctx, tx, rep, anchor)
	}, func(*host.ChainReport, *host.ChainHead) (*host.ChainBreak, error) {
		return storecore.FindUnchained(ctx, corePool{tx}, storecore.PostgresDialect)
	}, func(*host.ChainReport, *host.ChainHead) (*host.ChainBreak, error) {
		return checkValues(ctx, tx)
	})
}

// walkChain walks the chain into rep and checks that it holds anchor (nil:
// no checkpoint).
func walkChain(ctx context.Context, tx pgx.Tx, rep *host.ChainReport, anchor *host.ChainHead) (*host.ChainBreak, error) {
	rows, err := tx.Query(ctx, chainQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return storecore.WalkChain(storecore.ChainWalk{Next: func() (*storecore.ChainEntry, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		return scanChainEntry(rows)
	}}, rep, anchor)
}

// verifier is VerifyAttempt's and EachVerifiedAttempt's view of the store.
func (s *Store) verifier() storecore.Verifier {
	return storecore.Verifier{Q: corePool{s.pool}, Dialect: storecore.PostgresDialect, Checkpoint: s.checkAnchor, Read: s.readValues}
}

// VerifyAttempt implements host.Evidence (storecore.Verifier).
func (s *Store) VerifyAttempt(ctx context.Context, attemptID string) error {
	return s.verifier().VerifyAttempt(ctx, attemptID)
}

// EachVerifiedAttempt implements host.Evidence (storecore.Verifier).
func (s *Store) EachVerifiedAttempt(ctx context.Context, f host.AttemptFilter, fn func(*host.Attempt, error) error) error {
	return s.verifier().EachVerifiedAttempt(ctx, f, fn)
}

// checkValues is the value pass of VerifyChain, after the walk and in its
// snapshot: every value a version 3 record names out of line must be
// stored and still hash to its digest (storecore.ValueCheck). Each is
// read and hashed once, however many attempts name it.
func checkValues(ctx context.Context, tx pgx.Tx) (*host.ChainBreak, error) {
	var values storecore.ValueCheck
	rows, err := tx.Query(ctx, `SELECT seq, attempt_id, record FROM attempt_records WHERE substring(record FROM 1 FOR 1) = $1 ORDER BY seq`, []byte{evidence.RecordV3})
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var seq int64
		var id string
		var rec []byte
		if err := rows.Scan(&seq, &id, &rec); err != nil {
			rows.Close()
			return nil, err
		}
		values.Need(seq, id, rec)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(values.Keys()) == 0 {
		return nil, nil
	}
	rows, err = tx.Query(ctx, `SELECT digest, value FROM evidence_values WHERE digest = ANY($1)`, values.Keys())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		values.Check(k, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return values.Break(), nil
}
