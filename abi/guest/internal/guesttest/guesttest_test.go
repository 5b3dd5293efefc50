package guesttest

import (
	"context"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
)

func TestServeMessagePublish(t *testing.T) {
	s := NewServices()
	for _, tc := range []struct {
		name, req string
		status    abi.Status
		resp      string
	}{
		{"staged", `{"format":"bus-envelope","message":` + OpsAlert + `}`, abi.StatusOK, `"staged":1,"status":"staged"}`},
		{"off grant", `{"format":"bus-envelope","message":` + OffGrant + `}`, abi.StatusAccessDenied, `billing.charge`},
		{"invalid", `{"format":"bus-envelope","message":` + Invalid + `}`, abi.StatusValidation, `{"error":`},
		{"format", `{"format":"smoke-signal","message":` + OpsAlert + `}`, abi.StatusValidation, `{"error":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, resp := s.Serve(context.Background(), abi.HostMessagePublish, []byte(tc.req))
			if st != tc.status || !strings.Contains(string(resp), tc.resp) {
				t.Fatalf("%d %s, want %d with %s", st, resp, tc.status, tc.resp)
			}
		})
	}
	if n := len(s.Staged()); n != 1 {
		t.Fatalf("%d staged, want 1", n)
	}
	// The other calls reach hosttest's fake.
	if st, _ := s.Serve(context.Background(), abi.HostQueueEnqueue, []byte(`{}`)); st != abi.StatusOK {
		t.Fatalf("queue_enqueue: %d", st)
	}
}
