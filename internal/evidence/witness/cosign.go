package witness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// CosignatureSize is the decoded size of a cosignature/v1 Ed25519
// signature line's base64: key hash, timestamp, signature.
const CosignatureSize = 4 + 8 + ed25519.SignatureSize

// Key is a witness's own key: it signs cosignature/v1 (C2SP
// tlog-cosignature, key type 0x04) lines.
type Key struct {
	signer *fnote.Signer
	vkey   string
}

// NewKey reads a signed-note Ed25519 private key
// ("PRIVATE+KEY+name+hash+base64", as note.GenerateKey writes it).
func NewKey(skey string) (*Key, error) {
	skey = strings.TrimSpace(skey)
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		return nil, fmt.Errorf("witness key: %w", err)
	}
	// The verifier key is the cosignature/v1 form of the key's public half.
	parts := strings.SplitN(skey, "+", 5)
	raw, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
	if err != nil || len(raw) != 1+ed25519.SeedSize {
		return nil, errors.New("witness key: not an Ed25519 key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	plain, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return nil, fmt.Errorf("witness key: %w", err)
	}
	vkey, err := fnote.VKeyToCosignatureV1(plain)
	if err != nil {
		return nil, fmt.Errorf("witness key: %w", err)
	}
	return &Key{signer: s, vkey: vkey}, nil
}

// LoadOrCreateKey reads the key in path, or, if there is none, creates one
// named name there (mode 0600, written durably). A key file others may
// read is refused.
func LoadOrCreateKey(path, name string) (k *Key, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		skey, _, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			return nil, false, fmt.Errorf("witness key %s: %w", path, err)
		}
		err = createFileDurably(path, []byte(skey+"\n"), 0o600)
		if errors.Is(err, fs.ErrExist) { // created meanwhile by another process: use it
			return LoadOrCreateKey(path, name)
		}
		if err != nil {
			return nil, false, fmt.Errorf("witness key %s: %w", path, err)
		}
		k, err := NewKey(skey)
		return k, true, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("witness key %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, fmt.Errorf("witness key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("witness key %s: mode %04o lets others read it (chmod 600 it)", path, fi.Mode().Perm())
	}
	k, err = NewKey(string(b))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return k, false, nil
}

// Name is the key's name, the one cosignature lines carry.
func (k *Key) Name() string { return k.signer.Name() }

// VKey is the verifier key of the witness ("name+hash+base64", key type
// 0x04), what VerifyCosignature takes.
func (k *Key) VKey() string { return k.vkey }

// Cosign returns the cosignature line ("— name base64\n") of a checkpoint
// note's text, timestamped now.
func (k *Key) Cosign(text string) ([]byte, error) {
	signed, err := note.Sign(&note.Note{Text: text}, k.signer)
	if err != nil {
		return nil, fmt.Errorf("cosign: %w", err)
	}
	return signed[len(text)+1:], nil
}

// Cosignature is one decoded cosignature/v1 line.
type Cosignature struct {
	Name      string
	KeyHash   uint32
	Time      time.Time
	Signature []byte
}

// ParseCosignature decodes one cosignature line ("— name base64", an
// optional final newline). It checks the syntax only: VerifyCosignature
// checks the signature.
func ParseCosignature(line []byte) (Cosignature, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("— "))
	if !ok {
		return Cosignature{}, fmt.Errorf("%w cosignature: line does not start with \"— \"", ErrMalformed)
	}
	name, b64, ok := strings.Cut(string(rest), " ")
	if !ok || name == "" || strings.ContainsAny(name, "+\n\t ") {
		return Cosignature{}, fmt.Errorf("%w cosignature: want \"— name base64\"", ErrMalformed)
	}
	raw, err := decodeBase64(b64)
	if err != nil || len(raw) != CosignatureSize {
		return Cosignature{}, fmt.Errorf("%w cosignature by %s: want %d base64 bytes (key hash, time, signature)", ErrMalformed, clip([]byte(name)), CosignatureSize)
	}
	ts := binary.BigEndian.Uint64(raw[4:12])
	if ts > 1<<62 {
		return Cosignature{}, fmt.Errorf("%w cosignature by %s: timestamp %d out of range", ErrMalformed, name, ts)
	}
	return Cosignature{Name: name, KeyHash: binary.BigEndian.Uint32(raw), Time: time.Unix(int64(ts), 0).UTC(), Signature: raw[12:]}, nil
}

// VerifyCosignature checks that a checkpoint note carries a valid
// cosignature by the witness whose verifier key is witnessVKey, and
// returns the cosignature's time. Other signatures (the log's) are not
// checked here.
func VerifyCosignature(checkpoint []byte, witnessVKey string) (time.Time, error) {
	v, err := fnote.NewVerifierForCosignatureV1(witnessVKey)
	if err != nil {
		return time.Time{}, fmt.Errorf("witness key %q: %w", clip([]byte(witnessVKey)), err)
	}
	n, err := note.Open(checkpoint, note.VerifierList(v))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return time.Time{}, fmt.Errorf("checkpoint: %w %s", ErrNoCosignature, v.Name())
	case errors.As(err, &invalid):
		return time.Time{}, fmt.Errorf("checkpoint: %w %s: the cosignature does not verify", ErrNoCosignature, v.Name())
	case err != nil:
		return time.Time{}, fmt.Errorf("%w checkpoint: %w", ErrMalformed, err)
	}
	for _, s := range n.Sigs {
		if s.Name == v.Name() && s.Hash == v.KeyHash() {
			c, err := ParseCosignature([]byte("— " + s.Name + " " + s.Base64))
			if err != nil {
				return time.Time{}, err
			}
			return c.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("checkpoint: %w %s", ErrNoCosignature, v.Name())
}

// VerifyCosigned checks a cosigned checkpoint, as serve --witness serves
// it: a valid signature by the log's key (logVKey, a signed-note verifier
// key) and a valid cosignature by each of witnessVKeys. It returns the
// checkpoint's size and root hash. The first failure is returned, naming
// the key at fault.
func VerifyCosigned(checkpoint []byte, logVKey string, witnessVKeys ...string) (size uint64, root []byte, err error) {
	origin, err := Origin(checkpoint)
	if err != nil {
		return 0, nil, err
	}
	l, err := NewLog(origin, logVKey)
	if err != nil {
		return 0, nil, err
	}
	cp, _, err := OpenCheckpoint(checkpoint, l)
	if err != nil {
		return 0, nil, err
	}
	if len(witnessVKeys) == 0 {
		return 0, nil, errors.New("verify a cosigned checkpoint: no witness key given")
	}
	for _, k := range witnessVKeys {
		if _, err := VerifyCosignature(checkpoint, k); err != nil {
			return 0, nil, err
		}
	}
	return cp.Size, cp.Hash, nil
}
