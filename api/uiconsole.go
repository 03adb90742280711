package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/writer"
)

// The status page's console (docs/ui.md): the overview of the projects a
// session may read, the cluster's health, and the figures that must not
// depend on which writer answers. Writes per minute and last changes come
// from the projection (Postgres, shared by every writer); conflicts are
// counted in each writer's memory by the partition's owner, so the
// writer answering asks its peers (the owners table's advertise URLs,
// with the forwarding proof of the peer secret and the session's cookie)
// and adds their counts, marking a peer that did not answer in time.

// Figures of the console.
const (
	// uiActivityWindow is the window the overview's per-minute rates
	// average over.
	uiActivityWindow = 5 * time.Minute
	// uiPeerTimeout bounds a peer's answer to the fan-out.
	uiPeerTimeout = time.Second
	// UIProjectorLagAlert and UIAuditorLagAlert are the lags, in log
	// offsets (events and the commit marker of each transaction), beyond
	// which a partition's projector or auditor raises an alert.
	UIProjectorLagAlert = 1000
	UIAuditorLagAlert   = 10000
	// DefaultAuditorGroup is the auditor's consumer group
	// (audit.Group), whose committed offsets are its position.
	DefaultAuditorGroup = "kv-auditor"
	uiPeerConflictsPath = "/ui/api/peer/conflicts"
)

// Alerts of the console (UIAlert.Name).
const (
	AlertProjectorLag     = "projector_lag"
	AlertAuditorLag       = "auditor_lag"
	AlertNoOwner          = "partition_without_owner"
	AlertBrokerDown       = "broker_unreachable"
	AlertDatabaseDown     = "database_unreachable"
	AlertPeerNotAnswering = "writer_not_answering"
	// AlertAuditVerifyFailed: the auditor's last periodic verification
	// found a discrepancy or could not run; AlertAuditVerifyStale: none
	// completed in the last 3 verification intervals.
	AlertAuditVerifyFailed = "audit_verification_failed"
	AlertAuditVerifyStale  = "audit_verification_stale"
)

// uiStore is what the console reads of the projection beyond a Lister:
// the owners table and the activity of a page's projects
// (projection.Store).
type uiStore interface {
	Owners(ctx context.Context) (map[int32]projection.Owner, error)
	Activities(ctx context.Context, rs []projection.ActivityRange, since time.Time) ([]projection.Activity, error)
}

// uiCluster is what the console reads of the writer: the log's positions
// and the brokers' reachability (writer.Writer).
type uiCluster interface {
	LogPositions(ctx context.Context, group string) writer.LogPositions
	Partitions() int32
	Owned() []int32
	BrokersAnswering() bool
}

// UIPeer is a writer the answering writer asked for its figures.
type UIPeer struct {
	Addr     string `json:"addr"`
	Self     bool   `json:"self,omitempty"`
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
}

// UIAlert is an alert the writer can tell from what it reads.
type UIAlert struct {
	Name      string `json:"name"`
	Message   string `json:"message"`
	Partition *int32 `json:"partition,omitempty"`
}

// UIOverviewProject is one project of GET /ui/api/overview.
type UIOverviewProject struct {
	Tenant  string `json:"tenant"`
	Project string `json:"project"`
	Keys    int64  `json:"keys"`
	// Writes and Conflicts over the last WindowSeconds; their per-minute
	// rates. Conflicts are absent when the principal may not read the
	// whole project (the chart's rule).
	Writes             int64      `json:"writes"`
	WritesPerMinute    float64    `json:"writesPerMinute"`
	Conflicts          *int64     `json:"conflicts,omitempty"`
	ConflictsPerMinute *float64   `json:"conflictsPerMinute,omitempty"`
	LastChange         *time.Time `json:"lastChange,omitempty"`
}

// UIOverview is GET /ui/api/overview: a page of the projects of GET
// /v1/projects with their activity, the writers whose conflict counts are
// in it, and the alerts firing.
type UIOverview struct {
	Principal     string              `json:"principal"`
	ServerTime    time.Time           `json:"serverTime"`
	WindowSeconds int                 `json:"windowSeconds"`
	Projects      []UIOverviewProject `json:"projects"`
	Truncated     bool                `json:"truncated"`
	NextCursor    string              `json:"nextCursor,omitempty"`
	Writers       []UIPeer            `json:"writers"`
	Alerts        []UIAlert           `json:"alerts"`
}

// UIPeerConflicts is GET /ui/api/peer/conflicts, a writer's answer to a
// peer: its conflict counts by project and minute (unix seconds / 60).
type UIPeerConflicts struct {
	Scopes map[string]map[int64]int64 `json:"scopes"`
}

// uiOverview answers the overview: the projects GET /v1/projects answers
// the session (the same code and authorization), each with its writes
// and last change from the projection and its conflicts from every
// writer, and the alerts.
func (s *Server) uiOverview(c echo.Context) error {
	page, err := s.projectsOfQuery(c)
	if err != nil {
		return err
	}
	p, now := principalOf(c), s.now()
	conflicts, peers := s.clusterConflicts(c, "", func(scope string) bool { return p.AllowsPrefix(Read, scope+"/") })
	o := UIOverview{Principal: p.Name, ServerTime: now.UTC(), WindowSeconds: int(uiActivityWindow / time.Second),
		Projects: make([]UIOverviewProject, 0, len(page.Items)), Truncated: page.Truncated, NextCursor: page.NextCursor, Writers: redactPeers(p, peers)}
	acts, err := s.pageActivity(c.Request().Context(), p, page.Items, now)
	if err != nil {
		return err
	}
	for i, it := range page.Items {
		op := acts[i]
		if p.AllowsPrefix(Read, it.Scope()+"/") {
			n := windowConflicts(conflicts[it.Scope()], now)
			rate := float64(n) / uiActivityWindow.Minutes()
			op.Conflicts, op.ConflictsPerMinute = &n, &rate
		}
		o.Projects = append(o.Projects, op)
	}
	o.Alerts = s.uiAlerts(c.Request().Context(), p, peers)
	return c.JSON(http.StatusOK, o)
}

// pageActivity is the rows of the overview of items, a page of
// projects: each one's writes over the window and its last change in the
// key ranges p may read of it. The ranges of the whole page are read in
// one statement (projection.Store.Activities), bounded by the page's
// size and the request's deadline.
func (s *Server) pageActivity(ctx context.Context, p *Principal, items []contract.ProjectInfo, now time.Time) ([]UIOverviewProject, error) {
	ops := make([]UIOverviewProject, len(items))
	for i, it := range items {
		ops[i] = UIOverviewProject{Tenant: it.Tenant, Project: it.Project, Keys: it.Keys}
	}
	st, ok := s.list.(uiStore)
	if !ok {
		return ops, nil
	}
	var rs []projection.ActivityRange
	var of []int // the project (ops' index) of each range of rs
	for i, it := range items {
		scope := it.Scope()
		k, err := contract.ParseKey(scope + "/k")
		if err != nil {
			return nil, fmt.Errorf("api: overview: project %s: %w", scope, err)
		}
		part := s.w.Partition(k)
		for _, r := range readRanges(p, scope+"/") {
			r.Hi = min(r.Hi, scope+"0")
			rs, of = append(rs, projection.ActivityRange{Range: r, Partition: part}), append(of, i)
		}
	}
	acts, err := st.Activities(ctx, rs, now.Add(-uiActivityWindow))
	if err != nil {
		return nil, err
	}
	for j, a := range acts {
		op := &ops[of[j]]
		op.Writes += a.Writes
		if !a.LastChange.IsZero() && (op.LastChange == nil || a.LastChange.After(*op.LastChange)) {
			last := a.LastChange
			op.LastChange = &last
		}
	}
	for i := range ops {
		ops[i].WritesPerMinute = float64(ops[i].Writes) / uiActivityWindow.Minutes()
	}
	return ops, nil
}

// windowConflicts sums counts (by minute) over the minutes of the
// activity window ending with now's.
func windowConflicts(counts map[int64]int64, now time.Time) int64 {
	m := now.Unix() / 60
	var n int64
	for mm := m - int64(uiActivityWindow/time.Minute) + 1; mm <= m; mm++ {
		n += counts[mm]
	}
	return n
}

// uiPeerConflicts answers a peer's fan-out: this writer's own conflict
// counts of the projects the session may read whole. Only a request a
// peer proves (the forwarding proof of the shared peer secret) is
// answered; one this writer sent itself answers nothing (the fan-out
// reached itself under another address).
func (s *Server) uiPeerConflicts(c echo.Context) error {
	if err := onlyParams(c.QueryParams(), "prefix"); err != nil {
		return err
	}
	from, _ := originOf(c)
	switch from {
	case writer.FromSelf:
		return c.JSON(http.StatusOK, UIPeerConflicts{})
	case writer.FromClient:
		return contract.FieldErrorf(contract.EForbidden, ForwardedHeader, "only a writer of the deployment asks this")
	}
	p, prefix := principalOf(c), c.QueryParam("prefix")
	keep := func(scope string) bool {
		return p.AllowsPrefix(Read, scope+"/") && (prefix == "" || strings.HasPrefix(prefix, scope+"/"))
	}
	return c.JSON(http.StatusOK, UIPeerConflicts{Scopes: s.conflicts.byMinute(keep, s.now())})
}

// clusterConflicts is the conflict counts by project and minute of every
// writer, of the projects keep accepts: this writer's, and those of each
// other writer of the owners table, asked at once (uiPeerTimeout each).
// The peers are listed, each marked as answered or not.
func (s *Server) clusterConflicts(c echo.Context, prefix string, keep func(string) bool) (map[string]map[int64]int64, []UIPeer) {
	now := s.now()
	merged := s.conflicts.byMinute(keep, now)
	peers := []UIPeer{{Addr: s.cfg.AdvertiseURL, Self: true, Answered: true}}
	addrs := s.peerAddrs(c.Request().Context())
	if len(addrs) == 0 {
		return merged, peers
	}
	answers := make([]UIPeerConflicts, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { answers[i], errs[i] = s.askPeer(c, addr, prefix) })
	}
	wg.Wait()
	for i, addr := range addrs {
		pe := UIPeer{Addr: addr, Answered: errs[i] == nil}
		if errs[i] != nil {
			pe.Error = errs[i].Error()
		}
		peers = append(peers, pe)
		for scope, counts := range answers[i].Scopes {
			if !keep(scope) {
				continue
			}
			if merged[scope] == nil {
				merged[scope] = make(map[int64]int64)
			}
			for m, n := range counts {
				merged[scope][m] += n
			}
		}
	}
	return merged, peers
}

// peerAddrs are the advertise URLs of the other writers the owners table
// names (none when it cannot be read: the alerts say so).
func (s *Server) peerAddrs(ctx context.Context) []string {
	st, ok := s.list.(uiStore)
	if !ok {
		return nil
	}
	owners, err := st.Owners(ctx)
	if err != nil {
		return nil
	}
	var addrs []string
	for _, o := range owners {
		if o.Addr != "" && o.Addr != s.cfg.AdvertiseURL && !slices.Contains(addrs, o.Addr) {
			addrs = append(addrs, o.Addr)
		}
	}
	slices.Sort(addrs)
	return addrs
}

// askPeer asks the writer at addr for its conflict counts, with the
// session's cookie (writers of a deployment share the UI key) and this
// writer's forwarding proof. Without a shared peer secret the peer could
// not tell the request from a client's: it is not asked.
func (s *Server) askPeer(c echo.Context, addr, prefix string) (UIPeerConflicts, error) {
	var a UIPeerConflicts
	if !s.fwd.shared {
		return a, fmt.Errorf("not asked: no peer secret shared")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), uiPeerTimeout)
	defer cancel()
	uri := uiPeerConflictsPath
	if prefix != "" {
		uri += "?prefix=" + url.QueryEscape(prefix)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(addr, "/")+uri, nil)
	if err != nil {
		return a, fmt.Errorf("address: %w", err)
	}
	_, carry := originOf(c)
	proof := s.fwd.proof(http.MethodGet, uri, s.now())
	if carry != "" {
		proof = carry + "," + proof
	}
	req.Header.Set(ForwardedHeader, proof)
	if ck, err := c.Cookie(uiCookie); err == nil {
		req.AddCookie(ck)
	}
	resp, err := s.fwd.client.Do(req)
	if err != nil {
		return a, fmt.Errorf("did not answer: %w", unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 8<<20)).Decode(&a); err != nil {
		return a, fmt.Errorf("answer: %w", err)
	}
	return a, nil
}

// unwrapURLError drops the URL an error of the HTTP client repeats.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// operator reports whether p may read every tenant: the health view and
// the writers' addresses are shown to such a principal only.
func operator(p *Principal) bool { return p.AllowsPrefix(Read, "tenant/") }

// redactPeers hides the writers' addresses and errors from a principal
// that is no operator: it sees how many answered.
func redactPeers(p *Principal, peers []UIPeer) []UIPeer {
	if operator(p) {
		return peers
	}
	out := make([]UIPeer, len(peers))
	for i, pe := range peers {
		out[i] = UIPeer{Addr: fmt.Sprintf("writer %d", i+1), Self: pe.Self, Answered: pe.Answered}
	}
	return out
}
