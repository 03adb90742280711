package stash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// callTimeout bounds each method of a Table (the PRD's methods take no
// context); the client retries transient failures within it.
const callTimeout = 60 * time.Second

// Table is the stash table of one eskv project (the PRD's Table for
// stashes). It is safe for concurrent use.
type Table struct {
	c       *client.Client
	project string
	// changedBy is the crumb id recorded with each change (R7.2), or nil.
	changedBy *string
	// declared: the fields its scans compare are declared (indexes.go).
	declared *sync.Once
}

// Open returns the stash table of project ("tenant/<t>/project/<p>") on
// the eskv API at baseURL, authenticated with token. It does not call
// the server: a wrong URL or token shows at the first call.
func Open(baseURL, token, project string) (*Table, error) {
	if err := contract.ValidatePrefix(project + "/"); err != nil || len(contract.ScopeOf(project+"/x")) != len(project) {
		return nil, fmt.Errorf("stash: project %q is not tenant/<tenant>/project/<project>", project)
	}
	if len(project) > maxProjectLen {
		return nil, fmt.Errorf("stash: project %q is longer than %d characters: its stash keys would pass eskv's key limit", project, maxProjectLen)
	}
	return &Table{c: client.New(baseURL, token, client.WithUserAgent("eskv-stash")), project: project, declared: new(sync.Once)}, nil
}

// ChangedBy returns a table of the same project that records crumbID as
// the ChangedBy of every change it makes (R7.2); the table Open returns
// records none (nil).
func (t *Table) ChangedBy(crumbID string) *Table {
	c := *t
	c.changedBy = &crumbID
	return &c
}

// doc is a stash as stored: its key's JSON value.
type doc struct {
	Name      string          `json:"name"`
	StashType string          `json:"stashType"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"createdAt"`
	// Op and HistoryID describe the change that made this version.
	Op        string  `json:"op"`
	HistoryID string  `json:"historyId"`
	ChangedBy *string `json:"changedBy,omitempty"`
}

// nameDoc is the value of a name index key.
type nameDoc struct {
	StashID string `json:"stashId"`
}

// linkDoc is the value of a scoped_to link key (R13.1).
type linkDoc struct {
	LinkType string `json:"linkType"`
	StashID  string `json:"stashId"`
	TrailID  string `json:"trailId"`
}

// linkScopedTo is the link type of R13.
const linkScopedTo = "scoped_to"

// ctx is the context of one Table call.
func (t *Table) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// Get returns the stash id names, as *Stash (R8): ErrInvalidID for an
// empty id, ErrNotFound when no stash has it (never created, or deleted).
func (t *Table) Get(id string) (any, error) {
	id, err := canonicalID(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := t.ctx()
	defer cancel()
	s, err := t.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// get reads stash id.
func (t *Table) get(ctx context.Context, id string) (*Stash, error) {
	e, err := t.c.Get(ctx, t.stashKey(id))
	if err != nil {
		return nil, apiError(err, "get stash "+id)
	}
	return stashOf(id, e)
}

// stashOf decodes the entry of stash id.
func stashOf(id string, e contract.Entry) (*Stash, error) {
	var d doc
	if err := json.Unmarshal(e.Value, &d); err != nil {
		return nil, fmt.Errorf("stash: stored stash %s is not a stash document: %w", id, err)
	}
	v, err := decodeValue(d.Value)
	if err != nil {
		return nil, fmt.Errorf("stash: stored stash %s: %w", id, err)
	}
	s := &Stash{StashID: id, Name: d.Name, StashType: d.StashType, Value: v, Version: e.Version, CreatedAt: d.CreatedAt}
	s.read = &readState{id: id, version: e.Version, name: d.Name, stashType: d.StashType, createdAt: d.CreatedAt}
	return s, nil
}

// apiError maps an error of the API about a stash's key to the PRD's
// sentinels: an absent key is ErrNotFound, a failed compare-and-swap
// ErrConflict (ErrNotFound when the key is gone). Anything else is
// wrapped as it came (errors.As finds the *contract.Error or the
// *client.NetworkError).
func apiError(err error, what string) error {
	switch contract.ErrorCode(err) {
	case contract.ENotFound:
		return fmt.Errorf("%s: %w (%w)", what, ErrNotFound, err)
	case contract.EConflict, contract.EFieldMismatch:
		var e *contract.Error
		if errors.As(err, &e) && (e.Current == nil || e.Current.Version == 0) {
			return fmt.Errorf("%s: the stash is gone: %w (%w)", what, ErrNotFound, err)
		}
		return fmt.Errorf("%s: %w (%w)", what, ErrConflict, err)
	}
	return fmt.Errorf("stash: %s: %w", what, err)
}

// failedOp is the index of the transaction op err is about, or -1.
func failedOp(err error) int {
	var e *contract.Error
	if errors.As(err, &e) && e.FailedOp != nil {
		return *e.FailedOp
	}
	return -1
}

// isConflict reports whether err is a condition that did not hold.
func isConflict(err error) bool {
	c := contract.ErrorCode(err)
	return c == contract.EConflict || c == contract.EFieldMismatch
}
