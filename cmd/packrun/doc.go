// Command packrun is the command-line face of the packrun packages: it parses
// flags, calls runtime (and later host and registry), and maps outcomes to
// exit codes. Everything it does is available as a Go API; run is the whole
// program and is what the tests drive.
package main
