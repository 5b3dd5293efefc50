// Command packrun is the command-line face of package packrun (the module
// root): it parses flags, opens the home as a packrun.Host (packrun.Open),
// calls the Host method for the job — invoke, install, list, replay, serve's
// Run and Handler, and the store reads behind Host.Store — prints the result
// (text, or one JSON object with --json), and maps errors to exit codes
// through the one table in exit.go. The rules an attempt follows live in the
// Host and below, not here. Everything it does is available as a Go API; run
// is the whole program and is what the tests drive.
package main
