package packrun

import (
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
)

// subscriptionsOf returns what a manifest's subscribing nodes (those with
// "subscribes": topic patterns within the pack's messages grant) need:
// each gets a route for the task type host.SubscriberTaskType(typeId), the
// task type of the deliveries the bus creates for it, and a subscription
// naming its patterns. The slice of subscriptions is never nil, so a pack
// without any clears the ones an earlier version had.
func subscriptionsOf(name string, m *packs.Manifest) ([]host.TaskTypeRoute, []host.Subscription) {
	var routes []host.TaskTypeRoute
	subs := []host.Subscription{}
	for _, n := range m.Nodes {
		if len(n.Subscribes) == 0 {
			continue
		}
		tt := host.SubscriberTaskType(n.TypeID)
		routes = append(routes, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: name, Node: n.TypeID})
		subs = append(subs, host.Subscription{Pack: name, Node: n.TypeID, TaskType: tt, Topics: n.Subscribes})
	}
	return routes, subs
}
