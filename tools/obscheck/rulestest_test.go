package obscheck

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	engine "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"go.yaml.in/yaml/v3"
)

const ruleTestsFile = "../../deploy/observability/alerts_test.yaml"

// ruleTests is promtool's rule unit test file (promtool test rules), the
// part of it these tests use; unknown fields are refused, so a test the
// runner would not understand fails rather than passes unread.
type ruleTests struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval model.Duration  `yaml:"evaluation_interval"`
	Tests              []ruleTestGroup `yaml:"tests"`
}

type ruleTestGroup struct {
	Name        string         `yaml:"name"`
	Interval    model.Duration `yaml:"interval"`
	InputSeries []struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	} `yaml:"input_series"`
	AlertRuleTests []struct {
		EvalTime  model.Duration `yaml:"eval_time"`
		Alertname string         `yaml:"alertname"`
		ExpAlerts []struct {
			ExpLabels      map[string]string `yaml:"exp_labels"`
			ExpAnnotations map[string]string `yaml:"exp_annotations"`
		} `yaml:"exp_alerts"`
	} `yaml:"alert_rule_test"`
}

// TestAlertRuleUnitTests runs deploy/observability/alerts_test.yaml, a
// promtool test rules file, as promtool does it: the input series in
// PromQL's expanding notation ("1x4 0x16"), the rules evaluated by the
// PromQL engine every evaluation_interval from time 0, an alert pending
// from the first evaluation its expression returns its labels and firing
// once that lasted its for:, and at each eval_time the firing alerts of
// a name compared with the expected ones, labels and expanded
// annotations. promtool's own runner (its rules manager and promqltest)
// would bring Prometheus's service discovery and cloud SDKs into the
// tools module; this is the same semantics with the engine, the series
// parser and the template expander. It shows, for instance, that
// EskvWriterDown is pending 4 minutes after a writer's up turns 0 and
// fires after 5.
func TestAlertRuleUnitTests(t *testing.T) {
	file := readRuleTests(t)
	var groups []rulefmt.RuleGroup
	for _, rf := range file.RuleFiles {
		rgs, errs := rulefmt.ParseFile(filepath.Join(filepath.Dir(ruleTestsFile), rf), false, model.LegacyValidation, promql, slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		groups = append(groups, rgs.Groups...)
	}
	every := time.Duration(file.EvaluationInterval)
	if every == 0 {
		every = time.Minute
	}
	eng := engine.NewEngine(engine.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, Parser: promql})
	t.Cleanup(func() { _ = eng.Close() })
	for _, tg := range file.Tests {
		t.Run(tg.Name, func(t *testing.T) {
			runRuleTest(t, eng, groups, every, tg)
		})
	}
}

func readRuleTests(t *testing.T) ruleTests {
	t.Helper()
	f, err := os.Open(ruleTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var file ruleTests
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("%s: %v", ruleTestsFile, err)
	}
	if len(file.Tests) == 0 || len(file.RuleFiles) == 0 {
		t.Fatalf("%s: no tests or no rule files", ruleTestsFile)
	}
	return file
}

func runRuleTest(t *testing.T, eng *engine.Engine, groups []rulefmt.RuleGroup, every time.Duration, tg ruleTestGroup) {
	t.Helper()
	db := loadSeries(t, tg)
	want := map[time.Duration]map[string][]string{} // eval time -> alert -> firing alerts
	var last time.Duration
	for _, at := range tg.AlertRuleTests {
		d := time.Duration(at.EvalTime)
		if want[d] == nil {
			want[d] = map[string][]string{}
		}
		exp := []string{}
		for _, a := range at.ExpAlerts {
			l := map[string]string{labels.AlertName: at.Alertname}
			for k, v := range a.ExpLabels {
				l[k] = v
			}
			exp = append(exp, alertString(labels.FromMap(l), labels.FromMap(a.ExpAnnotations)))
		}
		slices.Sort(exp)
		want[d][at.Alertname] = exp
		last = max(last, d)
	}
	active := map[string]map[uint64]time.Time{} // alert -> labels hash -> active since
	start := time.Unix(0, 0).UTC()
	for now := time.Duration(0); now <= last; now += every {
		ts := start.Add(now)
		firing := map[string][]string{}
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				firing[r.Alert] = append(firing[r.Alert], evalAlert(t, eng, db, r, ts, active)...)
			}
		}
		for at, byName := range want {
			// As promtool: an eval_time between two evaluations is
			// checked against the earlier one.
			if at < now || at >= now+every {
				continue
			}
			for name, exp := range byName {
				got := firing[name]
				slices.Sort(got)
				if !slices.Equal(got, exp) && len(got)+len(exp) > 0 {
					t.Errorf("%s at %s:\nwant %q\ngot  %q", name, at, exp, got)
				}
			}
		}
	}
}

// evalAlert evaluates rule r at ts and returns its firing alerts (labels
// and expanded annotations), keeping in active when each became pending.
func evalAlert(t *testing.T, eng *engine.Engine, db storage.Queryable, r rulefmt.Rule, ts time.Time, active map[string]map[uint64]time.Time) []string {
	t.Helper()
	ctx := context.Background()
	query := func(ctx context.Context, q string, ts time.Time) (engine.Vector, error) {
		qry, err := eng.NewInstantQuery(ctx, db, nil, q, ts)
		if err != nil {
			return nil, err
		}
		res := qry.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Vector()
	}
	vec, err := query(ctx, r.Expr, ts)
	if err != nil {
		t.Fatalf("alert %s at %s: %v", r.Alert, ts.UTC().Format(time.TimeOnly), err)
	}
	if active[r.Alert] == nil {
		active[r.Alert] = map[uint64]time.Time{}
	}
	seen := map[uint64]bool{}
	var out []string
	for _, s := range vec {
		// As Prometheus's AlertingRule.Eval: templates see the sample's
		// labels and value; the alert's labels are the sample's without
		// its name, the rule's, and alertname.
		data := template.AlertTemplateData(s.Metric.Map(), nil, "", s)
		expand := func(text string) string {
			defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
			res, err := template.NewTemplateExpander(ctx, defs+text, "__alert_"+r.Alert, data, model.TimeFromUnixNano(ts.UnixNano()),
				template.QueryFunc(query), &url.URL{}, nil).Expand()
			if err != nil {
				t.Fatalf("alert %s: template %q: %v", r.Alert, text, err)
			}
			return res
		}
		lb := labels.NewBuilder(s.Metric)
		lb.Del(model.MetricNameLabel)
		for k, v := range r.Labels {
			lb.Set(k, expand(v))
		}
		lb.Set(labels.AlertName, r.Alert)
		ls := lb.Labels()
		h := ls.Hash()
		seen[h] = true
		since, ok := active[r.Alert][h]
		if !ok {
			since = ts
			active[r.Alert][h] = ts
		}
		if ts.Sub(since) < time.Duration(r.For) {
			continue // pending
		}
		ann := map[string]string{}
		for k, v := range r.Annotations {
			ann[k] = expand(v)
		}
		out = append(out, alertString(ls, labels.FromMap(ann)))
	}
	for h := range active[r.Alert] {
		if !seen[h] {
			delete(active[r.Alert], h)
		}
	}
	return out
}

func alertString(l, a labels.Labels) string { return l.String() + " " + a.String() }

// loadSeries returns the test group's input series as a Queryable, one
// sample every interval from time 0 (PromQL's test notation: "1x4 0x16"
// is 1 five times then 0 seventeen times, "_" no sample).
func loadSeries(t *testing.T, tg ruleTestGroup) storage.Queryable {
	t.Helper()
	step := time.Duration(tg.Interval)
	if step == 0 {
		step = time.Minute
	}
	var all []storage.Series
	for _, in := range tg.InputSeries {
		ls, vals, err := promql.ParseSeriesDesc(in.Series + " " + in.Values)
		if err != nil {
			t.Fatalf("input series %s %s: %v", in.Series, in.Values, err)
		}
		var smpls []chunks.Sample
		for i, v := range vals {
			if !v.Omitted {
				smpls = append(smpls, fSample{t: int64(time.Duration(i) * step / time.Millisecond), f: v.Value})
			}
		}
		all = append(all, storage.NewListSeries(ls, smpls))
	}
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var sel []storage.Series
			for _, s := range all {
				if matchAll(s.Labels(), ms) {
					sel = append(sel, s)
				}
			}
			slices.SortFunc(sel, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return &seriesSet{series: sel, i: -1}
		},
	}}
}

func matchAll(ls labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesSet is a storage.SeriesSet over a sorted slice.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// fSample is a float sample (chunks.Sample).
type fSample struct {
	t int64
	f float64
}

func (s fSample) T() int64                      { return s.t }
func (s fSample) ST() int64                     { return 0 }
func (s fSample) F() float64                    { return s.f }
func (s fSample) H() *histogram.Histogram       { return nil }
func (s fSample) FH() *histogram.FloatHistogram { return nil }
func (s fSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fSample) Copy() chunks.Sample           { return s }
