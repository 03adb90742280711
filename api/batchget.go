package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
)

// batchGetPath is the path of a batch get, and batchGetRoute its echo
// route (a ':' in an echo route starts a parameter unless escaped).
const (
	batchGetPath  = "/v1/kv:batchGet"
	batchGetRoute = `/v1/kv\:batchGet`
)

// maxBatchReads is how many partitions one batch get reads at once.
const maxBatchReads = 8

// batchGroup is the keys of a batch get in one partition: at[j] is the
// index in the body of keys[j].
type batchGroup struct {
	partition int32
	at        []int
	keys      []contract.Key
}

// batchGet serves POST /v1/kv:batchGet (contract.BatchGetBody): each key
// answered as GET /v1/kv/{key} answers it, in the body's order. A key the
// caller may not read is answered forbidden before anything is read, so
// its answer is the same whether it exists or not. The other keys are
// read per partition: each partition's keys by its owner in one read
// confirmed once (Writer.States), so each key is linearizable as a GET
// is; a partition another writer owns is asked of it in one forwarded
// batch get of its keys. A partition that cannot be read answers its keys
// partition_unavailable (with retryAfterSeconds), and the others are still
// answered. The answer is cut at the listings' byte budget (MaxListBytes,
// always one item): truncated, with the first keys' items only.
func (s *Server) batchGet(c echo.Context) error {
	if q := queryOf(c); len(q) > 0 {
		name := slices.Sorted(maps.Keys(q))[0]
		return contract.FieldErrorf(contract.EInvalid, name, "unknown query parameter %q (a batch get takes none)", name)
	}
	var b contract.BatchGetBody
	if _, err := decodeBody(c, &b, contract.MaxBatchGetBodyBytes); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	// The entries read stay in memory until the answer is written, as a
	// listing's page does: the batch takes a listing's slot.
	release, err := s.takeList(c)
	if err != nil {
		return err
	}
	defer release()
	items := make([]contract.BatchGetItem, len(b.Keys))
	groups := s.batchGroups(c, b.Keys, items)
	reads := make([][]contract.PartitionRead, len(groups))
	cuts := make([]int, len(groups))
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxBatchReads)
	for i, g := range groups {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			reads[i], cuts[i] = s.readGroup(c, g, items)
		})
	}
	wg.Wait()
	return writeBatch(c, batchAnswer(items, reads, cuts), s.cfg.MaxListBytes)
}

// batchGroups answers forbidden the keys the caller may not read and
// groups the others by partition, in partition order.
func (s *Server) batchGroups(c echo.Context, raw []string, items []contract.BatchGetItem) []*batchGroup {
	p := principalOf(c)
	byID := map[int32]*batchGroup{}
	for i, r := range raw {
		items[i].Key = r
		k, err := contract.ParseKey(r) // valid: the body was validated
		if err != nil || !p.Allows(Read, r) {
			items[i].Error = &contract.ErrorDetail{Code: contract.EForbidden, Field: fmt.Sprintf("keys[%d]", i),
				Message: fmt.Sprintf("principal %s may not read %s", p.Name, r)}
			continue
		}
		id := s.w.Partition(k)
		g := byID[id]
		if g == nil {
			g = &batchGroup{partition: id}
			byID[id] = g
		}
		g.at, g.keys = append(g.at, i), append(g.keys, k)
	}
	groups := make([]*batchGroup, 0, len(byID))
	for _, g := range byID {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *batchGroup) int { return int(a.partition) - int(b.partition) })
	return groups
}

// readGroup answers the keys of g in items: read here when this writer
// owns their partition, else asked of its owner. It returns the
// partitions read and the index in the body of the first key of g left
// unanswered (len(items) when none: only an owner's truncated answer
// leaves some).
func (s *Server) readGroup(c echo.Context, g *batchGroup, items []contract.BatchGetItem) ([]contract.PartitionRead, int) {
	from, carry := originOf(c)
	local, owner, err := s.w.Route(g.keys[0], from)
	switch {
	case local:
		var at contract.Cursor
		at, err = s.readLocal(c.Request().Context(), g, items)
		if err == nil {
			return []contract.PartitionRead{{Partition: g.partition, Position: at.String()}}, len(items)
		}
	case err == nil:
		reads, cut, ferr := s.readRemote(c, owner, carry, g, items)
		if ferr == nil {
			return reads, cut
		}
		err = ferr
	}
	d := s.itemError(err).Detail()
	for _, i := range g.at {
		items[i].Error = &contract.ErrorDetail{Code: d.Code, Message: d.Message, RetryAfterSeconds: d.RetryAfterSeconds}
	}
	return nil, len(items)
}

// itemError is err as a key's answer: the contract.Error it is or
// wraps; any other error, and an internal one, is logged and answered
// as a bare internal error, as the error handler answers a request's
// (its detail is the log's only).
func (s *Server) itemError(err error) *contract.Error {
	if e, ok := errors.AsType[*contract.Error](err); ok && e.Code != contract.EInternal {
		return e
	}
	s.log.Error("batch get: a partition's read failed", "err", err)
	return &contract.Error{Code: contract.EInternal, Message: "internal error"}
}

// readLocal reads the keys of g, a partition this writer owns, and
// answers each as GET does: its visible entry, or not_found; all as of
// the position returned.
func (s *Server) readLocal(ctx context.Context, g *batchGroup, items []contract.BatchGetItem) (contract.Cursor, error) {
	states, at, err := s.w.States(ctx, g.keys)
	if err != nil {
		return at, err
	}
	now := s.now()
	for j, st := range states {
		i := g.at[j]
		id := g.partition
		items[i].Partition = &id
		if e := st.Visible(now); e != nil {
			items[i].Entry = e
			continue
		}
		items[i].Error = &contract.ErrorDetail{Code: contract.ENotFound, Message: fmt.Sprintf("key %s does not exist", items[i].Key)}
	}
	return at, nil
}

// readRemote asks owner, the writer that owns g's partition, for g's
// keys in one batch get, with the caller's credentials and this writer's
// forwarding proof (so that the owner reads them itself and forwards
// nothing further), and copies its items into items.
func (s *Server) readRemote(c echo.Context, owner, carry string, g *batchGroup, items []contract.BatchGetItem) ([]contract.PartitionRead, int, error) {
	keys := make([]string, len(g.keys))
	for j, k := range g.keys {
		keys[j] = k.String()
	}
	body, _ := json.Marshal(contract.BatchGetBody{Keys: keys})
	r := c.Request()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, owner+batchGetPath, bytes.NewReader(body))
	if err != nil {
		return nil, 0, contract.Errorf(contract.EInternal, "owner address %q: %v", owner, err)
	}
	proof := s.fwd.proof(http.MethodPost, batchGetPath, s.now())
	if carry != "" {
		proof = carry + "," + proof
	}
	req.Header.Set(ForwardedHeader, proof)
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	a, err := s.fwd.batchGet(req, int64(2*s.cfg.MaxListBytes+2*s.cfg.MaxValueBytes))
	if err != nil {
		return nil, 0, err
	}
	cut := len(items)
	for j, i := range g.at {
		if j >= len(a.Items) || a.Items[j].Key != keys[j] {
			cut = i
			break
		}
		items[i] = a.Items[j]
	}
	return a.Partitions, cut, nil
}

// batchGet sends req, a batch get, to another writer and reads its answer
// of at most limit bytes: its error when it answers one, and
// partition_unavailable when it does not answer.
func (f *forwarder) batchGet(req *http.Request, limit int64) (*contract.BatchGetAnswer, error) {
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, &contract.Error{Code: contract.EUnavailable, RetryAfterSeconds: 1,
			Message: "the writer owning this partition did not answer; retry"}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, &contract.Error{Code: contract.EUnavailable, RetryAfterSeconds: 1,
			Message: "the writer owning this partition did not answer in full; retry"}
	}
	if resp.StatusCode != http.StatusOK {
		var eb contract.ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
			return nil, contract.Errorf(contract.EInternal, "the writer owning this partition answered %d", resp.StatusCode)
		}
		return nil, eb.Error.AsError("")
	}
	var a contract.BatchGetAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, contract.Errorf(contract.EInternal, "the writer owning this partition answered a batch get that is not one")
	}
	return &a, nil
}

// batchAnswer is the answer of items once every partition was read:
// items up to the first key an owner left unanswered (the lowest of
// cuts), each error naming its key's field, and the partitions read.
func batchAnswer(items []contract.BatchGetItem, reads [][]contract.PartitionRead, cuts []int) contract.BatchGetAnswer {
	a := contract.BatchGetAnswer{Items: items, Partitions: []contract.PartitionRead{}}
	if len(cuts) > 0 {
		if cut := slices.Min(cuts); cut < len(items) {
			a.Items, a.Truncated = items[:max(cut, 1)], true
		}
	}
	for i := range a.Items {
		if e := a.Items[i].Error; e != nil {
			e.Field = fmt.Sprintf("keys[%d]", i)
		}
	}
	for _, r := range reads {
		a.Partitions = append(a.Partitions, r...)
	}
	slices.SortFunc(a.Partitions, func(x, y contract.PartitionRead) int { return int(x.Partition) - int(y.Partition) })
	return a
}

// writeBatch answers a as JSON, its items up to the byte budget
// maxBytes (always the first): the items after it are left out and the
// answer says truncated.
func writeBatch(c echo.Context, a contract.BatchGetAnswer, maxBytes int) error {
	var items bytes.Buffer
	enc := json.NewEncoder(&items)
	enc.SetEscapeHTML(false) // values are answered as stored (jsonSerializer)
	items.WriteByte('[')
	for i := range a.Items {
		mark := items.Len()
		if i > 0 {
			items.WriteByte(',')
		}
		if err := enc.Encode(&a.Items[i]); err != nil {
			return err
		}
		items.Truncate(items.Len() - 1) // the Encoder's newline
		if i > 0 && items.Len() > maxBytes {
			items.Truncate(mark)
			a.Truncated = true
			break
		}
	}
	items.WriteByte(']')
	rest, err := json.Marshal(struct {
		Partitions []contract.PartitionRead `json:"partitions"`
		Truncated  bool                     `json:"truncated"`
	}{a.Partitions, a.Truncated})
	if err != nil {
		return err
	}
	out := make([]byte, 0, items.Len()+len(rest)+16)
	out = append(append(append(out, `{"items":`...), items.Bytes()...), ',')
	out = append(out, rest[1:]...)
	return c.JSONBlob(http.StatusOK, out)
}
