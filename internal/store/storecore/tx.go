package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
)

// ErrNoRows is what a driver's Row.Scan returns when the query had no
// row (its own sql.ErrNoRows or pgx.ErrNoRows, translated).
var ErrNoRows = errors.New("no rows in result set")

// Store rules written once (see RATIONALE.md, "Why are store rules
// written against a transaction interface?") run against Tx, a driver's
// write transaction seen through four calls, and read through Querier.
// Their SQL is the one text both backends accept, with PostgreSQL's
// numbered placeholders ($1, $2...; a driver rewrites them to its own,
// RebindQuestion); what really differs between the backends is in
// Dialect.

// Rows are the rows of a query; Close may be called more than once.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier reads: a write transaction or a driver's pool.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Tx is a driver's write transaction: statements, and the event append
// (the runtime event of the change, chained in the same transaction).
type Tx interface {
	Querier
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Event appends a runtime event with data (marshalled as JSON).
	Event(typ, taskID, attemptID string, data any) error
	Dialect() *Dialect
}

// Dialect is what differs between the backends in the rules written once.
type Dialect struct {
	// LockRows ends a SELECT of rows the transaction goes on to change,
	// so a concurrent writer waits: " FOR UPDATE" on PostgreSQL, where
	// transactions of several nodes write at once; "" on SQLite, whose
	// single writer runs one write transaction at a time.
	LockRows string
	// SkipLocked ends a SELECT of rows to claim that other writers may
	// be claiming: " FOR UPDATE SKIP LOCKED" on PostgreSQL, "" on SQLite.
	SkipLocked string
	// True is the boolean literal matching the backends' partial indexes
	// ("TRUE" on PostgreSQL; "1" on SQLite, whose indexes say = 1).
	True string
	// RunOrder is the column numbering openwop_runs in the order they
	// were inserted: "seq" on PostgreSQL, "rowid" on SQLite (whose
	// table has no seq column).
	RunOrder string
	// DataField is the text of a JSON column's field (an event's data):
	// "(expr::jsonb ->> 'key')" on PostgreSQL, json_extract on SQLite.
	DataField func(expr, key string) string
	// InList is the condition "is one of seqs" with its argument (as $1):
	// "= ANY($1)" on PostgreSQL, json_each of a JSON array on SQLite.
	InList func(seqs []int64) (cond string, arg any, err error)
	// HasPrefix is the condition "col starts with prefix", its arguments
	// added to a: starts_with on PostgreSQL, substr on SQLite.
	HasPrefix func(col, prefix string, a *Args) string
	// Pending says chain rows with a negative seq are pending (written,
	// not linked yet: PostgreSQL's appends without the chain lock), not
	// rows outside the chain: attempt listings and verification pass
	// over them until they are linked.
	Pending bool
}

// Placed is the condition that keeps an attempts' query to the rows
// with a place in the chain where rows may be pending (Dialect.Pending),
// "" where every row was placed as it was written.
func (d *Dialect) Placed() string {
	if d.Pending {
		return ` AND seq > 0`
	}
	return ""
}

// Dialects of the two backends.
var (
	PostgresDialect = &Dialect{LockRows: " FOR UPDATE", SkipLocked: " FOR UPDATE SKIP LOCKED", True: "TRUE", RunOrder: "seq", Pending: true,
		DataField: func(expr, key string) string { return "(" + expr + "::jsonb ->> '" + key + "')" },
		InList:    func(seqs []int64) (string, any, error) { return "= ANY($1)", seqs, nil },
		HasPrefix: func(col, prefix string, a *Args) string { return "starts_with(" + col + ", " + a.Add(prefix) + ")" },
	}
	SQLiteDialect = &Dialect{True: "1", RunOrder: "rowid",
		DataField: func(expr, key string) string { return "json_extract(" + expr + ", '$." + key + "')" },
		InList: func(seqs []int64) (string, any, error) {
			b, err := json.Marshal(seqs)
			return "IN (SELECT value FROM json_each($1))", string(b), err
		},
		HasPrefix: func(col, prefix string, a *Args) string {
			return "substr(" + col + ", 1, " + a.Add(len(prefix)) + ") = " + a.Add(prefix)
		},
	}
)

var rebound sync.Map // query text -> its ?N form

// RebindQuestion rewrites a rule's $N placeholders to SQLite's ?N (the
// same numbering); rules' SQL holds no '$' otherwise. Each text is
// rewritten once and kept.
func RebindQuestion(query string) string {
	if q, ok := rebound.Load(query); ok {
		return q.(string)
	}
	b := []byte(query)
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '$' && b[i+1] >= '0' && b[i+1] <= '9' {
			b[i] = '?'
		}
	}
	q := string(b)
	if strings.IndexByte(query, '$') < 0 {
		q = query
	}
	rebound.Store(query, q)
	return q
}
