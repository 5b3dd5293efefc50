package host

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"
)

// NewID returns a new identifier "<prefix>_<time><random>": 12 hex digits
// of Unix milliseconds (so ids sort roughly by creation) and 80 random bits.
// The store uses the prefixes "task", "att" and "art".
func NewID(prefix string) string {
	var r [10]byte
	rand.Read(r[:])
	ms := strconv.FormatInt(time.Now().UnixMilli(), 16)
	for len(ms) < 12 {
		ms = "0" + ms
	}
	return prefix + "_" + ms + hex.EncodeToString(r[:])
}

// CheckID validates a caller-supplied identifier (1..128 bytes, no control
// characters).
func CheckID(op, field, id string) error {
	return checkName(op, field, id, 128, false)
}
