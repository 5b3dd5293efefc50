// Package messagetest holds the example messages of the three message specs
// (BlackRoad envelope, AgentOS, AICO; copied as the specs write them, the
// AICO message formats' with their // comments) for the tests of the packages
// that carry messages, and builds fresh ones.
package messagetest

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

//go:embed seeds
var seeds embed.FS

// Seed returns one example: "seed000/example1.json",
// "seed001/response.json", "bus/crisis.detection.jsonc" (its // comments
// removed).
func Seed(name string) []byte {
	b, err := seeds.ReadFile("seeds/" + name)
	if err != nil {
		panic(err)
	}
	if strings.HasSuffix(name, ".jsonc") {
		return StripLineComments(b)
	}
	return b
}

// StripLineComments removes // comments outside JSON strings.
func StripLineComments(b []byte) []byte {
	var out []byte
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			inStr = !(c == '"' && !esc)
			esc = c == '\\' && !esc
		case c == '"':
			inStr = true
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i < len(b) {
				out = append(out, '\n')
			}
			continue
		}
		out = append(out, c)
	}
	return out
}

// ulidAlphabet is Crockford's base32, as ULIDs write it.
const ulidAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ULID returns a valid ULID made from n (distinct n, distinct ids).
func ULID(n int) string {
	var b [26]byte
	for i := range b {
		b[i] = '0'
	}
	for i, x := 25, n; i >= 10 && x > 0; i, x = i-1, x/32 {
		b[i] = ulidAlphabet[x%32]
	}
	return string(b[:])
}

// ZeroHash is a prev_truth_state for a sender's first message.
var ZeroHash = strings.Repeat("0", 64)

// Envelope returns a BlackRoad envelope from agent://from with intent and
// prev_truth_state prev, its id ULID(n).
func Envelope(n int, from, intent, prev string) []byte {
	doc := map[string]any{"id": ULID(n), "ts": time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC).Format(time.RFC3339),
		"from": "agent://" + from, "intent": intent, "payload": map[string]any{"n": n}, "prev_truth_state": prev}
	b, _ := json.Marshal(doc)
	return b
}

// Crisis returns the AICO message formats' crisis.detection example with message id
// id and source source.
func Crisis(id, source string) []byte {
	var doc map[string]map[string]any
	if err := json.Unmarshal(Seed("bus/crisis.detection.jsonc"), &doc); err != nil {
		panic(err)
	}
	doc["metadata"]["message_id"], doc["metadata"]["source"] = id, source
	b, _ := json.Marshal(doc)
	return b
}

// BusID returns an AICO message id (the spec's 8-4-4-4-12 shape) made
// from n.
func BusID(n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(n)))
	h := hex.EncodeToString(sum[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
