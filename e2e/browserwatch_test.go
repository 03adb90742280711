package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eskv/eskv/api"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// docsJS returns the first ```js block of the documentation page path
// (relative to the repository).
func docsJS(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../" + path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n```js\n")
	block, _, closed := strings.Cut(rest, "\n```\n")
	if !ok || !closed {
		t.Fatalf("%s has no ```js block", path)
	}
	return block
}

// jsString is s as a JavaScript string literal.
func jsString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBrowserWatch runs docs/watch.md's watchPrefix in headless Chromium
// on a page served from another origin than the writer's, which
// ESKV_CORS_ALLOWED_ORIGINS allows: fetch() sends the bearer token
// (after the preflight the writer answers without one) and reads the
// stream; three keys written after the watch opened arrive in order. The
// same page on an origin not allowed is refused by the browser.
func TestBrowserWatch(t *testing.T) {
	t.Parallel()
	var page string // set before the browser asks for it
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(pages.Close)
	other := httptest.NewServer(pages.Config.Handler) // the same page, on an origin not allowed
	t.Cleanup(other.Close)
	s := mustStack(t, inproc.API(api.Config{CORSAllowedOrigins: []string{pages.URL}}))

	const prefix = "tenant/acme/project/browser/"
	page = `<!doctype html><meta charset="utf-8"><title>watch</title><script>
` + docsJS(t, "docs/watch.md") + `
window.received = [];
window.state = "starting";
watchPrefix(` + jsString(t, s.url) + `, ` + jsString(t, readerTok) + `, ` + jsString(t, prefix) + `, {
  onOpen: () => { window.state = "open"; },
  onChange: (ev) => { window.received.push(ev.key + "@" + ev.version); },
}).then((c) => { window.state = "ended " + c; }, (e) => { window.state = "failed " + e; });
</script>`

	ctx := mustBrowser(t)
	inBrowser(t, ctx, "open the page", chromedp.Navigate(pages.URL))
	state := fromBrowser(t, ctx, "the watch opens", chromedp.Poll[string](`window.state !== "starting" && window.state`, chromedp.WithPollingTimeout(time.Minute)))
	if state != "open" {
		t.Fatalf("the page's watch: %s, want open", state)
	}
	want := []string{prefix + "a@1", prefix + "b@1", prefix + "c@1"}
	for _, k := range []string{"a", "b", "c"} {
		if r := s.do("PUT", "/v1/kv/"+prefix+k, acmeToken, `{"value":"`+k+`"}`); r.Status != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", k, r.Status, r.Body)
		}
	}
	fromBrowser(t, ctx, "three changes received", chromedp.Poll[bool](`window.received.length >= 3`, chromedp.WithPollingTimeout(time.Minute)))
	got := fromBrowser(t, ctx, "the changes", chromedp.Evaluate[[]string](`window.received`))
	if !slices.Equal(got, want) {
		t.Fatalf("the page received %v, want %v in order", got, want)
	}

	inBrowser(t, ctx, "open the page on another origin", chromedp.Navigate(other.URL))
	state = fromBrowser(t, ctx, "the watch fails", chromedp.Poll[string](`window.state !== "starting" && window.state`, chromedp.WithPollingTimeout(time.Minute)))
	if !strings.HasPrefix(state, "failed TypeError") {
		t.Fatalf("the page on %s (not allowed): %s, want failed with the browser's TypeError", other.URL, state)
	}
}
