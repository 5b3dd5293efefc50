// Package quota bounds what one tenant can make a host store and run:
// schedules (a count and a minimum interval), active workflow records,
// transitions per workflow record, unfinished tasks, and sensor events
// and messages a minute. The rules are written here once; the stores only
// count (host.UsageCounter) and apply the two rules that must hold inside
// their own writes (host.StoreQuotas), which a Keeper implements.
package quota
