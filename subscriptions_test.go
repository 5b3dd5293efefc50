package packrun

import (
	"errors"
	"reflect"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
)

// A subscribing node gets the route of its deliveries' task type
// (message:<typeId>) while its pack is installed.
func TestSubscriberRoutes(t *testing.T) {
	f := newFixture(t)
	f.install(t, packSpec{name: "local.publish", version: "1.0.0", module: "testdata/modules/publish.wasm", abiMinor: 2,
		extra: `"grants":{"services":["messages"],"topics":["ops.*"]},`,
		nodes: `[{"typeId":"test.publish","kind":"node","subscribes":["ops.alert"]},{"typeId":"test.outbox","kind":"node"}]`})
	r, err := f.store.Resolve(ctx, host.SubscriberTaskType("test.publish"))
	if err != nil || r.Pack != "local.publish" || r.Node != "test.publish" {
		t.Fatalf("route %+v %v", r, err)
	}
	if _, err := f.store.Resolve(ctx, host.SubscriberTaskType("test.outbox")); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("a node without subscriptions is routed: %v", err)
	}
	if _, err := f.Uninstall(ctx, "local.publish"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Resolve(ctx, host.SubscriberTaskType("test.publish")); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("route after uninstall: %v", err)
	}
}

func TestSubscriptionsOf(t *testing.T) {
	if packs.MaxSubscriptions != host.MaxSubscriptions {
		t.Fatalf("the manifest allows %d subscriptions per node, the store %d", packs.MaxSubscriptions, host.MaxSubscriptions)
	}
	m := &packs.Manifest{Nodes: []packs.Node{
		{TypeID: "a", Kind: packs.KindSkill, TaskTypes: []string{"t"}, Subscribes: []string{"crisis.*", "ops.alert"}},
		{TypeID: "b", Kind: packs.KindNode},
		{TypeID: "c", Kind: packs.KindSensor, Subscribes: []string{"*"}},
	}}
	routes, subs := subscriptionsOf("local.p", m)
	wantRoutes := []host.TaskTypeRoute{
		{TaskTypeSpec: host.TaskTypeSpec{TaskType: "message:a"}, Pack: "local.p", Node: "a"},
		{TaskTypeSpec: host.TaskTypeSpec{TaskType: "message:c"}, Pack: "local.p", Node: "c"},
	}
	wantSubs := []host.Subscription{
		{Pack: "local.p", Node: "a", TaskType: "message:a", Topics: []string{"crisis.*", "ops.alert"}},
		{Pack: "local.p", Node: "c", TaskType: "message:c", Topics: []string{"*"}},
	}
	if !reflect.DeepEqual(routes, wantRoutes) || !reflect.DeepEqual(subs, wantSubs) {
		t.Fatalf("routes %+v\nsubs %+v", routes, subs)
	}
	if routes, subs := subscriptionsOf("local.p", &packs.Manifest{Nodes: []packs.Node{{TypeID: "b"}}}); routes != nil || subs == nil || len(subs) != 0 {
		t.Fatalf("without subscriptions: %v %#v", routes, subs)
	}
}
