package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxAnswerBytes bounds what the client reads of a witness's answer.
const maxAnswerBytes = 16 << 10

// Prover returns the consistency proof of a log from size old to size new.
type Prover func(ctx context.Context, oldSize, newSize uint64) ([][]byte, error)

// Client sends checkpoints to a witness.
type Client struct {
	// HTTP is the client used (nil: http.DefaultClient).
	HTTP *http.Client
	// Prove, if set, makes a new proof when the witness answers 409 with
	// a size other than 0 or the checkpoint's (for those no proof is
	// needed); without it such a 409 is returned as a *ConflictError.
	Prove Prover
}

// AddCheckpoint sends a checkpoint to the witness at witnessURL (its base
// URL) with the consistency proof from oldSize, and returns the witness's
// cosignature line(s). On a 409 it retries once from the size the witness
// holds. Refusals are a *ConflictError or a *RefusedError.
func AddCheckpoint(ctx context.Context, witnessURL string, oldSize uint64, proof [][]byte, checkpoint []byte) ([]byte, error) {
	return (&Client{}).AddCheckpoint(ctx, witnessURL, oldSize, proof, checkpoint)
}

// AddCheckpoint: see the package function.
func (c *Client) AddCheckpoint(ctx context.Context, witnessURL string, oldSize uint64, proof [][]byte, checkpoint []byte) ([]byte, error) {
	cosig, err := c.add(ctx, witnessURL, oldSize, proof, checkpoint)
	var conflict *ConflictError
	if !errors.As(err, &conflict) {
		return cosig, err
	}
	origin, err2 := Origin(checkpoint)
	if err2 != nil {
		return nil, err
	}
	conflict.Origin = origin
	size, err2 := checkpointSize(checkpoint)
	if err2 != nil || conflict.Size == oldSize || conflict.Size > size {
		return nil, err // retrying would not help
	}
	var retryProof [][]byte
	if conflict.Size != 0 && conflict.Size != size {
		if c.Prove == nil {
			return nil, err
		}
		if retryProof, err2 = c.Prove(ctx, conflict.Size, size); err2 != nil {
			return nil, fmt.Errorf("witness %s holds size %d: proof from it: %w", witnessURL, conflict.Size, err2)
		}
	}
	return c.add(ctx, witnessURL, conflict.Size, retryProof, checkpoint)
}

func (c *Client) add(ctx context.Context, witnessURL string, oldSize uint64, proof [][]byte, checkpoint []byte) ([]byte, error) {
	body := AddRequest{OldSize: oldSize, Proof: proof, Checkpoint: checkpoint}.Marshal()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(witnessURL, "/")+AddCheckpointPath, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", witnessURL, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", witnessURL, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("witness %s: reading the answer: %w", witnessURL, err)
	}
	if len(answer) > maxAnswerBytes {
		return nil, fmt.Errorf("witness %s: answer is over %d bytes", witnessURL, maxAnswerBytes)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if err := checkCosignatureLines(answer); err != nil {
			return nil, fmt.Errorf("witness %s: %w", witnessURL, err)
		}
		return answer, nil
	case http.StatusConflict:
		size, err := parseSize(bytes.TrimSuffix(answer, []byte("\n")))
		if err != nil || !bytes.HasSuffix(answer, []byte("\n")) || resp.Header.Get("Content-Type") != sizeContentType {
			return nil, fmt.Errorf("witness %s: %w 409 answer: want the size it holds as %s", witnessURL, ErrMalformed, sizeContentType)
		}
		return nil, &ConflictError{Size: size}
	}
	msg, _, _ := strings.Cut(string(answer), "\n")
	return nil, &RefusedError{Status: resp.StatusCode, Msg: clip([]byte(msg))}
}

// checkCosignatureLines checks that a 200's body is one or more
// cosignature lines.
func checkCosignatureLines(b []byte) error {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return fmt.Errorf("%w answer: want cosignature lines", ErrMalformed)
	}
	for _, line := range bytes.SplitAfter(b[:len(b)-1], []byte("\n")) {
		if _, err := ParseCosignature(line); err != nil {
			return err
		}
	}
	return nil
}

// checkpointSize reads the size line of a checkpoint note (unverified: the
// witness checks it).
func checkpointSize(checkpoint []byte) (uint64, error) {
	lines := bytes.SplitN(checkpoint, []byte("\n"), 3)
	if len(lines) < 3 {
		return 0, fmt.Errorf("%w checkpoint: no size line", ErrMalformed)
	}
	return parseSize(lines[1])
}

// AppendCosignature adds a witness's cosignature lines to a signed
// checkpoint note, the form VerifyCosignature checks.
func AppendCosignature(checkpoint, cosig []byte) []byte {
	return append(append(make([]byte, 0, len(checkpoint)+len(cosig)), checkpoint...), cosig...)
}
