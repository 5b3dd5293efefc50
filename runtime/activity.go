package runtime

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/packrun/packrun/abi"
)

// activity is what an instance is doing right now: being prepared, or serving
// one invocation. Host functions, WASI sources and the memory allocator all
// report into the current activity, which is how limits, captured output and
// breaches stay per invocation even though the instance was created earlier.
type activity struct {
	limits   Limits
	deadline time.Time
	// deterministic activities (preparation) see a fixed clock and a random
	// stream seeded from the module digest, so a prepared instance's state
	// never depends on when or where it was prepared.
	deterministic bool
	fakeNanos     int64

	calls  int
	breach *Event
	// failure is set by a host function that decided the invocation fails
	// (for example, the guest's allocator returned an unusable buffer).
	failure *abi.Error

	clock func() time.Time
	// rng is created on first use from seed: most invocations never draw.
	rng  *rand.ChaCha8
	seed [32]byte
	// stop ends the guest's execution at its next check (the instance is
	// closed, or the preparation context cancelled).
	stop func()

	logs   []LogEntry
	logCap capture // byte budget for log messages
	stdout capture
	stderr capture

	state    RunState
	services Services
	trace    []Call
	// hostBytes is what the host holds for this invocation beyond the
	// guest's linear memory (trace, run state written), charged against
	// limits.HostMemoryBytes.
	hostBytes uint64
	// replay, when set, serves every host call from a recorded trace.
	replay     []Call
	replayAt   int
	divergence *Divergence
	resume     []json.RawMessage
	resumed    int
	interrupt  json.RawMessage
	// extHTTP is an Extism plugin's last http_request answer.
	extHTTP extismHTTP
}

var (
	// errAbort is panicked by host functions to stop the guest at once after
	// recording why on the activity; wazero recovers it and the call returns.
	errAbort = errors.New("packrun: invocation aborted by host")
	// errBreached is the cancel cause used when a limit is hit while an
	// instance is being prepared, so close-on-context-done stops the guest.
	errBreached = errors.New("packrun: limit breached")
	// errTimeout is the deadline cause of an invocation's own time limit.
	errTimeout = errors.New("packrun: execution time limit")
)

func newActivity(l Limits, clock func() time.Time) *activity {
	return &activity{
		limits: l,
		clock:  clock,
		logCap: capture{limit: l.CaptureBytes},
		stdout: capture{limit: l.CaptureBytes},
		stderr: capture{limit: l.CaptureBytes},
	}
}

// seedFor derives the random stream of an invocation from (runId, nodeId,
// attempt): the same triple always yields the same bytes.
func seedFor(runID, nodeID string, attempt int) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, s := range []string{"packrun/openwop_random/v1", runID, nodeID} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	binary.LittleEndian.PutUint64(n[:], uint64(int64(attempt)))
	h.Write(n[:])
	var seed [32]byte
	h.Sum(seed[:0])
	return seed
}

// count charges one host call and aborts the guest when the budget is spent.
func (a *activity) count() {
	a.calls++
	if a.calls > a.limits.HostCalls {
		a.hit(Event{Type: EventCapBreached, Kind: abi.CapHostCalls, Limit: int64(a.limits.HostCalls), Observed: int64(a.calls)})
		panic(errAbort)
	}
}

// charge adds n bytes the host holds for the guest and aborts the guest
// when they pass the invocation's host-memory budget.
func (a *activity) charge(n int) {
	a.hostBytes += uint64(n)
	if a.hostBytes > a.limits.HostMemoryBytes {
		a.hit(Event{Type: EventCapBreached, Kind: abi.CapHostMemory, Limit: int64(a.limits.HostMemoryBytes), Observed: int64(a.hostBytes)})
		panic(errAbort)
	}
}

// hitTime ends the invocation with a time breach.
func (a *activity) hitTime() {
	ms := a.limits.Timeout.Milliseconds()
	a.hit(Event{Type: EventCapBreached, Kind: abi.CapTime, Limit: ms, Observed: max(ms, time.Since(a.deadline.Add(-a.limits.Timeout)).Milliseconds())})
	panic(errAbort)
}

// hit records the first breach and cancels the activity's context so that a
// guest still running is closed by wazero.
func (a *activity) hit(e Event) {
	if a.breach == nil {
		a.breach = &e
	}
	if a.stop != nil {
		a.stop()
	}
}

// random returns the activity's random stream, seeded on first use.
func (a *activity) random() *rand.ChaCha8 {
	if a.rng == nil {
		a.rng = rand.NewChaCha8(a.seed)
	}
	return a.rng
}

func (a *activity) fail(code, msg string) {
	if a.failure == nil {
		a.failure = &abi.Error{Code: code, Message: msg}
	}
	panic(errAbort)
}

func (a *activity) now() time.Time {
	if a.deterministic {
		return time.Unix(0, 0)
	}
	return a.clock()
}

func (a *activity) nanotime() int64 {
	if a.deterministic {
		a.fakeNanos += 1000
		return a.fakeNanos
	}
	return a.clock().UnixNano()
}

func (a *activity) log(level int32, msg string) {
	// Each entry is charged its bookkeeping too, so a flood of empty
	// messages is bounded like a flood of long ones.
	if !a.logCap.take(len(msg) + logEntryOverhead) {
		return
	}
	a.logs = append(a.logs, LogEntry{Level: abi.LogLevelName(level), Message: msg})
}

const logEntryOverhead = 32

// capture keeps at most limit bytes and remembers that it dropped some.
type capture struct {
	buf       []byte
	used      int
	limit     int
	truncated bool
}

func (c *capture) take(n int) bool {
	if c.used+n > c.limit {
		c.truncated = true
		return false
	}
	c.used += n
	return true
}

func (c *capture) Write(p []byte) (int, error) {
	room := c.limit - len(c.buf)
	if room < len(p) {
		c.truncated = true
		p = p[:max(room, 0)]
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}
