package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/writer"
)

// UIPartition is one partition of the changes topic in GET
// /ui/api/health: its owner (the owners table) and how far the projector
// and the auditor are behind its end. A lag is absent when its position
// is unknown (Postgres or the brokers did not answer, the auditor never
// committed).
type UIPartition struct {
	Partition    int32      `json:"partition"`
	Owner        string     `json:"owner,omitempty"`
	Addr         string     `json:"addr,omitempty"`
	Epoch        int64      `json:"epoch,omitempty"`
	OwnedSince   *time.Time `json:"ownedSince,omitempty"`
	End          *int64     `json:"end,omitempty"`
	Projected    *int64     `json:"projected,omitempty"`
	ProjectorLag *int64     `json:"projectorLag,omitempty"`
	Audited      *int64     `json:"audited,omitempty"`
	AuditorLag   *int64     `json:"auditorLag,omitempty"`
	// Self: this writer owns the partition.
	Self bool `json:"self,omitempty"`
}

// UIWriter is a writer of the owners table and the partitions it owns.
type UIWriter struct {
	Addr       string  `json:"addr"`
	ID         string  `json:"id,omitempty"`
	Self       bool    `json:"self,omitempty"`
	Partitions []int32 `json:"partitions"`
}

// UIReach is whether a service answered this writer.
type UIReach struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
}

// UIAudit is what the writer knows of the auditor: its position (its
// consumer group's committed offsets, Group) and its last periodic
// verification, asked of the auditor (Config.AuditorURL): Verification
// is one of the UIVerify* states, VerificationError why the auditor is
// unreachable, LastVerification the last run when recorded.
type UIAudit struct {
	Group                 string          `json:"group"`
	Positioned            bool            `json:"positioned"`
	MaxLag                *int64          `json:"maxLag,omitempty"`
	Verification          string          `json:"verification"`
	VerificationError     string          `json:"verificationError,omitempty"`
	VerifyIntervalSeconds float64         `json:"verifyIntervalSeconds,omitempty"`
	LastVerification      *UIVerification `json:"lastVerification,omitempty"`
}

// UIHealth is GET /ui/api/health.
type UIHealth struct {
	ServerTime      time.Time     `json:"serverTime"`
	Self            string        `json:"self"`
	Writers         []UIWriter    `json:"writers"`
	Partitions      []UIPartition `json:"partitions"`
	MaxProjectorLag *int64        `json:"maxProjectorLag,omitempty"`
	Audit           UIAudit       `json:"audit"`
	Broker          UIReach       `json:"broker"`
	Database        UIReach       `json:"database"`
	Peers           []UIPeer      `json:"peers"`
	Alerts          []UIAlert     `json:"alerts"`
}

// clusterState is what the health view and the alerts read, once.
type clusterState struct {
	parts    int32
	owners   map[int32]projection.Owner
	ownerErr error
	lp       writer.LogPositions
	brokers  bool
	// owned are the partitions this writer serves, self its address:
	// the owners table lacks them when it has none.
	owned map[int32]bool
	self  string
	// verify is the auditor's last verification, now the time it was
	// asked.
	verify uiVerify
	now    time.Time
}

// readCluster reads the owners table and the log's positions (each
// source on its own: an unreachable one is an error, not a failure of
// the whole read); false when this server runs over no cluster (a
// writer and projection of tests).
func (s *Server) readCluster(ctx context.Context) (clusterState, bool) {
	var cs clusterState
	cl, ok := s.w.(uiCluster)
	st, ok2 := s.list.(uiStore)
	if !ok || !ok2 {
		return cs, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*uiPeerTimeout)
	defer cancel()
	verified := make(chan uiVerify, 1)
	go func() { verified <- s.readVerification(ctx) }()
	cs.parts, cs.brokers, cs.self, cs.owned = cl.Partitions(), cl.BrokersAnswering(), s.cfg.AdvertiseURL, map[int32]bool{}
	for _, p := range cl.Owned() {
		cs.owned[p] = true
	}
	cs.owners, cs.ownerErr = st.Owners(ctx)
	cs.lp = cl.LogPositions(ctx, cmp.Or(s.cfg.AuditorGroup, DefaultAuditorGroup))
	cs.verify, cs.now = <-verified, s.now()
	return cs, true
}

// partition is partition p's row of the health view.
func (cs *clusterState) partition(p int32) UIPartition {
	u := UIPartition{Partition: p}
	if o, ok := cs.owners[p]; ok {
		u.Owner, u.Addr, u.Epoch = o.ID, o.Addr, o.Epoch
		at := o.UpdatedAt.UTC()
		u.OwnedSince = &at
	} else if cs.owned[p] {
		u.Owner, u.Addr, u.Self = "this writer", cs.self, true
	}
	end, hasEnd := cs.lp.Ends[p]
	if hasEnd {
		u.End = &end
	}
	if next, ok := cs.lp.Projected[p]; ok || cs.lp.ProjectedErr == nil {
		u.Projected = &next
		if hasEnd {
			lag := max(0, end-next)
			u.ProjectorLag = &lag
		}
	}
	if at, ok := cs.lp.Audited[p]; ok {
		u.Audited = &at
		if hasEnd {
			lag := max(0, end-at)
			u.AuditorLag = &lag
		}
	}
	return u
}

// uiHealth answers the cluster's health to an operator (a principal
// that may read every tenant): the writers and their partitions, the
// projector's and the auditor's lags, the brokers' and the database's
// reachability, the peers' answers and the alerts.
func (s *Server) uiHealth(c echo.Context) error {
	if err := onlyParams(c.QueryParams()); err != nil {
		return err
	}
	p := principalOf(c)
	if !operator(p) {
		return contract.FieldErrorf(contract.EForbidden, "cookie", "principal %s may not read every tenant: the cluster's health is an operator's", p.Name)
	}
	cs, ok := s.readCluster(c.Request().Context())
	if !ok {
		return contract.Errorf(contract.ENotFound, "this server runs over no cluster to show")
	}
	h := UIHealth{ServerTime: s.now().UTC(), Self: s.cfg.AdvertiseURL, Writers: []UIWriter{}, Partitions: []UIPartition{},
		Broker: reach(cs.lp.EndsErr), Database: reach(cmp.Or(cs.ownerErr, cs.lp.ProjectedErr)),
		Audit: UIAudit{Group: cmp.Or(s.cfg.AuditorGroup, DefaultAuditorGroup), Verification: cs.verify.state, VerificationError: cs.verify.err,
			VerifyIntervalSeconds: cs.verify.got.IntervalSeconds, LastVerification: cs.verify.got.Last}}
	if !cs.brokers && h.Broker.Reachable {
		h.Broker = UIReach{Error: "the brokers did not answer the writer's probe in the last 1.5 s"}
	}
	byAddr := map[string]*UIWriter{}
	for p := range cs.parts {
		u := cs.partition(p)
		h.Partitions = append(h.Partitions, u)
		if u.ProjectorLag != nil {
			h.MaxProjectorLag = maxPtr(h.MaxProjectorLag, *u.ProjectorLag)
		}
		if u.AuditorLag != nil {
			h.Audit.Positioned = true
			h.Audit.MaxLag = maxPtr(h.Audit.MaxLag, *u.AuditorLag)
		}
		if u.Owner == "" {
			continue
		}
		w := byAddr[u.Addr]
		if w == nil {
			w = &UIWriter{Addr: u.Addr, Self: u.Addr == s.cfg.AdvertiseURL}
			if u.OwnedSince != nil {
				w.ID = u.Owner
			}
			byAddr[u.Addr] = w
		}
		w.Partitions = append(w.Partitions, p)
	}
	for _, w := range byAddr {
		h.Writers = append(h.Writers, *w)
	}
	slices.SortFunc(h.Writers, func(a, b UIWriter) int { return cmp.Compare(a.Addr, b.Addr) })
	_, h.Peers = s.clusterConflicts(c, "", func(string) bool { return false })
	h.Alerts = alertsOf(&cs, h.Peers)
	return c.JSON(http.StatusOK, h)
}

func maxPtr(cur *int64, v int64) *int64 {
	if cur == nil || v > *cur {
		return &v
	}
	return cur
}

func reach(err error) UIReach {
	if err != nil {
		return UIReach{Error: err.Error()}
	}
	return UIReach{Reachable: true}
}

// uiAlerts are the alerts firing, as the overview shows them: to an
// operator with their detail, to anyone else by name and partition.
func (s *Server) uiAlerts(ctx context.Context, p *Principal, peers []UIPeer) []UIAlert {
	cs, ok := s.readCluster(ctx)
	if !ok {
		return []UIAlert{}
	}
	alerts := alertsOf(&cs, peers)
	if !operator(p) {
		for i := range alerts {
			alerts[i].Message = alertSummary[alerts[i].Name]
		}
	}
	return alerts
}

// alertSummary says what each alert means, without detail.
var alertSummary = map[string]string{
	AlertProjectorLag:      fmt.Sprintf("the projector is more than %d offsets behind a partition", UIProjectorLagAlert),
	AlertAuditorLag:        fmt.Sprintf("the auditor is more than %d offsets behind a partition", UIAuditorLagAlert),
	AlertNoOwner:           "a partition has no owning writer recorded",
	AlertBrokerDown:        "the brokers do not answer",
	AlertDatabaseDown:      "the projection's database does not answer",
	AlertPeerNotAnswering:  "a writer did not answer its peers",
	AlertAuditVerifyFailed: "the auditor's last verification of the audit trail found a discrepancy or could not run",
	AlertAuditVerifyStale:  "the auditor has not verified the audit trail in 3 verification intervals",
}

// alertsOf are the alerts cs and the peers' answers raise.
func alertsOf(cs *clusterState, peers []UIPeer) []UIAlert {
	out := []UIAlert{}
	if err := cs.lp.EndsErr; err != nil || !cs.brokers {
		out = append(out, UIAlert{Name: AlertBrokerDown, Message: "the brokers do not answer: " + errText(err, "probe silent")})
	}
	if err := cmp.Or(cs.ownerErr, cs.lp.ProjectedErr); err != nil {
		out = append(out, UIAlert{Name: AlertDatabaseDown, Message: "the projection's database does not answer: " + err.Error()})
	}
	for p := range cs.parts {
		u := cs.partition(p)
		part := p
		if cs.ownerErr == nil && u.Owner == "" {
			out = append(out, UIAlert{Name: AlertNoOwner, Partition: &part, Message: fmt.Sprintf("partition %d has no owner in the owners table", p)})
		}
		if u.ProjectorLag != nil && *u.ProjectorLag > UIProjectorLagAlert {
			out = append(out, UIAlert{Name: AlertProjectorLag, Partition: &part, Message: fmt.Sprintf("the projector is %d offsets behind partition %d", *u.ProjectorLag, p)})
		}
		if u.AuditorLag != nil && *u.AuditorLag > UIAuditorLagAlert {
			out = append(out, UIAlert{Name: AlertAuditorLag, Partition: &part, Message: fmt.Sprintf("the auditor is %d offsets behind partition %d", *u.AuditorLag, p)})
		}
	}
	for _, pe := range peers {
		if !pe.Answered {
			out = append(out, UIAlert{Name: AlertPeerNotAnswering, Message: fmt.Sprintf("writer %s did not answer: %s", pe.Addr, pe.Error)})
		}
	}
	return append(out, cs.verify.alerts(cs.now)...)
}

func errText(err error, none string) string {
	if err == nil {
		return none
	}
	return err.Error()
}

// uiKey answers one key's row (uiRow: no value) as its owner knows it
// now (forwarded to it, as GET /v1/kv/{key} is), or 404.
func (s *Server) uiKey(c echo.Context) error {
	q := c.QueryParams()
	if err := onlyParams(q, "key"); err != nil {
		return err
	}
	p, k, err := s.authorizeKey(c, Read, q.Get("key"))
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	st, err := s.w.State(c.Request().Context(), k)
	if err != nil {
		return err
	}
	e := st.Visible(s.now())
	if e == nil {
		return contract.Errorf(contract.ENotFound, "key %s does not exist", k)
	}
	return c.JSON(http.StatusOK, s.uiRow(p, e))
}
