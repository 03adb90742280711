package api

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUISession: a cookie names its principal until its end; a changed
// byte, a cookie of another key, an ended session, an expired token and a
// token removed by a reload are all refused.
func TestUISession(t *testing.T) {
	exp := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cfgs := []TokenConfig{
		{Token: "ui-token-0123456789abcdef", Principal: "ops", Grants: []Grant{{Prefix: "tenant/acme/", Rights: []Right{Read}}}},
		{Token: "ui-short-0123456789abcdef", Principal: "temp", Grants: []Grant{{Prefix: "tenant/acme/", Rights: []Right{Read}}}, ExpiresAt: &exp},
	}
	tokens, err := NewTokens(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	a, err := newUIAuth(key, tokens, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cookie := func(a *uiAuth, token string, end time.Time) string {
		return a.cookieValue(a.ref(sha256.Sum256([]byte(token))), now, end)
	}
	ops := cookie(a, cfgs[0].Token, now.Add(time.Hour))
	if p, _, ok := a.session(ops, now); !ok || p.Name != "ops" {
		t.Fatalf("a fresh session: %v %v, want ops", p, ok)
	}
	other, _ := newUIAuth([]byte("another key, 32 bytes at least!!"), tokens, 0)
	tampered := []byte(ops)
	tampered[20] ^= 1
	for name, c := range map[string]struct {
		value string
		at    time.Time
	}{
		"tampered":      {string(tampered), now},
		"other key":     {cookie(other, cfgs[0].Token, now.Add(time.Hour)), now},
		"ended":         {ops, now.Add(time.Hour)},
		"token expired": {cookie(a, cfgs[1].Token, now.Add(5*time.Hour)), exp},
		"not base64":    {"!!", now},
	} {
		if p, _, ok := a.session(c.value, c.at); ok {
			t.Errorf("%s: session of %s accepted", name, p.Name)
		}
	}
	if _, _, ok := a.session(cookie(a, cfgs[1].Token, now.Add(5*time.Hour)), now); !ok {
		t.Fatal("the short token's session before its expiry was refused")
	}
	reloaded, err := NewTokens(cfgs[1:])
	if err != nil {
		t.Fatal(err)
	}
	tokens.Replace(reloaded)
	if _, _, ok := a.session(ops, now); ok {
		t.Fatal("a session outlived its token's removal")
	}
	if _, err := newUIAuth([]byte("short"), tokens, 0); err == nil {
		t.Fatal("a 5-byte UI key was accepted")
	}
}

// TestConflictCounter: counts land in their minute, the window is the
// last 60 minutes (older counts fall out), and projects are apart.
func TestConflictCounter(t *testing.T) {
	cc := newConflictCounter()
	t0 := time.Date(2026, 11, 24, 10, 0, 30, 0, time.UTC)
	cc.add("tenant/a/project/p", t0)
	cc.add("tenant/a/project/p", t0.Add(10*time.Second))
	cc.add("tenant/a/project/p", t0.Add(2*time.Minute))
	cc.add("tenant/a/project/q", t0)
	r := cc.perMinute("tenant/a/project/p", t0.Add(2*time.Minute))
	if len(r.Minutes) != conflictMinutes || r.Total != 3 {
		t.Fatalf("got %d minutes, total %d; want 60 and 3", len(r.Minutes), r.Total)
	}
	last := r.Minutes[conflictMinutes-1]
	if last.Count != 1 || !last.Start.Equal(time.Date(2026, 11, 24, 10, 2, 0, 0, time.UTC)) || r.Minutes[conflictMinutes-3].Count != 2 {
		t.Fatalf("minutes end with %+v, %+v; want 2 at 10:00 and 1 at 10:02", r.Minutes[conflictMinutes-3], last)
	}
	if r := cc.perMinute("tenant/a/project/p", t0.Add(61*time.Minute)); r.Total != 1 {
		t.Fatalf("an hour later the total is %d, want 1 (10:02 only)", r.Total)
	}
	// A minute's slot reused an hour later starts again from zero.
	cc.add("tenant/a/project/p", t0.Add(60*time.Minute))
	if r := cc.perMinute("tenant/a/project/p", t0.Add(60*time.Minute)); r.Total != 2 || r.Minutes[conflictMinutes-1].Count != 1 {
		t.Fatalf("after the slot's reuse: total %d, last %d; want 2 and 1", r.Total, r.Minutes[conflictMinutes-1].Count)
	}
	if r := cc.perMinute("tenant/a/project/q", t0); r.Total != 1 {
		t.Fatalf("project q: %d, want 1", r.Total)
	}
}

// TestConflictChartSharedByTenants: one tenant's conflicts on ever new
// projects cannot keep another tenant's projects out of the chart, nor
// push them out: the table is shared equally by the tenants that fill it
// (issue 28: tenant A filled the 10,000 projects in 4.7 s and B's
// conflicts were no longer charted).
func TestConflictChartSharedByTenants(t *testing.T) {
	cc := newConflictCounter()
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	project := func(tenant string, i int) string { return fmt.Sprintf("tenant/%s/project/p%d", tenant, i) }
	fill := func(tenant string, n int, at time.Time) {
		for i := range n {
			cc.add(project(tenant, i), at)
		}
	}
	held := func(tenant string) (n int) {
		for s := range cc.scopes {
			if strings.HasPrefix(s, "tenant/"+tenant+"/") {
				n++
			}
		}
		return n
	}
	charted := func(scope string, at time.Time) int64 { return cc.perMinute(scope, at).Total }
	fill("a", maxConflictScopes+1, t0)
	if a := held("a"); a != maxConflictScopes {
		t.Fatalf("tenant a holds %d projects alone; want the whole table, %d", a, maxConflictScopes)
	}
	cc.add(project("b", 0), t0)
	if n := charted(project("b", 0), t0); n != 1 {
		t.Fatalf("tenant b's conflict after a filled the table: charted %d; want 1", n)
	}
	fill("b", maxConflictScopes, t0.Add(time.Second))
	a, b := held("a"), held("b")
	t.Logf("after a and b each tried %d projects: a holds %d, b %d of %d", maxConflictScopes, a, b, maxConflictScopes)
	if a+b != maxConflictScopes || a-b > 1 || b-a > 1 {
		t.Fatalf("a holds %d projects, b %d; want equal shares of %d", a, b, maxConflictScopes)
	}
	// a's churn of new projects now takes nothing from b.
	first := charted(project("b", 0), t0.Add(2*time.Second))
	for i := range maxConflictScopes {
		cc.add(project("a", maxConflictScopes+1+i), t0.Add(2*time.Second))
	}
	if n := charted(project("b", 0), t0.Add(2*time.Second)); held("b") != b || n != first {
		t.Fatalf("b holds %d projects after a's churn (had %d), its first charted %d (was %d); want them kept", held("b"), b, n, first)
	}
	cc.add(project("c", 0), t0.Add(3*time.Second))
	if n := charted(project("c", 0), t0.Add(3*time.Second)); n != 1 || len(cc.scopes) != maxConflictScopes {
		t.Fatalf("a third tenant's conflict: charted %d, table %d; want 1 within %d", n, len(cc.scopes), maxConflictScopes)
	}
	// An hour later the quiet projects make room for anyone.
	later := t0.Add(61 * time.Minute)
	cc.add(project("d", 0), later)
	if n := charted(project("d", 0), later); n != 1 || len(cc.scopes) != 1 {
		t.Fatalf("an hour later: d charted %d, table %d; want 1 and only d's project", n, len(cc.scopes))
	}
}
