package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// eskvTarget is eskv under figure 18's load: raw HTTP to the writer, as
// the other figures send it (GET /v1/kv/{key}, then PUT with
// expectedVersion).
type eskvTarget struct {
	b *bench
}

// setup creates each key (expectedVersion 0), retrying while a partition
// is unavailable.
func (t *eskvTarget) setup(ctx context.Context, keys []string) error {
	for _, k := range keys {
		st := &writeState{key: k}
		for try := 0; ; try++ {
			status, err := t.b.cas(ctx, st)
			if err == nil && status == http.StatusOK {
				break
			}
			if try == 20 || ctx.Err() != nil {
				return fmt.Errorf("create %s: status %d: %w", k, status, err)
			}
			backoff(ctx, http.StatusServiceUnavailable)
		}
	}
	return nil
}

// getAnswer holds the fields of a GET answer the bench needs.
type getAnswer struct {
	Value   json.RawMessage `json:"value"`
	Version int64           `json:"version"`
}

func (t *eskvTarget) read(ctx context.Context, key string) ([]byte, int64, error) {
	var buf bytes.Buffer
	status, err := t.b.get(ctx, key, &buf)
	if err != nil {
		return nil, 0, err
	}
	if status != http.StatusOK {
		return nil, 0, statusError(status)
	}
	var a getAnswer
	if err := json.Unmarshal(buf.Bytes(), &a); err != nil {
		return nil, 0, fmt.Errorf("GET answer: %w", err)
	}
	return a.Value, a.Version, nil
}

func (t *eskvTarget) cas(ctx context.Context, key string, val []byte, rev int64) (bool, error) {
	body := make([]byte, 0, len(val)+48)
	body = append(append(body, `{"value":`...), val...)
	body = append(strconv.AppendInt(append(body, `,"expectedVersion":`...), rev, 10), '}')
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, t.b.s.writerURL+"/v1/kv/"+key, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header["Authorization"] = []string{t.b.auth}
	req.Header["Content-Type"] = []string{"application/json"}
	resp, err := t.b.hc.Do(req)
	if err != nil {
		return false, err
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return false, err
	case resp.StatusCode == http.StatusConflict:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, statusError(resp.StatusCode)
	}
	return true, nil
}

// close leaves the stack to the bench, which stops it at the end.
func (t *eskvTarget) close() {}
