// Package console is the operator console `packrun serve` mounts at
// /console/: server-rendered HTML pages (html/template, one embedded
// stylesheet, no JavaScript) over a narrow Backend, behind the same API
// tokens as the JSON API. It shows the installed packs, the tasks and
// their attempts, replays an attempt and reports the evidence chain.
package console
