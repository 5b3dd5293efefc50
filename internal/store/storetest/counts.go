package storetest

import (
	"reflect"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// queueTenantCounts: a store counts one tenant's tasks by status, its
// attempts, its messages and their deliveries by status
// (host.TenantCounter), and nothing of another tenant's.
func queueTenantCounts(f *fixture) {
	t := f.t
	tc, ok := f.b.(host.TenantCounter)
	if !ok {
		t.Fatalf("%T does not count a tenant's rows (host.TenantCounter)", f.b)
	}
	f.enqueue(intent("alpha", nil), host.EnqueueOptions{Tenant: "acme"})
	f.clock.Add(time.Second)
	f.enqueue(intent("beta", nil), host.EnqueueOptions{})
	f.enqueue(intent("alpha", nil), host.EnqueueOptions{Tenant: "acme"})
	if done := f.finish(f.claim(), host.FinishInput{Outcome: okOutcome()}); done.Tenant != "acme" || done.Status != host.TaskCompleted {
		t.Fatalf("finished %+v", done)
	}
	// A message of the default tenant, delivered to one subscriber: one
	// more pending task of its.
	f.subscribe("responder", "crisis.*")
	f.publish(prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(1), "emotion_recognition"), ""))
	empty := &host.TenantCounts{Tasks: map[host.TaskStatus]int{}, Deliveries: map[host.DeliveryStatus]int{}}
	def := &host.TenantCounts{Tasks: map[host.TaskStatus]int{host.TaskPending: 2}, Messages: 1,
		Deliveries: map[host.DeliveryStatus]int{host.DeliveryQueued: 1}}
	for _, c := range []struct {
		tenant string
		want   *host.TenantCounts
	}{
		{"acme", &host.TenantCounts{Tasks: map[host.TaskStatus]int{host.TaskCompleted: 1, host.TaskPending: 1}, Attempts: 1,
			Deliveries: map[host.DeliveryStatus]int{}}},
		{host.DefaultTenant, def},
		{"", def},
		{"bob", empty},
	} {
		got, err := tc.TenantCounts(ctx, c.tenant)
		if err != nil {
			t.Fatalf("counts of %q: %v", c.tenant, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("counts of %q: %+v, want %+v", c.tenant, got, c.want)
		}
	}
}
