package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/packrun/packrun/host"
)

// maxPollTimeout is the longest GET /v1/runs/{id}/events/poll waits for
// an event (its timeout, in seconds).
const maxPollTimeout = 30

// pollInterval is how often a waiting poll looks at the run again.
const pollInterval = 200 * time.Millisecond

// pollEvent is an event in openwop's RunEventDoc shape
// (run-event.schema.json: eventId, runId, type, payload, timestamp,
// sequence), with packrun's own names (seq, at, data, nodeId) kept so one
// decoder reads both routes.
type pollEvent struct {
	EventID   string          `json:"eventId"`
	RunID     string          `json:"runId"`
	Type      string          `json:"type"`
	NodeID    string          `json:"nodeId,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	Data      json.RawMessage `json:"data"`
	Timestamp string          `json:"timestamp"`
	Sequence  int             `json:"sequence"`
	Seq       int             `json:"seq"`
	At        time.Time       `json:"at"`
}

// runEventPoll is the answer to GET /v1/runs/{id}/events/poll: the events
// after lastSequence, in sequence order; isComplete once the run is
// terminal and no event follows these; nextSequence the lastSequence of
// the next poll.
type runEventPoll struct {
	Events       []pollEvent `json:"events"`
	IsComplete   bool        `json:"isComplete"`
	NextSequence int         `json:"nextSequence"`
}

// pollRunEvents is GET /v1/runs/{id}/events/poll?lastSequence=N&timeout=S
// (openwop rest-endpoints.md): the run's events whose sequence is over N;
// when there are none and the run is not terminal, it waits up to S
// seconds (default 0, at most maxPollTimeout) for one. A lastSequence past
// the end is an empty answer, not an error.
func (s *server) pollRunEvents(w http.ResponseWriter, r *http.Request, rs RunService) error {
	q := r.URL.Query()
	last, err := queryInt(q.Get("lastSequence"), "lastSequence", 0, 1<<53)
	if err != nil {
		return err
	}
	wait, err := queryInt(q.Get("timeout"), "timeout", 0, maxPollTimeout)
	if err != nil {
		return err
	}
	tenant, id := tenantOf(r, ""), r.PathValue("id")
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		// The status is read before the events: a run terminal then has
		// all its events in what follows.
		run, err := rs.GetRun(r.Context(), tenant, id)
		if err != nil {
			return err
		}
		evs, err := rs.RunEvents(r.Context(), tenant, id)
		if err != nil {
			return err
		}
		out := runEventPoll{Events: []pollEvent{}, IsComplete: host.RunTerminal(run.Status), NextSequence: int(last)}
		for _, e := range evs {
			if int64(e.Seq) <= last {
				continue
			}
			out.Events = append(out.Events, pollEvent{EventID: e.RunID + ":" + strconv.Itoa(e.Seq), RunID: e.RunID, Type: e.Type, NodeID: e.NodeID,
				Payload: orNull(e.Payload), Data: orNull(e.Data), Timestamp: e.At.UTC().Format(time.RFC3339Nano), Sequence: e.Seq, Seq: e.Seq, At: e.At})
			out.NextSequence = max(out.NextSequence, e.Seq)
		}
		if len(out.Events) > 0 || out.IsComplete || !time.Now().Before(deadline) {
			reply(w, http.StatusOK, out)
			return nil
		}
		time.Sleep(min(pollInterval, time.Until(deadline)))
	}
}

// orNull is m, or JSON null when it is empty: payload is always present.
func orNull(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("null")
	}
	return m
}
