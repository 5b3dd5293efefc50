package postgres

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/packrun/packrun/internal/store/storecore"
)

// setupCache keeps the rows of task types' setups (TaskSetup) with the
// configuration version they were read at (migration 14: config_version,
// which every write to the tables they come from bumps in its own
// transaction). An entry is served while its version is the newest this
// node has seen: in a claim that returned a task (claims read the version
// in their statement), in this node's own configuration writes
// (writeConfig), or in a setup read. So a task's setup is as current as
// its claim, with no read of its own, unless something changed since; a
// change committed on another node is seen at this node's next claim.
//
// The rows are kept, not the records decoded from them: each caller gets
// records of its own (storecore.DecodeTaskSetup) and shares no slice.
type setupCache struct {
	seen atomic.Int64 // the newest configuration version seen
	mu   sync.Mutex
	m    map[string]cachedSetup
}

type cachedSetup struct {
	version int64
	rows    []storecore.TaskSetupRow
}

// maxCachedSetups bounds the task types cached: tasks of types nobody
// routes are read (and cached) too. Past it the cache starts again.
const maxCachedSetups = 1024

// saw notes configuration version v.
func (c *setupCache) saw(v int64) {
	for {
		cur := c.seen.Load()
		if v <= cur || c.seen.CompareAndSwap(cur, v) {
			return
		}
	}
}

// get returns taskType's rows if they were read at the newest version
// seen.
func (c *setupCache) get(taskType string) ([]storecore.TaskSetupRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[taskType]
	if !ok || e.version != c.seen.Load() {
		return nil, false
	}
	return e.rows, true
}

// put keeps taskType's rows read at version v.
func (c *setupCache) put(taskType string, v int64, rows []storecore.TaskSetupRow) {
	c.saw(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedSetups {
		c.m = map[string]cachedSetup{}
	}
	c.m[taskType] = cachedSetup{version: v, rows: rows}
}

// setupVersionKind is the row ReadTaskSetupRows reads the configuration
// version in (its key).
const setupVersionKind = storecore.SetupKindDriver

var setupVersionRow = `SELECT ` + strconv.Itoa(setupVersionKind) + `, version::text, '', '', '' FROM config_version`

// readSetup reads taskType's setup rows and the configuration version
// they were read at, in one statement, and caches them.
func (s *Store) readSetup(ctx context.Context, taskType string) ([]storecore.TaskSetupRow, error) {
	rows, err := storecore.ReadTaskSetupRows(ctx, corePool{s.pool}, taskType, setupVersionRow)
	if err != nil {
		return nil, err
	}
	for i, r := range rows {
		if r.Kind != setupVersionKind {
			continue
		}
		v, err := strconv.ParseInt(r.Key, 10, 64)
		if err != nil {
			return nil, err
		}
		rows = append(rows[:i], rows[i+1:]...)
		s.setups.put(taskType, v, rows)
		break
	}
	return rows, nil
}

// writeConfig is write for a change to the tables a task's setup is read
// from: once it commits, this node has seen the version it left, so no
// setup read before it is served again.
func (s *Store) writeConfig(ctx context.Context, fn func(*tx) error) error {
	var v int64
	err := s.write(ctx, func(x *tx) error {
		if err := fn(x); err != nil {
			return err
		}
		return x.QueryRow(ctx, `SELECT version FROM config_version`).Scan(&v)
	})
	if err == nil {
		s.setups.saw(v)
	}
	return err
}
