package tlog

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// Checkpoints are C2SP tlog-checkpoint bodies — the origin line, the
// size in decimal, the root hash in base64, then optional extension lines
// — signed as C2SP signed notes (Ed25519, the key named by the origin,
// its hash the first four bytes of SHA-256(name||0x0A||0x01||key)). The
// log's verifier key is the note verifier key "origin+hash+base64(0x01||key)",
// the one string an auditor keeps to check every checkpoint, proof and
// bundle offline. Other signatures on a note (a witness's cosignatures)
// are kept but not checked here.

// MaxCheckpointBytes bounds a signed checkpoint note OpenCheckpoint reads
// (the body and up to a hundred signature lines, as note.Open allows).
const MaxCheckpointBytes = 16 << 10

// maxExtensions bounds a checkpoint's extension lines.
const maxExtensions = 16

// Checkpoint is a log checkpoint: the log named Origin had Size entries
// and root hash Root.
type Checkpoint struct {
	Origin     string
	Size       uint64
	Root       []byte
	Extensions []string // extension lines, without their newline
}

// Body is the checkpoint's text, the bytes its signatures sign.
func (c Checkpoint) Body() ([]byte, error) {
	if c.Origin == "" || strings.ContainsAny(c.Origin, "\n") {
		return nil, errors.New("checkpoint: the origin must be one non-empty line")
	}
	if err := checkHash("checkpoint root hash", c.Root); err != nil {
		return nil, err
	}
	if len(c.Extensions) > maxExtensions {
		return nil, fmt.Errorf("checkpoint: %d extension lines, at most %d", len(c.Extensions), maxExtensions)
	}
	b := log.Checkpoint{Origin: c.Origin, Size: c.Size, Hash: c.Root}.Marshal()
	for i, e := range c.Extensions {
		if e == "" || strings.ContainsAny(e, "\n") {
			return nil, fmt.Errorf("checkpoint: extension line %d must be one non-empty line", i)
		}
		b = append(append(b, e...), '\n')
	}
	return b, nil
}

// Signer signs checkpoints with the host key under the log's origin.
type Signer struct {
	origin string
	vkey   string
	s      note.Signer
}

// NewSigner returns the signer of the log named origin (a valid note key
// name: no spaces or '+') with key, the host key.
func NewSigner(origin string, key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("checkpoint signer: the key is %d bytes, not an Ed25519 private key", len(key))
	}
	vkey, err := VerifierKey(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	// The note package builds signers from its own text encoding:
	// PRIVATE+KEY+name+hash+base64(0x01||seed), the hash as in vkey.
	_, rest, _ := strings.Cut(vkey, "+")
	hash, _, _ := strings.Cut(rest, "+")
	skey := "PRIVATE+KEY+" + origin + "+" + hash + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, key.Seed()...))
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("checkpoint signer for %q: %w", origin, err)
	}
	return &Signer{origin: origin, vkey: vkey, s: s}, nil
}

// VerifierKey is the log's verifier key, "origin+hash+base64key".
func (s *Signer) VerifierKey() string { return s.vkey }

// Origin is the log's origin line.
func (s *Signer) Origin() string { return s.origin }

// NoteSigner is the underlying signed-note signer (for a cosigning
// witness or a note other than a checkpoint).
func (s *Signer) NoteSigner() note.Signer { return s.s }

// Sign returns c (whose Origin must be the signer's) as a signed note.
func (s *Signer) Sign(c Checkpoint) ([]byte, error) {
	if c.Origin != s.origin {
		return nil, fmt.Errorf("checkpoint: origin %q is not the signer's %q", c.Origin, s.origin)
	}
	body, err := c.Body()
	if err != nil {
		return nil, err
	}
	return note.Sign(&note.Note{Text: string(body)}, s.s)
}

// VerifierKey is the verifier key of the log named origin signed by pub:
// "origin+hash+base64(0x01||pub)".
func VerifierKey(origin string, pub ed25519.PublicKey) (string, error) {
	if origin == "" || strings.ContainsAny(origin, "+ \n") {
		return "", fmt.Errorf("checkpoint origin %q: must be non-empty, without '+', spaces or newlines", origin)
	}
	v, err := note.NewEd25519VerifierKey(origin, pub)
	if err != nil {
		return "", fmt.Errorf("verifier key for %q: %w", origin, err)
	}
	return v, nil
}

// NewVerifier decodes a verifier key into a signed-note verifier.
func NewVerifier(vkey string) (note.Verifier, error) {
	if len(vkey) > 1024 {
		return nil, errors.New("verifier key: too long to be one")
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("verifier key %q: %w", vkey, err)
	}
	return v, nil
}

// OpenCheckpoint checks the signed checkpoint note msg against the log's
// verifier key and returns the checkpoint: it must be at most
// MaxCheckpointBytes, a well-formed signed note carrying a valid
// signature by the key, and a canonical tlog-checkpoint whose origin is
// the key's name. Anything else is refused with one line saying what is
// wrong.
func OpenCheckpoint(msg []byte, vkey string) (*Checkpoint, error) {
	v, err := NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	return openCheckpoint(msg, v)
}

func openCheckpoint(msg []byte, v note.Verifier) (*Checkpoint, error) {
	if len(msg) > MaxCheckpointBytes {
		return nil, fmt.Errorf("checkpoint: %d bytes, more than %d", len(msg), MaxCheckpointBytes)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, fmt.Errorf("checkpoint: not signed by the log's key %s+%08x", v.Name(), v.KeyHash())
	case errors.As(err, &invalid):
		return nil, fmt.Errorf("checkpoint: the signature by %s+%08x does not verify (altered or forged)", v.Name(), v.KeyHash())
	case err != nil:
		return nil, fmt.Errorf("checkpoint: not a signed note: %w", err)
	}
	return parseBody([]byte(n.Text), v.Name())
}

// parseBody parses a checkpoint body (already authenticated), requiring
// the canonical encoding and origin.
func parseBody(text []byte, origin string) (*Checkpoint, error) {
	var lc log.Checkpoint
	rest, err := lc.Unmarshal(text)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if lc.Origin != origin {
		return nil, fmt.Errorf("checkpoint: origin %q is not the log's %q", lc.Origin, origin)
	}
	if err := checkHash("checkpoint root hash", lc.Hash); err != nil {
		return nil, err
	}
	if canon := lc.Marshal(); !bytes.HasPrefix(text, canon) {
		return nil, errors.New("checkpoint: size or root hash not in canonical form")
	}
	c := &Checkpoint{Origin: lc.Origin, Size: lc.Size, Root: lc.Hash}
	if len(rest) > 0 {
		lines := strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n")
		if len(lines) > maxExtensions {
			return nil, fmt.Errorf("checkpoint: %d extension lines, at most %d", len(lines), maxExtensions)
		}
		for i, l := range lines {
			if l == "" {
				return nil, fmt.Errorf("checkpoint: extension line %d is empty", i)
			}
		}
		c.Extensions = lines
	}
	return c, nil
}
