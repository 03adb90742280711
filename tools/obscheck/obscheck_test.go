package obscheck

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/watch"
	"github.com/eskv/eskv/writer"
)

const (
	rulesFile      = "../../deploy/observability/alerts.yaml"
	chartRulesFile = "../../deploy/helm/eskv/files/alerts.yaml"
	dashboardFile  = "../../deploy/observability/eskv-dashboard.json"
	runbooksFile   = "../../docs/operations.md"
	// runbookBase is where every rule's runbook_url points, followed by
	// the anchor of its section.
	runbookBase = "https://github.com/eskv/eskv/blob/main/docs/operations.md#"
)

// scrapeMetrics are the series Prometheus writes itself for every
// target, which no component registers.
var scrapeMetrics = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"}

// promql parses expressions as Prometheus does by default.
var promql = parser.NewParser(parser.Options{})

// TestAlertRules is promtool check rules on the alert rules: the file
// parses with unknown fields refused, every expression and template is
// valid (rulefmt's validation), and no two rules share a name and labels
// (promtool's duplicate lint). Each alert also has a severity and a
// summary, which the runbooks and routing rely on.
func TestAlertRules(t *testing.T) {
	rgs, errs := rulefmt.ParseFile(rulesFile, false, model.LegacyValidation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if rgs == nil || len(rgs.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	seen := map[string]bool{}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			id := r.Alert + r.Record + labels.FromMap(r.Labels).String()
			if seen[id] {
				t.Errorf("group %s: duplicate rule %s", g.Name, id)
			}
			seen[id] = true
			if r.Alert != "" && (r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "") {
				t.Errorf("alert %s: needs a severity label, a summary and a description", r.Alert)
			}
		}
	}
}

// TestQueriedMetricsExist: every metric named by an alert expression or a
// dashboard query is registered by a component (writer, API, watch hub,
// projector, auditor, the shared registry, the pgx pool collector, a
// Kafka client's kprom metrics), so no alert silently watches a metric
// that was renamed; a regular expression on __name__ must match one.
func TestQueriedMetricsExist(t *testing.T) {
	known := append(registeredNames(t), scrapeMetrics...)
	exprs := map[string]string{} // expression -> where
	rgs, errs := rulefmt.ParseFile(rulesFile, false, model.LegacyValidation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			exprs[r.Expr] = "alert " + r.Alert
		}
	}
	for title, e := range dashboardExprs(t) {
		exprs[e] = "panel " + title
	}
	for e, where := range exprs {
		// Grafana's variables are not PromQL: give them values.
		e = strings.NewReplacer("$__rate_interval", "5m", "$job", ".*").Replace(e)
		ast, err := promql.ParseExpr(e)
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, e)
			continue
		}
		parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			for _, m := range vs.LabelMatchers {
				if m.Name != model.MetricNameLabel {
					continue
				}
				if !slices.ContainsFunc(known, m.Matches) {
					t.Errorf("%s queries %s, which no component exports", where, m)
				}
			}
			return nil
		})
	}
}

// TestRunbooks: every rule has a runbook_url pointing at a section of
// docs/operations.md, whose heading's anchor (as GitHub makes it) exists.
func TestRunbooks(t *testing.T) {
	b, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			anchors[githubAnchor(strings.TrimLeft(h, "#"))] = true
		}
	}
	rgs, errs := rulefmt.ParseFile(rulesFile, false, model.LegacyValidation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			u := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(u, runbookBase)
			switch {
			case u == "":
				t.Errorf("%s: no runbook_url annotation", name)
			case !ok:
				t.Errorf("%s: runbook_url %s is not under %s", name, u, runbookBase)
			case !anchors[anchor]:
				t.Errorf("%s: runbook_url %s: %s has no heading with anchor #%s", name, u, runbooksFile, anchor)
			}
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading: lower
// case, spaces to hyphens, punctuation other than hyphens and
// underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestChartRulesAreTheRules: the Helm chart's PrometheusRule renders
// deploy/helm/eskv/files/alerts.yaml (Helm reads only files inside the
// chart), which must be this pack's alerts.yaml byte for byte:
// scripts/render-k8s.sh copies it.
func TestChartRulesAreTheRules(t *testing.T) {
	want, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s: run bash scripts/render-k8s.sh", chartRulesFile, rulesFile)
	}
}

// dashboardExprs returns the query of every panel target of the
// dashboard, by panel title; the dashboard must be JSON Grafana imports.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no title, uid or panels", dashboardFile)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			out[p.Title+"#"+string(rune('A'+i))] = tg.Expr
		}
	}
	return out
}

// recorder is a Registerer that keeps what is registered, so the names of
// vectors without series yet are known too.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// fqName reads a metric's name from its Desc: client_golang does not
// export it, but prints it.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// registeredNames builds each component on one registry, as the commands
// do (nothing runs: building registers the metrics), and returns every
// metric name a scrape can show, histogram and summary series included.
func registeredNames(t *testing.T) []string {
	t.Helper()
	b := testenv.MustBroker(t, 2)
	rec := &recorder{Registry: service.NewRegistry()}
	log := slog.New(slog.DiscardHandler)
	pool := testenv.MustPostgres(t)
	store := projection.New(pool)
	rec.MustRegister(service.NewPoolCollector(pool, "projection"))
	w, err := writer.New(writer.Config{Brokers: b.Addrs, Topics: b.Topics}, store, log, rec)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := watch.New(watch.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: b.Topics.Partitions}, store, log, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken("obscheck-token-0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.New(api.Config{Tokens: tokens, Gatherer: rec, Registerer: rec, Watch: hub}, w, store, log); err != nil {
		t.Fatal(err)
	}
	if _, err := projector.New(projector.Config{Brokers: b.Addrs, Partitions: b.Topics.Partitions}, store, log, rec); err != nil {
		t.Fatal(err)
	}
	keys, err := audit.NewKeyring(audit.InsecureDevKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.New(audit.Config{Brokers: b.Addrs, Topics: b.Topics}, nil, keys, log, rec); err != nil {
		t.Fatal(err)
	}
	// A Kafka client registers its kprom metrics when it is created.
	cl, err := kafkaconf.Conn{Metrics: rec}.NewClient("projector", b.Addrs)
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	return names(t, rec)
}

// names returns the names of the recorded collectors' metrics and of the
// gathered families, each with the suffixes of histogram and summary
// series.
func names(t *testing.T, rec *recorder) []string {
	t.Helper()
	var out []string
	add := func(n string) { out = append(out, n, n+"_bucket", n+"_sum", n+"_count") }
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range rec.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			add(m[1])
		}
	}
	mfs, err := rec.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		add(mf.GetName())
	}
	if !slices.Contains(out, "eskv_build_info") || !slices.Contains(out, "eskv_projector_offset_lag") || len(out) < 100 {
		t.Fatalf("%d metric names known: the components did not register", len(out))
	}
	return out
}
