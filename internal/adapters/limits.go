package adapters

import "time"

// Limits on untrusted or unbounded input, all in one place.
const (
	// MaxConfigBytes caps adapters.json; a larger file is refused unread.
	MaxConfigBytes = 1 << 20
	// MaxEnvFileBytes caps an adapter's env_file.
	MaxEnvFileBytes = 1 << 20
	// MaxInputBytes caps Request.Input.
	MaxInputBytes = 16 << 20
	// MaxCaptureBytes caps what is kept of a call's stdout and of its stderr
	// (and of an HTTP response body). Beyond it output is counted but
	// dropped; stdout past the cap ends the call with exit_status error,
	// stderr past it only sets stderr_truncated.
	MaxCaptureBytes = 16 << 20
	// MaxTimeoutMS is the largest timeout_ms accepted (24 hours).
	MaxTimeoutMS = 24 * 60 * 60 * 1000
	// maxCallsPerAttempt bounds the evidence file numbers of one attempt.
	maxCallsPerAttempt = 100000
	// maxIDLen bounds adapter_id and attempt ids; maxTaskIDLen task ids.
	maxIDLen     = 128
	maxTaskIDLen = 256
	// excerptBytes is how much of stderr or an HTTP error body goes into
	// Call.Error.
	excerptBytes = 512
	// waitDelay is how long a finished or killed command may keep its
	// output pipes open (through a child that left the process group)
	// before they are closed.
	waitDelay = 2 * time.Second
)
