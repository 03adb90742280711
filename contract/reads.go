package contract

import (
	"fmt"
	"time"
)

// Reads of many keys at once: a keys-only listing (GET
// /v1/kv?keysOnly=true), a batch get (POST /v1/kv:batchGet) and the
// listing of the projects a token may read (GET /v1/projects).

// Bounds of the reads of many keys.
const (
	// DefaultKeysLimit and MaxKeysLimit bound a page of a keys-only
	// listing: its items carry no value, so a page holds more of them
	// than a listing's (DefaultListLimit, MaxListLimit) under the same
	// byte budget.
	DefaultKeysLimit = 1000
	MaxKeysLimit     = 10000

	// MaxBatchGetKeys is how many keys one batch get takes.
	MaxBatchGetKeys = 1000
	// MaxBatchGetBodyBytes bounds the body of a batch get: MaxBatchGetKeys
	// keys of MaxKeyLen characters, quoted and escaped, fit.
	MaxBatchGetBodyBytes = 256 << 10

	// DefaultProjectsLimit and MaxProjectsLimit bound a page of the
	// projects listing.
	DefaultProjectsLimit = 100
	MaxProjectsLimit     = 1000
)

// KeyInfo is one item of a keys-only listing: what a listing's entry
// says of its key, without the value.
type KeyInfo struct {
	Key       string     `json:"key"`
	Version   int64      `json:"version"`
	Purpose   string     `json:"purpose"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// KeysAnswer is the answer of GET /v1/kv?keysOnly=true: one page of a
// keys-only listing, paged as ListAnswer.
type KeysAnswer struct {
	Items      []KeyInfo `json:"items"`
	Count      int       `json:"count"`
	Truncated  bool      `json:"truncated"`
	NextCursor string    `json:"nextCursor,omitempty"`
	// Position is the position the page reflects (ListAnswer.Position).
	Position string `json:"position,omitempty"`
}

// BatchGetBody is the body of POST /v1/kv:batchGet.
type BatchGetBody struct {
	Keys []string `json:"keys"`
}

// Validate checks the body: 1 to MaxBatchGetKeys keys, each valid, none
// twice. An error names the key at fault as keys[i] (the later one of a
// duplicate): which of two answers a repeated key would get is the kind
// of question a batch should not raise, and DynamoDB's BatchGetItem
// refuses duplicates the same way.
func (b *BatchGetBody) Validate() error {
	if len(b.Keys) == 0 || len(b.Keys) > MaxBatchGetKeys {
		return FieldErrorf(EInvalid, "keys", "a batch get takes 1 to %d keys, not %d", MaxBatchGetKeys, len(b.Keys))
	}
	seen := make(map[string]int, len(b.Keys))
	for i, k := range b.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		if _, err := parseKey(k, field); err != nil {
			return err
		}
		if j, ok := seen[k]; ok {
			return FieldErrorf(EInvalid, field, "keys[%d] repeats keys[%d] (%s): name each key once", i, j, k)
		}
		seen[k] = i
	}
	return nil
}

// BatchGetItem is the answer for one key of a batch get: its entry as
// GET /v1/kv/{key} answers it, or the error GET would answer
// (not_found, forbidden, partition_unavailable), never both. Partition
// is the partition the key was read in, absent when it was not read (a
// forbidden key).
type BatchGetItem struct {
	Key       string       `json:"key"`
	Partition *int32       `json:"partition,omitempty"`
	Entry     *Entry       `json:"entry,omitempty"`
	Error     *ErrorDetail `json:"error,omitempty"`
}

// PartitionRead is one partition a batch get read: each partition's keys
// are read at one instant by its owner, so that what is known of that
// read (which partition, and later its position) is said once here
// rather than on each of its keys.
type PartitionRead struct {
	Partition int32 `json:"partition"`
	// Position is the log position the partition's keys were read at
	// (a watch cursor): each holds every event of the partition up to
	// it and none after.
	Position string `json:"position,omitempty"`
}

// BatchGetAnswer is the answer of POST /v1/kv:batchGet. Items are in the
// order of the body's keys, one per key, unless Truncated: the answer's
// byte budget was reached, and Items holds the first keys only (at least
// one); ask again for the rest, keys[len(Items):].
type BatchGetAnswer struct {
	Items      []BatchGetItem  `json:"items"`
	Partitions []PartitionRead `json:"partitions"`
	Truncated  bool            `json:"truncated"`
}

// ProjectInfo is one project of GET /v1/projects: its tenant, its name
// and how many live keys of it the caller may read.
type ProjectInfo struct {
	Tenant  string `json:"tenant"`
	Project string `json:"project"`
	Keys    int64  `json:"keys"`
}

// Scope is the project's tenant/<t>/project/<p> prefix.
func (p ProjectInfo) Scope() string { return "tenant/" + p.Tenant + "/project/" + p.Project }

// ProjectsAnswer is the answer of GET /v1/projects: one page of the
// projects the caller may read, in byte order of their scopes.
type ProjectsAnswer struct {
	Items      []ProjectInfo `json:"items"`
	Count      int           `json:"count"`
	Truncated  bool          `json:"truncated"`
	NextCursor string        `json:"nextCursor,omitempty"`
}
