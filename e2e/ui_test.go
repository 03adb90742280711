package e2e

import (
	"bufio"
	"context"
	"encoding/json"

	"io"
	"maps"
	"net/http"
	"net/url"

	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eskv/eskv/api"
)

// uiPrefix is the project the status page tests seed.
const uiPrefix = "tenant/acme/project/ui/"

// uiSeed writes the project the status page shows: a plain key whose
// value holds marker, a lock, a queue of three items and a set (one of
// whose members is marker), and two conflicts on the plain key.
func uiSeed(t *testing.T, s *stack, marker string) {
	t.Helper()
	ttl := int64(3600)
	writes := []struct {
		method, path string
		body         any
	}{
		{"PUT", uiPrefix + "checkpoint", map[string]any{"value": map[string]any{"step": 41, "secret": marker},
			"semantics": map[string]any{"purpose": "checkpoint"}, "ttlSeconds": ttl}},
		{"POST", uiPrefix + "jobs/lock:acquire", map[string]any{"holder": "worker-7", "ttlSeconds": 600}},
		{"POST", uiPrefix + "jobs/queue:qpush", map[string]any{"data": map[string]any{"job": marker}}},
		{"POST", uiPrefix + "jobs/queue:qpush", map[string]any{"data": map[string]any{"job": 2}}},
		{"POST", uiPrefix + "jobs/queue:qpush", map[string]any{"data": map[string]any{"job": 3}}},
		{"POST", uiPrefix + "members:sadd", map[string]any{"member": marker}},
		{"POST", uiPrefix + "members:sadd", map[string]any{"member": "bob"}},
	}
	for _, w := range writes {
		if r := s.do(w.method, "/v1/kv/"+w.path, acmeToken, w.body); r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", w.method, w.path, r.Status, r.Body)
		}
	}
	for range 2 {
		r := s.do("PUT", "/v1/kv/"+uiPrefix+"checkpoint", acmeToken, map[string]any{"value": 1, "expectedVersion": 99})
		if r.Status != http.StatusConflict {
			t.Fatalf("a stale expectedVersion answered %d %s, want 409", r.Status, r.Body)
		}
	}
	// The value is there to leak: the API answers it to a reader.
	if r := s.do("GET", "/v1/kv/"+uiPrefix+"checkpoint", readerTok, nil); !strings.Contains(string(r.Body), marker) {
		t.Fatalf("GET checkpoint: %d %s, want the marker", r.Status, r.Body)
	}
	waitProjected(t, s)
}

// noRedirects is an HTTP client that shows redirects instead of
// following them.
var noRedirects = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// uiLogin posts token to the login form and returns the answer.
func uiLogin(t *testing.T, s *stack, token string) *http.Response {
	t.Helper()
	resp, err := noRedirects.PostForm(s.url+"/ui/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// uiGet fetches path with the session cookie (none when ck is nil).
func uiGet(t *testing.T, s *stack, path string, ck *http.Cookie) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ck != nil {
		req.AddCookie(ck)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestUISessions: a token logs in to a cookie that is HttpOnly,
// SameSite=Strict and holds no token; a bad token is refused; without a
// cookie the page sends to the login form and its data answer 401; the
// cookie authenticates nothing of the API (no write, no read); a
// tampered cookie is refused; bad parameters are 4xx naming the field.
func TestUISessions(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	if r := uiLogin(t, s, "not-a-token-0123456789"); r.StatusCode != http.StatusUnauthorized || len(r.Cookies()) != 0 {
		t.Fatalf("a bad token: %d with cookies %v, want 401 and none", r.StatusCode, r.Cookies())
	}
	ck := uiCookie(t, uiLogin(t, s, readerTok))
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" || strings.Contains(ck.Value, readerTok) {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui, and no token", ck)
	}
	if st, h, _ := uiGet(t, s, "/ui/", nil); st != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Fatalf("GET /ui/ without a cookie: %d to %q, want 303 to /ui/login", st, h.Get("Location"))
	}
	wantCode(t, s, "/ui/api/keys?prefix="+uiPrefix, nil, http.StatusUnauthorized, "unauthenticated", "cookie")
	bad := *ck
	bad.Value = strings.ToUpper(bad.Value[:4]) + bad.Value[4:] + "A"
	wantCode(t, s, "/ui/api/me", &bad, http.StatusUnauthorized, "unauthenticated", "cookie")
	wantCode(t, s, "/ui/api/keys?prefix=tenant/acme/", ck, http.StatusBadRequest, "invalid", "prefix")
	wantCode(t, s, "/ui/api/keys?prefix=tenant/other/project/x/", ck, http.StatusForbidden, "forbidden", "prefix")
	wantCode(t, s, "/ui/api/keys?prefix="+uiPrefix+"&value=1", ck, http.StatusBadRequest, "invalid", "value")
	wantCode(t, s, "/ui/api/history?key=tenant/other/project/x/k", ck, http.StatusForbidden, "forbidden", "key")
	// The cookie is no credential of the API, even for the acme-svc
	// session that may write.
	wck := uiCookie(t, uiLogin(t, s, acmeToken))
	for _, m := range []string{"PUT", "GET"} {
		req, _ := http.NewRequest(m, s.url+"/v1/kv/"+uiPrefix+"x", strings.NewReader(`{"value":1}`))
		req.AddCookie(wck)
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s /v1/kv with only the session cookie: %d, want 401", m, resp.StatusCode)
		}
	}
	// A login posted from another origin is refused.
	req, _ := http.NewRequest("POST", s.url+"/ui/login", strings.NewReader("token="+readerTok))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("cross-origin login: %d, want 403 without a cookie", resp.StatusCode)
	}
}

// uiCookie is the session cookie a login answered.
func uiCookie(t *testing.T, r *http.Response) *http.Cookie {
	t.Helper()
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q, want 303 to /ui/", r.StatusCode, r.Header.Get("Location"))
	}
	for _, c := range r.Cookies() {
		if c.Name == "eskv_ui" {
			return c
		}
	}
	t.Fatalf("login set no session cookie: %v", r.Cookies())
	return nil
}

// wantCode checks that GET path answers status with the error code and
// field.
func wantCode(t *testing.T, s *stack, path string, ck *http.Cookie, status int, code, field string) {
	t.Helper()
	st, _, b := uiGet(t, s, path, ck)
	var e struct {
		Error struct{ Code, Field string }
	}
	_ = json.Unmarshal(b, &e)
	if st != status || e.Error.Code != code || e.Error.Field != field {
		t.Fatalf("GET %s: %d %s, want %d %s on %s", path, st, b, status, code, field)
	}
}

// TestUIStatusPageBrowser drives the console's project view in
// headless Chromium: the login form refuses a bad token and takes a good
// one, the overview lists the session's projects with their key counts,
// opening one shows its rows (purpose, version, writer, holder, sizes,
// fingerprint and TTL), a search by key prefix narrows them, a write
// appears live (watch), the conflict chart has its bars, the marker
// value written to the keys appears nowhere in the rendered page, and at
// 390 px wide nothing is cut off and the rows keep their writer, age,
// holder, size and fingerprint.
func TestUIStatusPageBrowser(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	marker := "ui-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	uiSeed(t, s, marker)
	ctx := mustBrowser(t)
	inBrowser(t, ctx, "log in with a bad token",
		chromedp.Navigate(s.url+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "not-a-token-0123456789"),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	if msg := fromBrowser(t, ctx, "login error", chromedp.Text(chromedp.ID("login-error"))); !strings.Contains(msg, "unknown or expired token") {
		t.Fatalf("the login form after a bad token says %q", msg)
	}
	project := chromedp.CSS(`#projects-table tr[data-project="acme/ui"] a`)
	inBrowser(t, ctx, "log in and see the overview",
		chromedp.SendKeys(chromedp.ID("token"), readerTok),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(project))
	label := fromBrowser(t, ctx, "overview", chromedp.Evaluate[string](`(() => {
		const tr = document.querySelector('#projects-table tr[data-project="acme/ui"]');
		return tr.querySelector("a").textContent + "|" + tr.querySelector(".keys").textContent;
	})()`))
	if label != "acme/ui|4" {
		t.Fatalf("the overview's row of the project says %q, want acme/ui and 4 keys", label)
	}
	inBrowser(t, ctx, "open the project",
		chromedp.Click(project),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key="`+uiPrefix+`members"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#conflicts-svg rect`)))
	rows := uiRows(t, ctx)
	want := map[string]string{
		"checkpoint": "checkpoint v1 writer=acme-svc holder= size= fp=yes ttl=yes",
		"jobs/lock":  "lock v1 writer=acme-svc holder=held by acme-svc #1 size= fp=no ttl=yes",
		"jobs/queue": "queue v3 writer=acme-svc holder= size=3 fp=no ttl=no",
		"members":    "set v2 writer=acme-svc holder= size=2 fp=no ttl=no",
	}
	if !maps.Equal(rows, want) {
		t.Errorf("rows %v, want %v", rows, want)
	}
	if next := fromBrowser(t, ctx, "pager", chromedp.Evaluate[bool](`document.getElementById("keys-next").disabled`)); !next {
		t.Errorf("one page of keys, and the next page's button is enabled")
	}
	total := fromBrowser(t, ctx, "chart", chromedp.AttributeValue(chromedp.ID("conflicts-svg"), "data-total"))
	if total.Value != "2" {
		t.Fatalf("conflict chart total %q, want 2", total.Value)
	}
	inBrowser(t, ctx, "search jobs/",
		chromedp.SendKeys(chromedp.ID("keys-search"), "jobs/"),
		chromedp.Click(chromedp.ID("keys-search-go")),
		chromedp.WaitNotPresent(chromedp.CSS(`#keys tr[data-key="`+uiPrefix+`members"]`)))
	if rows := uiRows(t, ctx); len(rows) != 2 || rows["jobs/lock"] != want["jobs/lock"] || rows["jobs/queue"] != want["jobs/queue"] {
		t.Errorf("rows under jobs/: %v, want jobs/lock and jobs/queue", rows)
	}
	inBrowser(t, ctx, "search all again", chromedp.Evaluate[chromedp.Void](`document.getElementById("keys-search").value = ""`),
		chromedp.Click(chromedp.ID("keys-search-go")),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key="`+uiPrefix+`members"]`)))
	// The watch has started once its stream is open: a write from now on
	// reaches the page.
	inBrowser(t, ctx, "watch open", chromedp.WaitVisible(chromedp.CSS(`#live-status[data-live="open"]`)))
	if r := s.do("PUT", "/v1/kv/"+uiPrefix+"later", acmeToken, map[string]any{"value": marker}); r.Status != http.StatusOK {
		t.Fatalf("PUT later: %d %s", r.Status, r.Body)
	}
	inBrowser(t, ctx, "see a write live",
		chromedp.WaitVisible(chromedp.CSS(`#feed li[data-key="`+uiPrefix+`later"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key="`+uiPrefix+`later"]`)))
	if html := fromBrowser(t, ctx, "page", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, marker) {
		t.Fatalf("the rendered page holds the marker value")
	}
	uiNarrow(t, ctx)
}

// uiNarrow shows the page 390 px wide (a phone) and checks that nothing
// sticks out on the right: neither the page,
// nor the keys table (whose rows become wrapping blocks there); and that
// the keys' writer, age, holder, size and fingerprint still show.
func uiNarrow(t *testing.T, ctx context.Context) {
	t.Helper()
	inBrowser(t, ctx, "390 px", chromedp.EmulateViewport(390, 844))
	wide := fromBrowser(t, ctx, "widths", chromedp.Evaluate[[]string](`(() => {
		const w = document.documentElement.clientWidth, out = [];
		if (document.documentElement.scrollWidth > w) out.push("page " + document.documentElement.scrollWidth);
		for (const e of document.querySelectorAll("#keys, #keys tr, #keys-search-form, .pager, #conflicts-chart svg")) {
			const r = e.getBoundingClientRect();
			if (r.right > w + 0.5) out.push((e.id || e.tagName) + " " + Math.round(r.right));
		}
		for (const c of ["writer", "age", "holder", "size", "fingerprint"]) {
			const td = [...document.querySelectorAll("#keys td." + c)].find((td) => td.textContent !== "");
			if (!td || !td.getClientRects().length) out.push("hidden " + c);
		}
		return out;
	})()`))
	if len(wide) != 0 {
		t.Fatalf("at 390 px these stick out: %v", wide)
	}
}

// uiRows reads the key table as "purpose vN writer=... holder=... size=
// fp=yes|no ttl=yes|no" by key (relative to the project).
func uiRows(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	return fromBrowser(t, ctx, "read rows", chromedp.Evaluate[map[string]string](`Object.fromEntries([...document.querySelectorAll("#keys tbody tr")].map(tr => {
		const c = (n) => tr.querySelector("td." + n).textContent;
		return [c("key"), c("purpose") + " v" + c("version") + " writer=" + c("writer") + " holder=" + c("holder") + " size=" + c("size") +
			" fp=" + (/^[0-9a-f]{16}$/.test(c("fingerprint")) ? "yes" : "no") + " ttl=" + (c("ttl") !== "∞" && c("ttl") !== "" ? "yes" : "no")];
	}))`))
}

// mustBrowser starts headless Chromium for the test (Debian chromium:
// scripts/ensure-chromium.sh installs it).
func mustBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed: run scripts/ensure-chromium.sh (%v)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// The first run starts the browser, which lives as long as its
	// context: no timeout on this one.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// inBrowser runs steps with a minute's patience, failing the test with what.
func inBrowser(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	fromBrowser(t, ctx, what, chromedp.Steps(steps...))
}

// fromBrowser runs a with a minute's patience and returns its value, failing the
// test with what.
func fromBrowser[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestUIServesNoValue fetches everything the status page serves
// (pages, assets, every JSON answer, the event stream while the marker is
// written again to a plain key, a set and a queue) with a session and
// finds the marker value in none of it.
func TestUIServesNoValue(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	marker := "ui-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	uiSeed(t, s, marker)
	ck := uiCookie(t, uiLogin(t, s, readerTok))
	paths := []string{"/ui/", "/ui/login", "/ui/assets/app.js", "/ui/assets/style.css", "/ui/api/me", "/ui/api/projects",
		"/ui/api/keys?prefix=" + uiPrefix, "/ui/api/conflicts?prefix=" + uiPrefix, "/ui/api/overview",
		"/ui/api/key?key=" + uiPrefix + "checkpoint", "/ui/api/key?key=" + uiPrefix + "jobs/queue", "/ui/api/key?key=" + uiPrefix + "members",
		"/ui/api/at?key=" + uiPrefix + "checkpoint&at=" + url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano))}
	for _, k := range []string{"checkpoint", "jobs/lock", "jobs/queue", "members"} {
		paths = append(paths, "/ui/api/history?key="+uiPrefix+k)
	}
	for _, p := range paths {
		st, _, b := uiGet(t, s, p, ck)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, st, b)
		}
		if strings.Contains(string(b), marker) {
			t.Fatalf("GET %s carries the marker value: %s", p, b)
		}
	}
	var keys api.UIKeys
	_, _, b := uiGet(t, s, "/ui/api/keys?prefix="+uiPrefix, ck)
	if err := json.Unmarshal(b, &keys); err != nil || len(keys.Keys) != 4 {
		t.Fatalf("keys: %s (%v), want 4 rows", b, err)
	}
	got := uiStream(t, s, ck, marker)
	if strings.Contains(got, marker) {
		t.Fatalf("the status page's event stream carries the marker value:\n%s", got)
	}
}

// uiStream reads the status page's event stream while the marker is
// written to a plain key, a set and a queue, until their three events
// arrive, and returns all it read.
func uiStream(t *testing.T, s *stack, ck *http.Cookie, marker string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/ui/api/watch?prefix="+uiPrefix, nil)
	req.AddCookie(ck)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var all strings.Builder
	line, err := br.ReadString('\n') // ": watching": the watch has started
	all.WriteString(line)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "checkpoint", `{"value":{"secret":"` + marker + `"}}`},
		{"POST", "members:sadd", `{"member":"` + marker + `-2"}`},
		{"POST", "jobs/queue:qpush", `{"data":"` + marker + `"}`},
	} {
		if r := s.do(w.method, "/v1/kv/"+uiPrefix+w.path, acmeToken, w.body); r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", w.method, w.path, r.Status, r.Body)
		}
	}
	for seen := 0; seen < 3; {
		line, err := br.ReadString('\n')
		all.WriteString(line)
		if err != nil {
			t.Fatalf("watch ended after %d events: %v\n%s", seen, err, all.String())
		}
		if strings.HasPrefix(line, "event: change") {
			seen++
		}
	}
	return all.String()
}
