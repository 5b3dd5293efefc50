package packrun

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"

	"github.com/packrun/packrun/internal/message"
)

// An agent's messaging key is an Ed25519 key pair written in
// the file format of the pack signing keys `packrun keys generate` writes
// (ECDSA there): PEM PKCS#8 "PRIVATE KEY" (mode 0600) and PKIX
// "PUBLIC KEY". The public half goes
// into the agent's messaging.public_key as "ed25519:" and the standard
// base64 of its 32 bytes.

// maxKeyFileBytes bounds a key file.
const maxKeyFileBytes = 64 << 10

// GenerateMessageKey writes a new Ed25519 key pair, PREFIX.key and
// PREFIX.pub, and returns the public key as an agent's
// messaging.public_key writes it. It never overwrites a file.
func GenerateMessageKey(prefix string) (publicKey string, err error) {
	if prefix == "" {
		return "", usageErr("generate message key: an output prefix is required")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	keyPath, pubPath := prefix+".key", prefix+".pub"
	if err := writeNewFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", err
	}
	if err := writeNewFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		os.Remove(keyPath)
		return "", err
	}
	return MessagingPublicKey(pub), nil
}

// MessagingPublicKey writes pub as an agent's messaging.public_key.
func MessagingPublicKey(pub ed25519.PublicKey) string {
	return "ed25519:" + base64.StdEncoding.EncodeToString(pub)
}

func writeNewFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return usageErr("generate message key: %s exists; remove it first or pick another prefix", path)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// LoadMessageKey reads an Ed25519 private key: a PEM PKCS#8 "PRIVATE KEY"
// (GenerateMessageKey's PREFIX.key).
func LoadMessageKey(path string) (ed25519.PrivateKey, error) {
	b, err := ReadFile(path, maxKeyFileBytes)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, usageErr("load message key: %s: not a PEM \"PRIVATE KEY\" (PKCS#8) file; make one with packrun messages keygen", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, usageErr("load message key: %s: %v", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, usageErr("load message key: %s: a %T, not an Ed25519 key (pack signing keys are ECDSA; make a messaging key with packrun messages keygen)", path, k)
	}
	return priv, nil
}

// SignedMessage is a message document with its signature.
type SignedMessage struct {
	Format string `json:"format"`
	// Message is the document; a BlackRoad envelope carries its signature
	// in its signature property.
	Message   json.RawMessage `json:"message"`
	Signature string          `json:"signature"`
}

// SignMessage signs doc, a message in format, with key: the Ed25519
// signature over its canonical form (JCS without signature). A BlackRoad
// envelope gets its signature property set; the other formats have none,
// and the signature travels beside the document in the publish form
// ({"format","message","signature"}, SignedMessage's JSON).
func SignMessage(key ed25519.PrivateKey, format string, doc []byte) (*SignedMessage, error) {
	f, ok := message.ParseFormat(format)
	if !ok {
		return nil, usageErr("sign message: format %q: want agent-envelope, agent-message or bus-envelope", format)
	}
	if _, err := message.CodecOf(f).Decode(doc); err != nil {
		return nil, err
	}
	sig, err := message.Sign(key, doc)
	if err != nil {
		return nil, err
	}
	out := &SignedMessage{Format: format, Message: doc, Signature: sig}
	if f == message.FormatEnvelope {
		if out.Message, err = message.SignEnvelope(key, doc); err != nil {
			return nil, err
		}
	}
	return out, nil
}
