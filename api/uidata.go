package api

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/watch"
)

// The status page's JSON (/ui/api/...). Nothing here carries a value:
// the projects are counts of keys (GET /v1/projects' own handler), the
// rows say what a key is and who touched it, a plain value is shown as a
// keyed fingerprint at most, a collection as its size, a lock or a
// leader pool as held, by which principal, with its fencing token (to a
// principal that may read it); never the holder's label, which users
// write.

// uiDefaultKeys and uiMaxKeys bound a page of a project's keys on the
// status page: the page asks for uiDefaultKeys and follows nextCursor.
const (
	uiDefaultKeys = 100
	uiMaxKeys     = 1000
)

// uiMaxHistory is the most versions of a key's history the page shows.
const uiMaxHistory = 50

// UIProject is a project a principal may read (part of it, when Prefix
// is below the project).
type UIProject struct {
	Tenant  string `json:"tenant"`
	Project string `json:"project"`
	Prefix  string `json:"prefix"`
}

// UIMe is GET /ui/api/me: who the session is and what it may open.
type UIMe struct {
	Principal string      `json:"principal"`
	Projects  []UIProject `json:"projects"`
	// Tenants lists tenants the principal may read whole (any project
	// of them can be opened by name); AnyTenant: every tenant.
	Tenants   []string `json:"tenants"`
	AnyTenant bool     `json:"anyTenant"`
}

// UIKey is one row of GET /ui/api/keys.
type UIKey struct {
	Key        string     `json:"key"`
	Purpose    string     `json:"purpose"`
	Version    int64      `json:"version"`
	LastWriter string     `json:"lastWriter"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// Held: a lock is held or a leader pool has a leader, by the
	// principal HolderPrincipal (the token's principal of the tenure), with
	// the fencing Token; its lease ends at ExpiresAt. The holder's label
	// (a user's string) is never shown.
	Held            bool   `json:"held,omitempty"`
	HolderPrincipal string `json:"holderPrincipal,omitempty"`
	Token           int64  `json:"token,omitempty"`
	// Size (and InFlight for a queue) of a collection.
	Size     *int64 `json:"size,omitempty"`
	InFlight int64  `json:"inFlight,omitempty"`
	// Fingerprint of a plain value: HMAC-SHA256 keyed per deployment,
	// first 16 hex digits; equal values have equal fingerprints.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// UIKeys is GET /ui/api/keys: a page of a project's rows.
type UIKeys struct {
	Prefix     string    `json:"prefix"`
	ServerTime time.Time `json:"serverTime"`
	Keys       []UIKey   `json:"keys"`
	Truncated  bool      `json:"truncated"`
	// NextCursor is the cursor of the next page, when Truncated.
	NextCursor string `json:"nextCursor,omitempty"`
}

// UIVersion is one version of GET /ui/api/history: what happened, by
// whom and when, never the value.
type UIVersion struct {
	Version   int64         `json:"version"`
	Kind      contract.Kind `json:"kind"`
	Op        contract.Op   `json:"op"`
	Principal string        `json:"principal"`
	TS        time.Time     `json:"ts"`
	TxnID     string        `json:"txnId,omitempty"`
	// ElementOp is a collection event's element change (add, remove).
	ElementOp string `json:"elementOp,omitempty"`
	// Fingerprint is the fingerprint of the value a put left (keyed
	// HMAC, as UIKey's): equal values, equal fingerprints.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// UIHistory is GET /ui/api/history.
type UIHistory struct {
	Key      string      `json:"key"`
	Versions []UIVersion `json:"versions"`
}

// UIAt is GET /ui/api/at: a key's state at a past point (At, the
// position it resolved to), as a row shows it: its version, purpose and,
// of a plain value, its Fingerprint (the rows' fingerprint: equal to the
// row's when the value then equals the value now), or Absent. Never the
// value.
type UIAt struct {
	Key         string `json:"key"`
	At          string `json:"at"`
	Position    string `json:"position"`
	Version     int64  `json:"version"`
	Purpose     string `json:"purpose"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Absent      bool   `json:"absent,omitempty"`
}

// UIEvent is one event of GET /ui/api/watch: a watch event without its
// value and element.
type UIEvent struct {
	Cursor    string        `json:"cursor"`
	Key       string        `json:"key"`
	Version   int64         `json:"version"`
	Kind      contract.Kind `json:"kind"`
	Op        contract.Op   `json:"op"`
	Time      time.Time     `json:"time"`
	Principal string        `json:"principal"`
	ElementOp string        `json:"elementOp,omitempty"`
	Purpose   string        `json:"purpose,omitempty"`
	// Fingerprint is the fingerprint of the value a put left (as
	// UIVersion's), absent for element changes, deletes and expiries.
	Fingerprint string `json:"fingerprint,omitempty"`
}

func (s *Server) uiMe(c echo.Context) error {
	p := principalOf(c)
	me := UIMe{Principal: p.Name, Projects: []UIProject{}, Tenants: []string{}}
	for _, g := range p.Grants {
		if !hasRight(g, Read) {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(g.Prefix, "/"), "/")
		switch {
		case len(parts) == 1:
			me.AnyTenant = true
		case len(parts) <= 3:
			me.Tenants = append(me.Tenants, parts[1])
		default:
			me.Projects = append(me.Projects, UIProject{Tenant: parts[1], Project: parts[3], Prefix: strings.Join(parts, "/") + "/"})
		}
	}
	return c.JSON(http.StatusOK, me)
}

func hasRight(g Grant, r Right) bool {
	for _, gr := range g.Rights {
		if gr == r {
			return true
		}
	}
	return false
}

// uiPrefix reads and authorizes the prefix parameter: a valid listing
// prefix the principal may read all of.
func uiPrefix(c echo.Context, q url.Values) (string, *Principal, error) {
	p := principalOf(c)
	prefix := q.Get("prefix")
	if err := contract.ValidatePrefix(prefix); err != nil {
		return "", nil, err
	}
	if !p.AllowsPrefix(Read, prefix) {
		return "", nil, contract.FieldErrorf(contract.EForbidden, "prefix", "principal %s may not read every key under %s", p.Name, prefix)
	}
	return prefix, p, nil
}

// uiKeys answers a page of the rows of the keys under a prefix (a
// project's, or what the page's search adds to it) from the projection's
// listing, each value replaced by what uiRow makes of it. A status page
// needs no read-your-writes: any writer answers, without forwarding, as
// of the projector's last commit. The pages are not one snapshot, as the
// API's listing pages are: a later page starts after its cursor's key as
// the projection is then, so no key is shown twice, and a key created
// meanwhile before the cursor shows once the page is reloaded.
func (s *Server) uiKeys(c echo.Context) error {
	q := c.QueryParams()
	if err := onlyParams(q, "prefix", "limit", "cursor", "purpose", "type"); err != nil {
		return err
	}
	prefix, p, err := uiPrefix(c, q)
	if err != nil {
		return err
	}
	limit, err := pageLimitOf(q, uiDefaultKeys, uiMaxKeys)
	if err != nil {
		return err
	}
	cur, err := parseListCursor(q.Get("cursor"), prefix)
	if err != nil {
		return err
	}
	match, filtered, err := uiKeyFilter(q)
	if err != nil {
		return err
	}
	release, err := s.takeList(c)
	if err != nil {
		return err
	}
	defer release()
	now := s.now()
	a := UIKeys{Prefix: prefix, ServerTime: now.UTC(), Keys: make([]UIKey, 0, limit)}
	after, overflow, batch := cur.after, false, limit
	if filtered {
		batch = uiMaxKeys // read more at once: most rows may not match
	}
	for scanned := 0; ; {
		entries, truncated, err := s.list.List(c.Request().Context(), prefix, projection.Page{After: after, Limit: batch, MaxBytes: s.cfg.MaxListBytes, Now: now})
		if err != nil {
			return err
		}
		for i := range entries {
			switch {
			case !match(&entries[i]):
			case len(a.Keys) < limit:
				a.Keys = append(a.Keys, s.uiRow(p, &entries[i]))
			default:
				overflow = true
			}
		}
		scanned += len(entries)
		if len(entries) > 0 {
			after = entries[len(entries)-1].Key
		}
		// A filtered page may come short, or empty, with a cursor: the
		// scan stops after uiMaxFilterScan keys so that no request
		// reads a whole large project.
		if !truncated || len(entries) == 0 || len(a.Keys) >= limit || scanned >= uiMaxFilterScan {
			a.Truncated = overflow || truncated && len(entries) > 0
			break
		}
	}
	if a.Truncated {
		if n := len(a.Keys); n == limit {
			after = a.Keys[n-1].Key
		}
		a.NextCursor = nextListCursor(after, nil)
	}
	return c.JSON(http.StatusOK, a)
}

// uiMaxFilterScan bounds the keys one filtered page of GET /ui/api/keys
// reads (uiMaxKeys at a time, each read within MaxListBytes).
const uiMaxFilterScan = 10000

// UI key types (the type filter of GET /ui/api/keys): a key's type
// follows from its purpose.
var uiKeyTypes = []string{"plain", "lock", "set", "list", "queue"}

// uiKeyType is the type of a key of purpose: lock (locks and leader
// pools), set, list, queue, or plain.
func uiKeyType(purpose string) string {
	switch {
	case purpose == contract.PurposeLock || purpose == contract.PurposeLeader:
		return "lock"
	case contract.IsCollectionPurpose(purpose):
		return purpose
	}
	return "plain"
}

// uiKeyFilter reads the purpose and type filters of GET /ui/api/keys:
// the rows they keep, and whether any is set.
func uiKeyFilter(q url.Values) (func(*contract.Entry) bool, bool, error) {
	purpose, typ := q.Get("purpose"), q.Get("type")
	if typ != "" && !slices.Contains(uiKeyTypes, typ) {
		return nil, false, contract.FieldErrorf(contract.EInvalid, "type", "type must be one of %s", strings.Join(uiKeyTypes, ", "))
	}
	if len(purpose) > 64 {
		return nil, false, contract.FieldErrorf(contract.EInvalid, "purpose", "purpose is at most 64 bytes")
	}
	return func(e *contract.Entry) bool {
		return (purpose == "" || e.Semantics.Purpose == purpose) && (typ == "" || uiKeyType(e.Semantics.Purpose) == typ)
	}, purpose != "" || typ != "", nil
}

// uiRow is the row of an entry: its metadata, and of its value only what
// the purpose makes public to a reader: that a lock is held, by which
// principal, with which fencing token (never the holder's label), a
// collection's size, a plain value's fingerprint.
func (s *Server) uiRow(p *Principal, e *contract.Entry) UIKey {
	r := UIKey{Key: e.Key, Purpose: e.Semantics.Purpose, Version: e.Version, LastWriter: e.LastWriter, UpdatedAt: e.UpdatedAt, ExpiresAt: e.ExpiresAt}
	switch purpose := e.Semantics.Purpose; {
	case !plainPurpose(purpose) && !contract.IsCollectionPurpose(purpose):
		// The tenure to a principal with the read right on the key, as GET
		// :lock answers it, but not the holder's label: a string a user
		// wrote, as a value is. A tenure written before tenures named
		// their principal is its last writer's (decide.LockValue.HeldBy).
		var v decide.LockValue
		if p.Allows(Read, e.Key) && json.Unmarshal(e.Value, &v) == nil && v.Token > 0 {
			r.Held, r.HolderPrincipal, r.Token = true, cmp.Or(v.Principal, e.LastWriter), v.Token
		}
	case contract.IsCollectionPurpose(purpose):
		if m, err := contract.ParseCollectionMeta(e.Value); err == nil {
			r.Size, r.InFlight = &m.Size, m.InFlight
		}
	default:
		r.Fingerprint = s.uiFingerprint(e.Value)
	}
	return r
}

// plainPurpose reports whether a key of purpose holds a plain value (no
// lock, leader pool or collection): the value a fingerprint stands for.
func plainPurpose(purpose string) bool {
	return purpose != contract.PurposeLock && purpose != contract.PurposeLeader && !contract.IsCollectionPurpose(purpose)
}

// uiFingerprint is a plain value's fingerprint: HMAC-SHA256 under the
// deployment's fingerprint key of the value's canonical JSON
// (canonicalJSON), first 16 hex digits. Keyed, so that a fingerprint
// does not let one test guesses of a value offline; canonical, so that a
// value has one fingerprint whichever text holds it: a row's value is
// the text written, a past one (EntryAsOf) its history's jsonb text,
// whose keys jsonb reorders.
func (s *Server) uiFingerprint(v []byte) string {
	m := hmac.New(sha256.New, s.ui.fingerprintKey)
	m.Write(canonicalJSON(v))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// canonicalJSON is v with its objects' members in key order (the last
// of a duplicated key, as jsonb keeps), without insignificant space, and
// each number in one form per value (canonicalNumber: 1.50, 15e-1 and
// 1.5 are one number), so that two texts of one JSON value are one
// text. What does not parse is taken as it is.
func canonicalJSON(v []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if d.Decode(&x) != nil {
		return v
	}
	b, err := json.Marshal(canonicalNumbers(x))
	if err != nil {
		return v
	}
	return b
}

// canonicalNumbers replaces, in a decoded JSON value, each json.Number
// by its canonicalNumber.
func canonicalNumbers(x any) any {
	switch x := x.(type) {
	case json.Number:
		return json.Number(canonicalNumber(string(x)))
	case map[string]any:
		for k, v := range x {
			x[k] = canonicalNumbers(v)
		}
	case []any:
		for i, v := range x {
			x[i] = canonicalNumbers(v)
		}
	}
	return x
}

// canonicalNumber is a JSON number literal as its significant digits
// (no leading or trailing zero) and a decimal exponent when not 0:
// 1.50 and 150e-2 are "15e-1", 100 is "1e2", -0.0 is "0". Exact, and
// linear in the literal (no expansion of 1e999999). An exponent too
// large to add to is kept as written.
func canonicalNumber(lit string) string {
	s, neg := strings.CutPrefix(lit, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1<<40 || e < -(1<<40) {
			return lit
		}
		s, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return "0"
	}
	sig := strings.TrimRight(digits, "0")
	exp += len(digits) - len(sig) - len(frac)
	if exp != 0 {
		sig += "e" + strconv.Itoa(exp)
	}
	if neg {
		sig = "-" + sig
	}
	return sig
}

// uiAt answers a key's state at a past point (at: a position or an RFC
// 3339 time) as uiRow shows it, from the same read GET /v1/kv/{key}?at=
// makes (parseAt, resolveAt, projection EntryAsOf) and with its errors:
// 400 (field at) for a missing, malformed or future at, 410
// cursor_expired before the history retention. Like that read, it is
// answered by the key's owner (forwarded, session cookie and all), which
// knows which events of the key are still unprojected.
func (s *Server) uiAt(c echo.Context) error {
	q := c.QueryParams()
	if err := onlyParams(q, "key", "at"); err != nil {
		return err
	}
	p, k, err := s.authorizeKey(c, Read, q.Get("key"))
	if err != nil {
		return err
	}
	a, err := parseAt(q)
	if err != nil {
		return err
	}
	if a == nil {
		return contract.FieldErrorf(contract.EInvalid, "at", "at (a position p<partition>.o<offset> or an RFC 3339 time) is required")
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	e, pos, err := s.entryAt(c, k, a)
	if err != nil {
		return err
	}
	u := UIAt{Key: k.String(), At: q.Get("at"), Position: pos.String(), Absent: e == nil}
	if e != nil {
		r := s.uiRow(p, e)
		u.Version, u.Purpose, u.Fingerprint = r.Version, r.Purpose, r.Fingerprint
	}
	return c.JSON(http.StatusOK, u)
}

// uiHistory answers a key's last versions (up to uiMaxHistory from
// fromVersion), without their values.
func (s *Server) uiHistory(c echo.Context) error {
	q := c.QueryParams()
	if err := onlyParams(q, "key", "fromVersion"); err != nil {
		return err
	}
	_, k, err := s.authorizeKey(c, Read, q.Get("key"))
	if err != nil {
		return err
	}
	from, err := historyStart(q)
	if err != nil {
		return err
	}
	release, err := s.takeList(c)
	if err != nil {
		return err
	}
	defer release()
	versions, _, err := s.list.History(c.Request().Context(), k.String(), from, uiMaxHistory, s.cfg.MaxListBytes)
	if err != nil {
		return err
	}
	out := make([]UIVersion, 0, len(versions))
	for _, v := range versions {
		u := UIVersion{Version: v.Version, Kind: v.Kind, Op: v.Op, Principal: v.Principal, TS: v.TS, TxnID: v.TxnID}
		switch {
		case v.Element != nil:
			u.ElementOp = v.Element.Op
		case v.Kind == contract.KindPut && len(v.Value) > 0:
			u.Fingerprint = s.uiFingerprint(v.Value)
		}
		out = append(out, u)
	}
	return c.JSON(http.StatusOK, UIHistory{Key: k.String(), Versions: out})
}

// uiConflicts answers the project's conflicts per minute over the last
// hour, as every writer answered them (clusterConflicts), with the
// writers asked.
func (s *Server) uiConflicts(c echo.Context) error {
	if err := onlyParams(c.QueryParams(), "prefix"); err != nil {
		return err
	}
	prefix, _, err := uiPrefix(c, c.QueryParams())
	if err != nil {
		return err
	}
	scope := scopeKey(prefix).Scope()
	counts, peers := s.clusterConflicts(c, prefix, func(sc string) bool { return sc == scope })
	a := ratesOf(scope, counts[scope], s.now())
	a.Writers = redactPeers(principalOf(c), peers)
	return c.JSON(http.StatusOK, a)
}

// uiWatch streams the project's changes as the watch does, each event
// stripped of its value and element: no value reaches the browser.
func (s *Server) uiWatch(c echo.Context) error {
	if s.cfg.Watch == nil {
		return contract.Errorf(contract.ENotFound, "this server does not serve watches")
	}
	if err := onlyParams(c.QueryParams(), "prefix", "key"); err != nil {
		return err
	}
	spec, err := s.watchSpec(c)
	if err != nil {
		return err
	}
	sub, err := s.cfg.Watch.Watch(c.Request().Context(), spec)
	if err != nil {
		return err
	}
	defer sub.Close()
	return s.stream(c, sub, s.writeUIChange)
}

// writeUIChange writes one SSE event "change" of the status page: the
// event's metadata and, of the value a put left, its fingerprint (as
// the history shows it); never the value, a lock's holder or an element.
func (s *Server) writeUIChange(w *echo.Response, it watch.Item) error {
	e := it.Event
	u := UIEvent{Cursor: it.Cursor.String(), Key: e.Key, Version: e.Version, Kind: e.Kind, Op: e.Op, Time: e.TS, Principal: e.Principal, Purpose: e.Semantics.Purpose}
	if e.Element != nil {
		u.ElementOp = e.Element.Op
	}
	if e.Element == nil && e.Kind == contract.KindPut && len(e.After) > 0 {
		u.Fingerprint = s.uiFingerprint(e.After)
	}
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	_, err = w.Write([]byte("id: " + u.Cursor + "\nevent: change\ndata: " + string(b) + "\n\n"))
	return err
}

// onlyParams refuses query parameters other than names, and any given
// twice.
func onlyParams(q url.Values, names ...string) error {
	for name, vs := range q {
		known := false
		for _, n := range names {
			known = known || n == name
		}
		if !known {
			return contract.FieldErrorf(contract.EInvalid, cmp.Or(name, "query"), "unknown query parameter %q (%s)", name, strings.Join(names, ", "))
		}
		if len(vs) > 1 {
			return contract.FieldErrorf(contract.EInvalid, name, "%s is given more than once", name)
		}
	}
	return nil
}
