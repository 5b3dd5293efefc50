package guesttest

import (
	"context"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/hosttest"
)

// TestPublishServices checks the fake itself.
func TestPublishServices(t *testing.T) {
	s := NewServices()
	for _, c := range []struct {
		name, req string
		status    abi.Status
		resp      string
	}{
		{"staged", `{"format":"bus-envelope","message":` + OpsAlert + `}`, abi.StatusOK, `"staged":1,"status":"staged"}`},
		{"off grant", `{"format":"bus-envelope","message":` + OffGrant + `}`, abi.StatusAccessDenied, `billing.charge`},
		{"invalid", `{"format":"bus-envelope","message":` + InvalidMsg + `}`, abi.StatusValidation, `{"error":`},
		{"format", `{"format":"smoke","message":` + OpsAlert + `}`, abi.StatusValidation, `{"error":`},
	} {
		st, resp := s.Serve(context.Background(), abi.HostMessagePublish, []byte(c.req))
		if st != c.status || !strings.Contains(string(resp), c.resp) {
			t.Errorf("%s: %d %s, want %d with %s", c.name, st, resp, c.status, c.resp)
		}
	}
	if st, _ := s.Serve(context.Background(), abi.HostQueueEnqueue, []byte(`{}`)); st != abi.StatusOK {
		t.Errorf("queue_enqueue: %d", st)
	}
}

// TestSensorServices checks the sensor_emit fake.
func TestSensorServices(t *testing.T) {
	s := NewServices()
	for _, c := range []struct {
		name, req string
		status    abi.Status
		resp      string
	}{
		{"staged", SensorEvent, abi.StatusOK, `{"event_id":"ev-1","staged":1,"status":"staged"}`},
		{"invalid", InvalidEvent, abi.StatusValidation, ``},
		{"other sensor", strings.Replace(SensorEvent, `{`, `{"sensor_id":"other.sensor",`, 1), abi.StatusValidation, ``},
		{"own sensor", strings.Replace(SensorEvent, `{`, `{"sensor_id":"`+SensorNode+`",`, 1), abi.StatusOK, `{"event_id":"ev-1","staged":2,"status":"staged"}`},
		{"not JSON", `{`, abi.StatusValidation, ``},
	} {
		st, resp := s.Serve(context.Background(), abi.HostSensorEmit, []byte(c.req))
		if st != c.status || string(resp) != c.resp {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, resp, c.status, c.resp)
		}
	}
	if n := len(s.CallsOf(abi.HostSensorEmit)); n != 5 {
		t.Errorf("recorded %d sensor_emit calls, want 5", n)
	}
}

// TestHTTPServices checks the http_request fake: canned answers by URL,
// refusals with their {"error","kind"}, nothing when not granted.
func TestHTTPServices(t *testing.T) {
	s := NewServices()
	for _, c := range []struct {
		url    string
		status abi.Status
		resp   string
	}{
		{HTTPBase + "/json", abi.StatusOK, `"status":200`},
		{HTTPBase + "/echo", abi.StatusOK, `"status":404`},
		{HTTPBase + "/denied", abi.StatusAccessDenied, `{"error":`},
		{HTTPBase + "/big", abi.StatusCapabilityBreach, `"kind":"http-response-bytes"`},
		{HTTPBase + "/nothing", abi.StatusValidation, `{"error":`},
	} {
		st, resp := s.Serve(context.Background(), abi.HostHTTPRequest, []byte(`{"method":"GET","url":"`+c.url+`"}`))
		if st != c.status || !strings.Contains(string(resp), c.resp) {
			t.Errorf("%s: %d %s, want %d with %s", c.url, st, resp, c.status, c.resp)
		}
	}
	s = NewServices(hosttest.Grant(abi.HostMemoryGet))
	if st, resp := s.Serve(context.Background(), abi.HostHTTPRequest, []byte(`{"url":"`+HTTPBase+`/json"}`)); st != abi.StatusAccessDenied || resp != nil {
		t.Errorf("not granted: %d %s", st, resp)
	}
}
