package witness

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
)

const (
	// MaxBodyBytes bounds an add-checkpoint request body (and so the
	// checkpoint note in it): a checkpoint is a few hundred bytes and a
	// proof at most MaxProofHashes lines of 45.
	MaxBodyBytes = 64 << 10
	// MaxProofHashes bounds a consistency proof: a tree of 2^64 leaves
	// needs fewer.
	MaxProofHashes = 63
	// HashSize is the size of a log's root hash and of each proof hash
	// (SHA-256, RFC 6962).
	HashSize = 32
)

// AddRequest is the body of a tlog-witness add-checkpoint request.
type AddRequest struct {
	OldSize    uint64   // size of the last checkpoint the log believes the witness cosigned
	Proof      [][]byte // consistency proof from OldSize to the checkpoint's size
	Checkpoint []byte   // the signed checkpoint note
}

// Marshal encodes the request as tlog-witness says: "old N", one base64
// proof hash a line, a blank line, the checkpoint note.
func (r AddRequest) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", r.OldSize)
	for _, h := range r.Proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(r.Checkpoint)
	return b.Bytes()
}

// ParseAddCheckpoint decodes an add-checkpoint request body. It checks the
// syntax only (a canonical decimal size, at most MaxProofHashes proof
// lines of exactly HashSize bytes, a non-empty note within MaxBodyBytes);
// the note's signature and the proof are checked by the witness.
func ParseAddCheckpoint(body []byte) (AddRequest, error) {
	var r AddRequest
	if len(body) > MaxBodyBytes {
		return r, fmt.Errorf("%w request: body is over %d bytes", ErrMalformed, MaxBodyBytes)
	}
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return r, fmt.Errorf("%w request: no \"old\" line", ErrMalformed)
	}
	num, ok := bytes.CutPrefix(line, []byte("old "))
	if !ok {
		return r, fmt.Errorf("%w request: first line %q is not \"old <size>\"", ErrMalformed, clip(line))
	}
	size, err := parseSize(num)
	if err != nil {
		return r, fmt.Errorf("%w request: old size: %w", ErrMalformed, err)
	}
	r.OldSize = size
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return r, fmt.Errorf("%w request: no blank line before the checkpoint", ErrMalformed)
		}
		if len(line) == 0 {
			break
		}
		if len(r.Proof) == MaxProofHashes {
			return r, fmt.Errorf("%w request: proof has over %d hashes", ErrMalformed, MaxProofHashes)
		}
		h, err := decodeBase64(string(line))
		if err != nil || len(h) != HashSize {
			return r, fmt.Errorf("%w request: proof line %d %q is not a base64 %d-byte hash", ErrMalformed, len(r.Proof)+1, clip(line), HashSize)
		}
		r.Proof = append(r.Proof, h)
	}
	if len(rest) == 0 {
		return r, fmt.Errorf("%w request: no checkpoint after the blank line", ErrMalformed)
	}
	r.Checkpoint = rest
	return r, nil
}

// parseSize accepts a canonical decimal uint64 (no sign, no leading zero).
func parseSize(b []byte) (uint64, error) {
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != string(b) {
		return 0, fmt.Errorf("%q is not a decimal size", clip(b))
	}
	return n, nil
}

// clip shortens untrusted text quoted in an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// decodeBase64 decodes standard base64 strictly and canonically: Go's
// decoder skips '\r' and '\n' even in Strict mode, so a line carrying
// them would be accepted as another line's bytes; anything that does not
// re-encode to itself is refused.
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.EncodeToString(b) != s {
		return nil, errors.New("not canonical base64")
	}
	return b, nil
}
