package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
)

// Server-sent events of a run (GET /v1/runs/{id}/events with Accept:
// text/event-stream), as openwop's spec/v1/stream-modes.md describes them.

// streamModes are the values of ?streamMode= (updates when left out).
var streamModes = []string{"updates", "values", "messages", "debug"}

// The stream's timing; variables so that tests can shorten them.
var (
	// sseHeartbeat is how often a comment line is sent while nothing
	// else is, so that proxies keep an idle stream open.
	sseHeartbeat = 15 * time.Second
	// ssePoll is how often the run's log is read again for new events.
	ssePoll = 250 * time.Millisecond
	// sseWriteTimeout is how long one round of writes (a batch of events
	// and its flush) may take: a client that reads slower is cut.
	sseWriteTimeout = 10 * time.Second
)

// sseBatch is the most events written between two flushes; with the
// connection's own write buffer (sseBufferBytes), it bounds what a
// client holds in the server's memory beyond the socket's buffer.
const (
	sseBatch       = 256
	sseBufferBytes = 16 << 10
)

// updatesTypes are the run event types the updates (and values) mode
// admits; debug admits every type, messages only ai.message.chunk.
var updatesTypes = map[string]bool{
	host.RunEventStarted: true, host.RunEventCompleted: true, host.RunEventFailed: true, host.RunEventCancelled: true,
	"run.paused": true, "run.resumed": true, "run.annotated": true, "workspace.updated": true,
	"node.completed": true, "node.failed": true, "node.skipped": true, "node.suspended": true, "node.dispatched": true,
	"approval.requested": true, "approval.received": true, "clarification.requested": true, "clarification.resolved": true,
	"interrupt.requested": true, "interrupt.resolved": true, "artifact.created": true,
}

// admits says whether mode streams an event of type typ.
func admits(mode, typ string) bool {
	switch mode {
	case "debug":
		return true
	case "messages":
		return typ == "ai.message.chunk"
	}
	return updatesTypes[typ]
}

// streamMode is the request's ?streamMode= (updates when left out), or a
// 400 naming the modes served.
func streamMode(r *http.Request) (string, error) {
	m := r.URL.Query().Get("streamMode")
	if m == "" {
		return "updates", nil
	}
	if !slices.Contains(streamModes, m) {
		ae := refuse(http.StatusBadRequest, CodeInvalid, "streamMode",
			fmt.Sprintf("streamMode: %q is not served; the modes are %s", host.ShortName(m), strings.Join(streamModes, ", ")))
		ae.supported = streamModes
		return "", ae
	}
	return m, nil
}

// wantsEventStream says whether the request asks for server-sent events:
// an Accept header naming text/event-stream. Every other Accept (none
// included) gets the JSON list.
func wantsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// lastEventID is the request's Last-Event-ID: the seq of the last event
// the client holds (-1 when absent).
func lastEventID(r *http.Request) (int, error) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, refuse(http.StatusBadRequest, CodeInvalid, "Last-Event-ID", fmt.Sprintf("Last-Event-ID: %q is not an event's seq (a whole number >= 0)", host.ShortName(v)))
	}
	return n, nil
}

// clientCtxKey keys the request's own context, which net/http cancels
// when the client goes; the API serves every request under one that is
// not cancelled (New), a stream under this one.
type clientCtxKey struct{}

// clientContext is the context of r's connection: done when the client
// goes or the handler returns.
func clientContext(r *http.Request) context.Context {
	if c, ok := r.Context().Value(clientCtxKey{}).(context.Context); ok {
		return c
	}
	return r.Context()
}

// sseWriter writes the frames of one stream, each round under a write
// deadline.
type sseWriter struct {
	w   *bufio.Writer
	rc  *http.ResponseController
	err error
}

func (sw *sseWriter) frame(id int, typ string, data any) {
	if sw.err != nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		sw.err = err
		return
	}
	_, sw.err = fmt.Fprintf(sw.w, "id: %d\nevent: %s\ndata: %s\n\n", id, typ, b)
}

func (sw *sseWriter) comment(text string) {
	if sw.err == nil {
		_, sw.err = fmt.Fprintf(sw.w, ": %s\n\n", text)
	}
}

// flush sends what is buffered; a client that does not take it within
// sseWriteTimeout is cut.
func (sw *sseWriter) flush() error {
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	if sw.err == nil {
		sw.err = sw.rc.Flush()
	}
	return sw.err
}

// arm sets the deadline of the next round of writes.
func (sw *sseWriter) arm() {
	if sw.err == nil {
		if err := sw.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout)); err != nil {
			sw.err = err
		}
	}
}

// streamRunEvents streams a run's events as server-sent events: each
// event's seq is its id, so Last-Event-ID resumes just after it. The
// stream ends once the run is terminal and its last event is sent, when
// the client goes, or when the client does not read (sseWriteTimeout).
func (s *server) streamRunEvents(w http.ResponseWriter, r *http.Request, rs RunService, mode string) error {
	tenant, id := tenantOf(r, ""), r.PathValue("id")
	last, err := lastEventID(r)
	if err != nil {
		return err
	}
	ctx := clientContext(r)
	// A run that is not there (or not the tenant's) is a 404, before the
	// stream starts.
	if _, err := rs.GetRun(ctx, tenant, id); err != nil {
		return err
	}
	var run *host.Run // read each round below
	rc := http.NewResponseController(w)
	// The server's ReadTimeout must not end a long stream: the request
	// was read whole already.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: bufio.NewWriterSize(w, sseBufferBytes), rc: rc}
	sw.arm()
	sw.comment("packrun run events, streamMode=" + mode)
	if err := sw.flush(); err != nil {
		return nil // the client is gone: nothing more to answer
	}
	snapshot := mode == "values" // a values stream starts with a snapshot
	poll := time.NewTicker(ssePoll)
	defer poll.Stop()
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	for {
		// The status is read before the log: a run terminal then has all
		// its events in the log read after.
		if run, err = rs.GetRun(ctx, tenant, id); err != nil {
			return nil
		}
		evs, err := rs.RunEvents(ctx, tenant, id)
		if err != nil {
			return nil
		}
		i, _ := slices.BinarySearchFunc(evs, last+1, func(e host.RunEvent, seq int) int { return e.Seq - seq })
		n := 0
		for _, ev := range evs[i:] {
			last = ev.Seq
			if !admits(mode, ev.Type) {
				continue
			}
			if mode == "values" {
				snapshot = true
				continue
			}
			if n > 0 && n%sseBatch == 0 {
				if sw.flush() != nil {
					return nil
				}
				sw.arm()
			}
			sw.frame(ev.Seq, ev.Type, ev)
			n++
		}
		wrote := n > 0
		if snapshot && last >= 0 {
			if cur, err := rs.GetRun(ctx, tenant, id); err == nil {
				run = cur
			}
			sw.frame(last, "state.snapshot", run)
			snapshot, wrote = false, true
		}
		if wrote {
			if sw.flush() != nil {
				return nil
			}
			beat.Reset(sseHeartbeat)
		}
		if host.RunTerminal(run.Status) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		case <-beat.C:
			sw.arm()
			sw.comment("heartbeat")
			if sw.flush() != nil {
				return nil
			}
		}
		sw.arm()
	}
}
