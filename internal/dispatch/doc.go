// Package dispatch turns tasks and invocation requests into runtime
// invocations: it binds the packrun:host/v1 services of one attempt (memory,
// queue staging, adapters, evidence, artifacts, config — each checked
// against the pack manifest's grants), runs the node, records the attempt as
// evidence, and settles the task. The Dispatcher is the loop behind
// `packrun serve`.
package dispatch
