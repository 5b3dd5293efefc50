// Package console is the operator console `packrun serve` mounts at
// /console/: server-rendered HTML pages (html/template, one embedded
// stylesheet, one small embedded script that refreshes the lists in place
// and is not needed to use them) over a narrow Backend, behind the same
// API tokens as the JSON API. It shows the installed packs, counts and
// pages of the tasks, attempts and messages, the schedules, workflow
// records and runtime events, replays an attempt and reports the evidence
// chain.
package console
