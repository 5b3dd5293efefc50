// Package runstest is test support for openwop runs: polling a run in a
// store until it reaches a state, counting its events. Only tests import it.
package runstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Wait polls a default-tenant openwop run in runs until done says so
// (two minutes at most: a killed serve's dispatch lock must expire before
// another continues its runs) and returns the run and its log.
func Wait(t testing.TB, runs host.Runs, runID string, done func(*host.Run, []host.RunEvent) bool) (*host.Run, []host.RunEvent) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := runs.Run(ctx, host.DefaultTenant, runID)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := runs.RunEvents(ctx, host.DefaultTenant, runID)
		if err != nil {
			t.Fatal(err)
		}
		if done(r, evs) {
			return r, evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s after two minutes: %s, events %s", runID, r.Status, Types(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Count counts the events of evs of type typ about node nodeID.
func Count(evs []host.RunEvent, typ, nodeID string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ && e.NodeID == nodeID {
			n++
		}
	}
	return n
}

// Types lists evs as "type(nodeId)", for failure messages.
func Types(evs []host.RunEvent) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type+"("+e.NodeID+")")
	}
	return strings.Join(s, " ")
}
