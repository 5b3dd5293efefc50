// Package buildinfo is what a packrun binary knows about its own build:
// module version, VCS revision, time and modified flag, Go and wazero
// versions, and the ABI versions it serves. `packrun version` prints it and
// GET /.well-known/packrun carries it; what the build did not record reads
// "unknown".
package buildinfo
