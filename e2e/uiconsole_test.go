package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// The console (docs/ui.md): overview, cluster health, a project's keys
// searched and paged, a key's live history, phones, and no value
// anywhere. Each test logs in through the real login form in headless
// Chromium. With ESKV_UI_SCREENSHOTS=docs (a directory relative to the
// repository) they save the screenshots docs/ui.md shows.

// uiBrowserLogin logs token in through the login form and waits for the
// overview.
func uiBrowserLogin(t *testing.T, ctx context.Context, s *stack, token string) {
	t.Helper()
	inBrowser(t, ctx, "log in",
		chromedp.Navigate(s.url+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("view-overview")))
}

// uiShot saves the viewport as name under $ESKV_UI_SCREENSHOTS, when set.
func uiShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("ESKV_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := fromBrowser(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join("..", dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// uiGo shows the view of hash and waits for sel.
func uiGo(t *testing.T, ctx context.Context, hash, sel string) {
	t.Helper()
	inBrowser(t, ctx, "go to "+hash,
		chromedp.Evaluate[chromedp.Void](`location.hash = `+strconv.Quote(hash)),
		chromedp.WaitVisible(chromedp.CSS(sel)))
}

// TestUIConsoleOverviewAndHealth: after login the overview lists the
// session's projects with their keys, writes and conflicts per minute
// (from every writer: here one, marked as answered), last change and
// alerts; the health view shows the writer, the partitions it owns, the
// projector's lag, the auditor's position (none: no auditor runs) and
// the broker and database as reachable. A tenant's session is refused
// the health view.
func TestUIConsoleOverviewAndHealth(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	marker := "ui-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	uiSeed(t, s, marker)
	mustPut(t, s, "tenant/globex/project/web/home", `{"value":1}`)
	waitProjected(t, s)
	ctx := mustBrowser(t)
	uiBrowserLogin(t, ctx, s, devToken)
	row := `#projects-table tr[data-project="acme/ui"]`
	inBrowser(t, ctx, "overview rows", chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS(`#projects-table tr[data-project="globex/web"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#alerts [data-alert]`)))
	got := fromBrowser(t, ctx, "overview row", chromedp.Evaluate[string](`(() => {
		const tr = document.querySelector('`+row+`');
		const c = (n) => tr.querySelector("." + n).textContent;
		return [c("keys"), c("writes"), c("conflicts"), /ago$/.test(c("last")), document.getElementById("overview-writers").textContent,
			[...document.querySelectorAll("#alerts [data-alert]")].map((a) => a.dataset.alert).join(",")].join("|");
	})()`))
	// 7 seeded writes in the last 5 minutes: 1.4 a minute; 2 conflicts: 0.4.
	if want := "4|1.4|0.4|true|Conflicts summed over 1 of 1 writer."; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "|none") {
		t.Errorf("overview row of acme/ui: %q, want %q... and no alert", got, want)
	}
	uiShot(t, ctx, "ui-overview.png")
	inBrowser(t, ctx, "health", chromedp.Click(chromedp.ID("nav-health")),
		chromedp.WaitVisible(chromedp.CSS(`#partitions-table tr[data-partition="3"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#writers-table tbody tr`)))
	health := fromBrowser(t, ctx, "health", chromedp.Evaluate[[]string](`[
		document.getElementById("health-broker").textContent,
		document.getElementById("health-database").textContent,
		document.getElementById("health-projector-lag").textContent,
		document.getElementById("health-auditor-lag").textContent,
		document.querySelector("#writers-table td.parts").textContent,
		[...document.querySelectorAll("#partitions-table td.projector-lag")].map((td) => td.textContent).join(","),
	]`))
	want := []string{"reachable", "reachable", "", "unknown: group kv-auditor has no committed offset", "0, 1, 2, 3", ""}
	for i, w := range want {
		if w != "" && health[i] != w {
			t.Errorf("health[%d] = %q, want %q", i, health[i], w)
		}
	}
	for _, lag := range strings.Split(health[5], ",") {
		if n, err := strconv.Atoi(lag); err != nil || n > 1 {
			t.Errorf("projector lags %q: want numbers, caught up (0, or 1 for a commit marker)", health[5])
		}
	}
	if !strings.HasSuffix(health[2], " offsets") {
		t.Errorf("projector lag %q, want a number of offsets", health[2])
	}
	ck := uiCookie(t, uiLogin(t, s, readerTok))
	wantCode(t, s, "/ui/api/health", ck, http.StatusForbidden, "forbidden", "cookie")
}

// TestUIConsoleVerification: with an auditor process verifying the
// trail in ClickHouse every 300 ms and the writer pointed at it
// (ESKV_AUDITOR_URL, its metrics token), the health JSON and the page
// show the last verification: when, ok, and what it covered (rows, keys,
// the offsets of each partition); no verification alert fires. The
// auditor's GET /verification is refused without the token, as its
// /metrics is. The health screenshot of docs/ui.md is taken here.
func TestUIConsoleVerification(t *testing.T) {
	t.Parallel()
	at := mustAuditTrail(t)
	addr := freeAddr(t)
	const metricsToken = "auditor-metrics-token-e2e-0123456789"
	s := mustStack(t, inproc.API(api.Config{AuditorURL: "http://" + addr, AuditorToken: metricsToken}))
	startProcArgs(t, "auditor", []string{"serve"},
		"ESKV_BROKERS="+strings.Join(s.broker.Addrs, ","), fmt.Sprintf("ESKV_PARTITIONS=%d", partitions),
		"ESKV_CLICKHOUSE_ADDR="+at.ch.Addr, "ESKV_CLICKHOUSE_DATABASE="+at.ch.Database,
		"ESKV_AUDIT_KEY="+auditKeyHex, "ESKV_AUDIT_KEY_ID=e2e", "ESKV_AUDITOR_ADDR="+addr, "ESKV_AUDITOR_LINGER=20ms",
		"ESKV_ALERT_WINDOW=0", "ESKV_LOG_LEVEL=warn", "ESKV_AUDITOR_ID=auditor-ui", "ESKV_VERIFY_INTERVAL=300ms", "ESKV_METRICS_TOKEN="+metricsToken)
	uiSeed(t, s, "ui-marker-verify")
	waitProjected(t, s)
	ck := uiCookie(t, uiLogin(t, s, devToken))
	var h api.UIHealth
	testenv.WaitFor(t, 60*time.Second, "an ok verification of the seeded writes in the health JSON", func() bool {
		uiJSON(t, s, "/ui/api/health", ck, &h)
		l := h.Audit.LastVerification
		return l != nil && l.Outcome == "ok" && l.Rows >= 7 && l.Pending == 0
	})
	l := h.Audit.LastVerification
	if h.Audit.Verification != api.UIVerifyRecorded || h.Audit.VerifyIntervalSeconds != 0.3 || len(l.Partitions) != partitions || l.Reason != "" ||
		l.FinishedAt.Before(l.StartedAt) || time.Since(l.FinishedAt) > 30*time.Second {
		t.Fatalf("health audit %+v, last %+v: want a recent ok verification of every partition", h.Audit, l)
	}
	for _, a := range h.Alerts {
		if a.Name == api.AlertAuditVerifyFailed || a.Name == api.AlertAuditVerifyStale {
			t.Fatalf("alert %s: %s", a.Name, a.Message)
		}
	}
	t.Logf("last verification: %s, %s, %d rows of %d keys against %d events, partitions %+v, in %.3fs",
		l.FinishedAt.Format(time.RFC3339), l.Outcome, l.Rows, l.Keys, l.Events, l.Partitions, l.DurationSeconds)
	for tok, want := range map[string]int{"": http.StatusUnauthorized, metricsToken: http.StatusOK} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/verification", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := httpClient.Do(req)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("the auditor's /verification with token %q: %v %v, want %d", tok, resp, err, want)
		}
		resp.Body.Close()
	}
	ctx := mustBrowser(t)
	uiBrowserLogin(t, ctx, s, devToken)
	uiGo(t, ctx, "#/health", `#health-verification[data-state="recorded"]`)
	inBrowser(t, ctx, "auditor positioned", chromedp.WaitVisible(chromedp.CSS(`#partitions-table tr[data-partition="3"]`)))
	time.Sleep(1100 * time.Millisecond) // the "ago" ticks
	text := fromBrowser(t, ctx, "verification", chromedp.Evaluate[string](`document.getElementById("health-verification").textContent`))
	if !regexp.MustCompile(`^last verification: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\d+s ago\), ok, \d+ rows of \d+ keys against \d+ events, 0 pending; offsets p0 `).MatchString(text) {
		t.Fatalf("the health view says %q", text)
	}
	t.Logf("the health view: %s", text)
	uiShot(t, ctx, "ui-health.png")
}

// uiLoadKeys writes n keys under prefix (k00000, k00001, ...) through
// POST /v1/txn, 100 a transaction, 4 transactions at once.
func uiLoadKeys(t *testing.T, s *stack, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n/100+1)
	sem := make(chan struct{}, 4)
	for from := 0; from < n; from += 100 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var ops []string
			for i := from; i < min(from+100, n); i++ {
				ops = append(ops, fmt.Sprintf(`{"op":"put","key":"%sk%05d","value":%d,"semantics":{"purpose":"checkpoint"}}`, prefix, i, i))
			}
			if r := s.do("POST", "/v1/txn", devToken, `{"ops":[`+strings.Join(ops, ",")+`]}`); r.Status != http.StatusOK {
				errs <- fmt.Sprintf("txn from %d: %d %s", from, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	waitProjected(t, s)
}

// TestUIConsoleBigProject: a project of 5,000 keys (and a few others)
// searched by the prefix big/ in the browser and paged by Next to its
// end, 100 a page: every key is seen exactly once and the last page says
// so. The overview counts them all, and a type filter keeps the lock.
func TestUIConsoleBigProject(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	const n = 5000
	project := "tenant/acme/project/big/"
	start := time.Now()
	uiLoadKeys(t, s, project+"big/", n)
	t.Logf("loaded %d keys in %v", n, time.Since(start).Round(time.Millisecond))
	mustPut(t, s, project+"other", `{"value":1}`)
	if r := s.do("POST", "/v1/kv/"+project+"big0lock:acquire", devToken, `{"holder":"w1","ttlSeconds":600}`); r.Status != http.StatusOK {
		t.Fatalf("acquire: %d %s", r.Status, r.Body)
	}
	waitProjected(t, s)
	ctx := mustBrowser(t)
	uiBrowserLogin(t, ctx, s, devToken)
	inBrowser(t, ctx, "overview count", chromedp.WaitVisible(chromedp.CSS(`#projects-table tr[data-project="acme/big"]`)))
	if keys := fromBrowser(t, ctx, "keys", chromedp.Evaluate[string](`document.querySelector('#projects-table tr[data-project="acme/big"] .keys').textContent`)); keys != strconv.Itoa(n+2) {
		t.Errorf("overview counts %s keys, want %d", keys, n+2)
	}
	inBrowser(t, ctx, "open the project", chromedp.Click(chromedp.CSS(`#projects-table tr[data-project="acme/big"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key="`+project+`big/k00000"]`)))
	inBrowser(t, ctx, "search big/", chromedp.SendKeys(chromedp.ID("keys-search"), "big/"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("keys-page").textContent = ""`),
		chromedp.Click(chromedp.ID("keys-search-go")),
		chromedp.Poll[chromedp.Void](`document.getElementById("keys-page").textContent.startsWith("page 1 ") || null`))
	inBrowser(t, ctx, "top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	uiShot(t, ctx, "ui-project.png")
	seen := map[string]int{}
	pages := 0
	for ; pages < n/100+5; pages++ {
		page := fromBrowser(t, ctx, "page", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#keys tbody tr")].map((tr) => tr.dataset.key)`))
		for _, k := range page {
			seen[k]++
		}
		if end := fromBrowser(t, ctx, "end", chromedp.Evaluate[string](`document.getElementById("keys-page").dataset.end`)); end == "true" {
			pages++
			break
		}
		want := fmt.Sprintf("page %d ", pages+2)
		inBrowser(t, ctx, "next page", chromedp.Click(chromedp.ID("keys-next")),
			chromedp.Poll[chromedp.Void](`document.getElementById("keys-page").textContent.startsWith(`+strconv.Quote(want)+`) || null`))
	}
	dups := 0
	for k, c := range seen {
		if c != 1 || !strings.HasPrefix(k, project+"big/") {
			dups++
		}
	}
	t.Logf("%d pages, %d distinct keys", pages, len(seen))
	if len(seen) != n || dups != 0 || pages != n/100 {
		t.Fatalf("paged %d pages, saw %d distinct keys (%d seen twice or outside big/), want %d keys once on %d pages", pages, len(seen), dups, n, n/100)
	}
	inBrowser(t, ctx, "filter locks",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("keys-search").value = ""; document.getElementById("keys-type").value = "lock"`),
		chromedp.Click(chromedp.ID("keys-search-go")),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key="`+project+`big0lock"]`)))
	if rows := fromBrowser(t, ctx, "locks", chromedp.Evaluate[int](`document.querySelectorAll("#keys tbody tr").length`)); rows != 1 {
		t.Errorf("type=lock shows %d rows, want the lock alone", rows)
	}
}

// TestUIConsoleKeyLive: the key view shows the key's fingerprint and
// history; a write while it is open appears at once without a reload
// (the stream carries its version and fingerprint), the row follows,
// and the fingerprint of the value before the write is read back with
// at=.
func TestUIConsoleKeyLive(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	key := uiPrefix + "checkpoint"
	mustPut(t, s, key, `{"value":{"step":1},"semantics":{"purpose":"checkpoint"}}`)
	waitProjected(t, s)
	time.Sleep(1100 * time.Millisecond) // at= of a whole second after the write
	before := time.Now().UTC()
	ctx := mustBrowser(t)
	uiBrowserLogin(t, ctx, s, readerTok)
	uiGo(t, ctx, "#/k/"+url.PathEscape(key), `#history tr[data-version="1"]`)
	inBrowser(t, ctx, "live", chromedp.WaitVisible(chromedp.CSS(`#key-live[data-live="open"]`)))
	fp1 := fromBrowser(t, ctx, "fingerprint", chromedp.Text(chromedp.ID("key-fingerprint")))
	inBrowser(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	mustPut(t, s, key, `{"value":{"step":2},"semantics":{"purpose":"checkpoint"}}`)
	inBrowser(t, ctx, "see version 2 live", chromedp.WaitVisible(chromedp.CSS(`#history tr[data-version="2"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("key-version").textContent === "2" || null`))
	got := fromBrowser(t, ctx, "after", chromedp.Evaluate[[]string](`[String(window.notReloaded === true),
		document.querySelector('#history tr[data-version="2"] td.fingerprint').textContent,
		document.getElementById("key-fingerprint").textContent]`))
	if got[0] != "true" || got[1] == "" || got[1] == fp1 || got[2] != got[1] {
		t.Fatalf("after a write: not reloaded %s, history fingerprint %q, row fingerprint %q (was %q): want the page kept and a new fingerprint", got[0], got[1], got[2], fp1)
	}
	uiShot(t, ctx, "ui-key.png")
	inBrowser(t, ctx, "fingerprint at",
		chromedp.SendKeys(chromedp.ID("at-input"), before.Format(time.RFC3339)),
		chromedp.Click(chromedp.ID("at-go")),
		chromedp.WaitVisible(chromedp.ID("at-result")))
	if at := fromBrowser(t, ctx, "at", chromedp.Text(chromedp.ID("at-result"))); !strings.Contains(at, "version 1, checkpoint, fingerprint "+fp1+" (value differs from now)") {
		t.Fatalf("the state before the write says %q, want version 1 with fingerprint %s", at, fp1)
	}
}

// TestUIConsolePhone: at 390 px every view (overview, health, project,
// key) fits: the document scrolls no wider than the viewport, and the
// wide tables scroll in their own containers.
func TestUIConsolePhone(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	uiSeed(t, s, "phone-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	ctx := mustBrowser(t)
	inBrowser(t, ctx, "390 px", chromedp.EmulateViewport(390, 844))
	uiBrowserLogin(t, ctx, s, devToken)
	views := []struct{ hash, sel, shot string }{
		{"#/", `#projects-table tr[data-project="acme/ui"]`, ""},
		{"#/health", `#partitions-table tr[data-partition="0"]`, ""},
		{"#/p/" + url.PathEscape(uiPrefix), `#keys tr[data-key="` + uiPrefix + `members"]`, "ui-phone.png"},
		{"#/k/" + url.PathEscape(uiPrefix+"jobs/lock"), `#history tr[data-version="1"]`, ""},
	}
	for _, v := range views {
		uiGo(t, ctx, v.hash, v.sel)
		w := fromBrowser(t, ctx, "width", chromedp.Evaluate[int](`document.scrollingElement.scrollWidth`))
		if w > 390 {
			wide := fromBrowser(t, ctx, "wide", chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > 390.5 && !e.closest(".scroll")).slice(0, 5).map((e) => e.tagName + "#" + e.id + "." + e.className)`))
			t.Errorf("%s at 390 px: the page is %d px wide (%v)", v.hash, w, wide)
		}
		if v.shot != "" {
			uiShot(t, ctx, v.shot)
		}
	}
}

// TestUIConsoleNoSecret writes a random secret through every write path
// whose result the console shows (put, patch, a transaction, counter
// values, a queue's items, a set's members, a list's elements), opens
// every view of it in the browser, and finds the secret in no page's
// HTML, in no JSON the page fetched (each fetched again with a session
// of the same principal) and in none of the console's event streams.
// The secret is also a lock's holder and a leader pool's leader: those
// labels are written by users too, and the console shows only that the
// key is held, by which principal, its fencing token and lease end.
func TestUIConsoleNoSecret(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	secret := "s3cr3t" + strconv.FormatInt(time.Now().UnixNano(), 36)
	num := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000_000+7_000_000_000_000, 10)
	p := "tenant/acme/project/secret/"
	ck := uiCookie(t, uiLogin(t, s, readerTok))
	stream := uiStreamStart(t, s, ck, "/ui/api/watch?prefix="+p)
	keyStream := uiStreamStart(t, s, ck, "/ui/api/watch?key="+p+"doc")
	writes := []struct{ method, path, body string }{
		{"PUT", "doc", `{"value":{"secret":"` + secret + `","n":` + num + `}}`},
		{"PATCH", "doc", `{"set":{"other":"` + secret + `-patched"}}`},
		{"POST", "counter:increment", `{"by":` + num + `,"create":true}`},
		{"POST", "jobs:qpush", `{"data":{"job":"` + secret + `"}}`},
		{"POST", "members:sadd", `{"member":"` + secret + `"}`},
		{"POST", "log:rpush", `{"value":"` + secret + `"}`},
		{"POST", "lock:acquire", `{"holder":"` + secret + `-holder","ttlSeconds":600}`},
		{"POST", "pool:elect", `{"holder":"` + secret + `-leader","ttlSeconds":600}`},
	}
	for _, w := range writes {
		if r := s.do(w.method, "/v1/kv/"+p+w.path, acmeToken, w.body); r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", w.method, w.path, r.Status, r.Body)
		}
	}
	if r := s.do("POST", "/v1/txn", acmeToken, `{"ops":[{"op":"put","key":"`+p+`txn","value":"`+secret+`"},{"op":"put","key":"`+p+`doc","value":{"secret":"`+secret+`-txn"}}]}`); r.Status != http.StatusOK {
		t.Fatalf("txn: %d %s", r.Status, r.Body)
	}
	waitProjected(t, s)
	ctx := mustBrowser(t)
	uiBrowserLogin(t, ctx, s, readerTok)
	views := [][2]string{{"#/", `#projects-table tr[data-project="acme/secret"]`}, {"#/p/" + url.PathEscape(p), `#keys tr[data-key="` + p + `txn"]`}}
	for _, k := range []string{"doc", "counter", "jobs", "members", "log", "lock", "pool", "txn"} {
		views = append(views, [2]string{"#/k/" + url.PathEscape(p+k), `#history tr[data-version="1"]`})
	}
	fetched := map[string]bool{}
	for _, v := range views {
		uiGo(t, ctx, v[0], v[1])
		time.Sleep(400 * time.Millisecond) // the rows' reload after a watch event
		if html := fromBrowser(t, ctx, "html", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, secret) || strings.Contains(html, num) {
			t.Fatalf("the page of %s holds the secret", v[0])
		}
		for _, u := range fromBrowser(t, ctx, "fetched", chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map((e) => e.name)`)) {
			fetched[u] = true
		}
	}
	n := 0
	for u := range fetched {
		pu, err := url.Parse(u)
		if err != nil || !strings.HasPrefix(pu.Path, "/ui/") || strings.HasPrefix(pu.Path, "/ui/api/watch") {
			continue
		}
		st, _, b := uiGet(t, s, pu.RequestURI(), ck)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", pu.RequestURI(), st, b)
		}
		if strings.Contains(string(b), secret) || strings.Contains(string(b), num) {
			t.Fatalf("GET %s carries the secret: %s", pu.RequestURI(), b)
		}
		n++
	}
	t.Logf("%d answers the page fetched, none with the secret", n)
	if n < 10 {
		t.Fatalf("the page fetched %d answers under /ui/: want every view's", n)
	}
	for name, st := range map[string]*uiStreamReader{"prefix": stream, "key": keyStream} {
		got := st.until(t, 2)
		if strings.Contains(got, secret) || strings.Contains(got, num) {
			t.Fatalf("the %s stream carries the secret:\n%s", name, got)
		}
		if !strings.Contains(got, `"fingerprint":"`) {
			t.Fatalf("the %s stream carries no fingerprint:\n%s", name, got)
		}
	}
}

// uiStreamReader reads a console event stream in the background.
type uiStreamReader struct {
	mu     sync.Mutex
	buf    strings.Builder
	events int
}

// uiStreamStart opens a console event stream and reads it until the test
// ends, once it has started.
func uiStreamStart(t *testing.T, s *stack, ck *http.Cookie, path string) *uiStreamReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.url+path, nil)
	req.AddCookie(ck)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	r := &uiStreamReader{}
	started := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		b := make([]byte, 4096)
		once := sync.Once{}
		for {
			n, err := resp.Body.Read(b)
			r.mu.Lock()
			r.buf.Write(b[:n])
			r.events = strings.Count(r.buf.String(), "event: change")
			r.mu.Unlock()
			if n > 0 {
				once.Do(func() { close(started) })
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("GET %s: no comment that the watch started", path)
	}
	return r
}

// until waits for n events and returns all read so far.
func (r *uiStreamReader) until(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		got := r.events
		r.mu.Unlock()
		if got >= n {
			time.Sleep(300 * time.Millisecond)
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.buf.String()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the stream sent fewer than %d events", n)
	return ""
}

// TestUIConsoleAlerts: with the projector stopped, 1,100 writes to one
// project raise projector_lag for its partition: the health view shows
// the lag (end minus the projector's stored offset) and the alert's
// detail to an operator; a tenant's overview names the alert without
// detail.
func TestUIConsoleAlerts(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WithoutProjector())
	project := "tenant/acme/project/lag/"
	for from := 0; from < 1100; from += 100 {
		var ops []string
		for i := from; i < from+100; i++ {
			ops = append(ops, fmt.Sprintf(`{"op":"put","key":"%sk%05d","value":%d}`, project, i, i))
		}
		if r := s.do("POST", "/v1/txn", devToken, `{"ops":[`+strings.Join(ops, ",")+`]}`); r.Status != http.StatusOK {
			t.Fatalf("txn: %d %s", r.Status, r.Body)
		}
	}
	var h api.UIHealth
	uiJSON(t, s, "/ui/api/health", uiCookie(t, uiLogin(t, s, devToken)), &h)
	var lagged []string
	for _, a := range h.Alerts {
		if a.Name == api.AlertProjectorLag && a.Partition != nil {
			p := h.Partitions[*a.Partition]
			lagged = append(lagged, fmt.Sprintf("p%d lag %d: %s", p.Partition, *p.ProjectorLag, a.Message))
		}
	}
	if len(lagged) != 1 || h.MaxProjectorLag == nil || *h.MaxProjectorLag < 1100 {
		t.Fatalf("health alerts %+v, max projector lag %v: want one projector_lag of at least 1100 events", h.Alerts, h.MaxProjectorLag)
	}
	t.Log(lagged[0])
	var o api.UIOverview
	uiJSON(t, s, "/ui/api/overview", uiCookie(t, uiLogin(t, s, readerTok)), &o)
	if len(o.Alerts) != 1 || o.Alerts[0].Name != api.AlertProjectorLag || strings.Contains(o.Alerts[0].Message, strconv.FormatInt(*h.MaxProjectorLag, 10)) {
		t.Fatalf("a tenant's overview alerts %+v: want projector_lag without detail", o.Alerts)
	}
}

// uiJSON fetches path with the session and decodes it into v.
func uiJSON(t *testing.T, s *stack, path string, ck *http.Cookie, v any) {
	t.Helper()
	st, _, b := uiGet(t, s, path, ck)
	if st != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, st, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
