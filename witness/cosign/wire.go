package cosign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/custodylog/custody/merkle"
)

// MaxProof is the most consistency proof lines a request may carry
// (C2SP tlog-witness).
const MaxProof = 63

// RequestBody is an add-checkpoint request body (C2SP tlog-witness): the
// old size line, one base64 consistency proof hash a line, an empty line,
// and the signed checkpoint.
func RequestBody(old uint64, proof []merkle.Hash, checkpoint []byte) ([]byte, error) {
	if len(proof) > MaxProof {
		return nil, fmt.Errorf("a consistency proof of %d hashes is longer than the %d the protocol allows", len(proof), MaxProof)
	}
	if old == 0 && len(proof) > 0 {
		return nil, errors.New("a request from size 0 carries no proof")
	}
	var b bytes.Buffer
	b.WriteString("old ")
	b.WriteString(strconv.FormatUint(old, 10))
	b.WriteByte('\n')
	for _, h := range proof {
		b.WriteString(h.String())
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(checkpoint)
	return b.Bytes(), nil
}

// Response is a witness's answer: its HTTP status and body (at most 64 KiB).
type Response struct {
	Status int
	Body   []byte
}

// AddCheckpoint sends one add-checkpoint request to the witness at base
// (its URL without /add-checkpoint) and returns its answer. A non-nil
// error means no answer came (transport failure or timeout).
func AddCheckpoint(ctx context.Context, hc *http.Client, base, userAgent string, old uint64, proof []merkle.Hash, checkpoint []byte, timeout time.Duration) (*Response, error) {
	body, err := RequestBody(old, proof, checkpoint)
	if err != nil {
		return nil, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	if userAgent != "" {
		req.Header.Set("User-Agent", userAgent)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > maxAnswer {
		return nil, fmt.Errorf("the answer exceeds %d bytes", maxAnswer)
	}
	return &Response{Status: resp.StatusCode, Body: data}, nil
}

// ParseSize reads a 409 answer's body: the witness's tree size in
// decimal, then a newline (text/x.tlog.size).
func ParseSize(body []byte) (uint64, error) {
	s, ok := bytes.CutSuffix(body, []byte("\n"))
	if !ok {
		return 0, fmt.Errorf("the size %q does not end in a newline", snippet(body))
	}
	n, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != string(s) {
		return 0, fmt.Errorf("%q is not a decimal tree size", snippet(body))
	}
	return n, nil
}
