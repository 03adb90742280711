package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// forwardKeys is the number of keys the forwarding tests write: spread
// over every partition (forwardKeysCover checks it).
const forwardKeys = 16

func forwardKey(i int) string { return fmt.Sprintf("tenant/fwd%d/project/p/k", i) }

func partitionOf(tb testing.TB, key string) int32 {
	tb.Helper()
	k, err := contract.ParseKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return changelog.Partition(k.Scope(), partitions)
}

// manifestWriters starts a projector and two writers configured as
// deploy/k8s and the Helm chart configure them: listening on every
// interface (ESKV_HTTP_ADDR=0.0.0.0:<port>) and advertising an address
// only that writer answers at (ESKV_ADVERTISE_URL, the pod IP there,
// 127.0.0.1:<port> here), each with a stable ESKV_WRITER_ID (the
// StatefulSet's pod name). advertise overrides a writer's advertise URL
// when it returns non-empty. It returns the writers and their URLs once
// every partition has an owner and both writers own some.
func manifestWriters(tb testing.TB, advertise func(i int, urls []string) string) (*writersStack, []*proc.Proc) {
	tb.Helper()
	ps := &writersStack{stack: &stack{tb: tb, broker: testenv.MustBroker(tb, partitions), pg: testenv.MustPostgresDB(tb)}}
	ps.store = projection.New(ps.pg.Pool)
	common := procEnv(ps.stack)
	startProc(tb, "projector", append(common, "ESKV_PROJECTOR_ADDR="+freeAddr(tb))...)
	ports, err := proc.FreePorts(2)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range ports {
		ps.urls = append(ps.urls, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	for i, p := range ports {
		adv := ps.urls[i]
		if a := advertise(i, ps.urls); a != "" {
			adv = a
		}
		ps.writers = append(ps.writers, startProc(tb, "writer", append(common,
			fmt.Sprintf("ESKV_HTTP_ADDR=0.0.0.0:%d", p), "ESKV_ADVERTISE_URL="+adv,
			"ESKV_DEV_TOKEN="+devToken, fmt.Sprintf("ESKV_WRITER_ID=eskv-writer-%d", i))...))
	}
	for _, u := range ps.urls {
		waitHTTP(tb, u+"/healthz", 60*time.Second)
	}
	testenv.WaitFor(tb, 60*time.Second, "every partition owned, by both writers", func() bool {
		owners, err := ps.store.Owners(context.Background())
		ids := map[string]bool{}
		for _, o := range owners {
			ids[o.ID] = true
		}
		return err == nil && len(owners) == partitions && len(ids) == 2
	})
	return ps, ps.writers
}

// devCall sends one request with the dev token and returns its status and
// body; a request that fails is status 0.
func devCall(method, url, body string) (int, string) {
	return devCallWith(http.DefaultClient, method, url, body)
}

// devCallWith is devCall through hc.
func devCallWith(hc *http.Client, method, url, body string) (int, string) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+devToken)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrapedMetric returns the value of an unlabelled metric on base/metrics.
func scrapedMetric(tb testing.TB, base, name string) float64 {
	tb.Helper()
	return scrapedMetricWith(tb, http.DefaultClient, base, name)
}

// scrapedMetricWith is scrapedMetric through hc.
func scrapedMetricWith(tb testing.TB, hc *http.Client, base, name string) float64 {
	tb.Helper()
	code, body := devCallWith(hc, "GET", base+"/metrics", "")
	if code != http.StatusOK {
		tb.Fatalf("GET %s/metrics: %d", base, code)
	}
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return f
		}
	}
	tb.Fatalf("%s/metrics has no %s", base, name)
	return 0
}

// TestTwoWritersForwardWithManifestSettings: two writers started as the
// manifests start them (sharing ESKV_PEER_SECRET) answer every key (16
// keys over all 4 partitions) from either writer, the one that does not
// own a key forwarding to the one that does: no 503 on a settled cluster,
// no forward loop counted, both ready; then clients' requests carrying
// Eskv-Forwarded-By (the writer's own URL, the other's, a forged proof)
// are answered as any client's and leave both writers ready; and a stale
// owner record (another writer's, at an older epoch) is put right by the
// owner within seconds. Issue 15's
// reproduction (ESKV_HTTP_ADDR=0.0.0.0 without an
// advertise URL) answered 503 for every key of the other writer's
// partitions, on every round.
func TestTwoWritersForwardWithManifestSettings(t *testing.T) {
	t.Parallel()
	ps, _ := manifestWriters(t, func(int, []string) string { return "" })
	covered := map[int32]bool{}
	for i := range forwardKeys {
		covered[partitionOf(t, forwardKey(i))] = true
	}
	if len(covered) != partitions {
		t.Fatalf("the keys cover partitions %v, want all %d", covered, partitions)
	}
	// Each key written through each writer in turn (the first answers may
	// meet the group still settling: wait for each, then check strictly).
	for i := range forwardKeys {
		for w, u := range ps.urls {
			testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("PUT %s through writer %d", forwardKey(i), w), func() bool {
				code, _ := devCall("PUT", u+"/v1/kv/"+forwardKey(i), fmt.Sprintf(`{"value":%d}`, w))
				return code == http.StatusOK
			})
		}
	}
	for round := range 3 {
		for i := range forwardKeys {
			for w, u := range ps.urls {
				code, body := devCall("GET", u+"/v1/kv/"+forwardKey(i), "")
				var e contract.Entry
				if code != http.StatusOK || json.Unmarshal([]byte(body), &e) != nil || e.Version != 2 || string(e.Value) != "1" {
					t.Fatalf("round %d: GET %s (partition %d) through writer %d: %d %s; want version 2, value 1",
						round, forwardKey(i), partitionOf(t, forwardKey(i)), w, code, body)
				}
			}
		}
	}
	for w, u := range ps.urls {
		if n := scrapedMetric(t, u, "eskv_writer_forward_loops_total"); n != 0 {
			t.Errorf("writer %d counted %v forward loops, want 0", w, n)
		}
		if code, body := devCall("GET", u+"/readyz", ""); code != http.StatusOK {
			t.Errorf("writer %d /readyz: %d %s", w, code, body)
		}
	}

	// A client's Eskv-Forwarded-By proves nothing (issue 28: one naming
	// the writer's own URL made it record a forward loop, answer 503 for
	// the partition and fail /readyz; two such requests took both writers
	// out of service). Each writer gets, for a key the other owns, a
	// request naming its own URL, then the other's: both are forwarded as
	// any client's, and nothing changes for later requests or readiness.
	owners, err := ps.store.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for w, u := range ps.urls {
		key := ""
		for i := range forwardKeys {
			if owners[partitionOf(t, forwardKey(i))].ID != fmt.Sprintf("eskv-writer-%d", w) {
				key = forwardKey(i)
				break
			}
		}
		for _, by := range []string{u, ps.urls[1-w], u + " 1 x"} {
			if code, body := clientForwardedBy(t, u+"/v1/kv/"+key, by); code != http.StatusOK {
				t.Errorf("GET %s through writer %d with %s: %q: %d %s; want 200 (a client's header proves nothing)", key, w, api.ForwardedHeader, by, code, body)
			}
		}
	}
	for w, u := range ps.urls {
		if code, body := devCall("GET", u+"/readyz", ""); code != http.StatusOK {
			t.Errorf("writer %d /readyz after clients' %s headers: %d %s; want 200", w, api.ForwardedHeader, code, body)
		}
		if n := scrapedMetric(t, u, "eskv_writer_forward_loops_total"); n != 0 {
			t.Errorf("writer %d counted %v forward loops after clients' headers, want 0", w, n)
		}
		for i := range forwardKeys {
			if code, body := devCall("GET", u+"/v1/kv/"+forwardKey(i), ""); code != http.StatusOK {
				t.Errorf("GET %s through writer %d afterwards: %d %s", forwardKey(i), w, code, body)
			}
		}
	}

	// A stale record: writer 0's claim to one of writer 1's partitions,
	// at an older epoch, written last (as a writer that fenced the
	// partition, stalled and lost it writes its record once it runs
	// again). Writer 0 then answers the partition's keys 503 (it does not
	// own it; the record says it does); the owner records itself again
	// within seconds, and both writers answer. Before, the record stayed
	// until the partition moved again (chaos: 503 through every writer
	// for 30 s after the faults healed).
	owners, err = ps.store.Owners(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key := ""
	for i := range forwardKeys {
		if owners[partitionOf(t, forwardKey(i))].ID == "eskv-writer-1" {
			key = forwardKey(i)
			break
		}
	}
	if key == "" {
		t.Fatalf("writer 1 owns none of the keys' partitions: %+v", owners)
	}
	part := partitionOf(t, key)
	if _, err := ps.pg.Pool.Exec(context.Background(), `UPDATE writer_owners SET owner = 'eskv-writer-0', addr = $2, epoch = epoch - 1 WHERE partition = $1`,
		part, ps.urls[0]); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "writer 1 recording its partition again", func() bool {
		owners, err := ps.store.Owners(context.Background())
		return err == nil && owners[part].ID == "eskv-writer-1"
	})
	testenv.WaitFor(t, 5*time.Second, "writer 0 forwarding the partition's key again", func() bool {
		code, _ := devCall("GET", ps.urls[0]+"/v1/kv/"+key, "")
		return code == http.StatusOK
	})
}

// clientForwardedBy is a client's GET of url with the dev token and
// Eskv-Forwarded-By: by.
func clientForwardedBy(t *testing.T, url, by string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+devToken)
	req.Header.Set(api.ForwardedHeader, by)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestForwardLoopIsLoud: writer 1 advertises writer 0's URL (a
// misconfiguration). writer_owners then sends writer 1's partitions to
// writer 0, which does not own them, and writer 1 sees writer 0's
// partitions owned at its own advertise URL: each writer answers the
// other's keys 503 forward_loop at once (no request bounces between the
// two), counts each in eskv_writer_forward_loops_total, logs each looping
// partition once however many requests hit it, and answers /readyz 503
// forward_loop (so Kubernetes takes it out of the Service and the operator
// is paged) until the ownership changes: once writer 1 stops and writer 0
// owns every partition, writer 0 logs the loops cleared and is ready.
func TestForwardLoopIsLoud(t *testing.T) {
	t.Parallel()
	ps, writers := manifestWriters(t, func(i int, urls []string) string {
		if i == 1 {
			return urls[0]
		}
		return ""
	})
	const rounds = 5
	looped := []map[int32]bool{{}, {}} // per writer, the partitions it must see loop
	for i := range forwardKeys {
		p := partitionOf(t, forwardKey(i))
		// The writer that does not own the key, by writer_owners as it is
		// now (the group may still be settling), must answer forward_loop
		// once it has read the table (every second).
		var other int
		var u string
		testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("the writer not owning partition %d to answer forward_loop", p), func() bool {
			owners, err := ps.store.Owners(context.Background())
			if err != nil {
				return false
			}
			other = 0
			if owners[p].ID == "eskv-writer-0" {
				other = 1
			}
			u = ps.urls[other] + "/v1/kv/" + forwardKey(i)
			_, body := devCall("GET", u, "")
			return strings.Contains(body, `"code":"forward_loop"`)
		})
		looped[other][p] = true
		for range rounds {
			if code, body := devCall("GET", u, ""); code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"forward_loop"`) {
				t.Fatalf("GET %s (partition %d) through writer %d: %d %s; want 503 forward_loop", forwardKey(i), p, other, code, body)
			}
		}
	}
	for w, parts := range looped {
		if len(parts) == 0 {
			t.Fatalf("writer %d owns none of the keys' partitions", 1-w)
		}
		if n := scrapedMetric(t, ps.urls[w], "eskv_writer_forward_loops_total"); n < float64(rounds*len(parts)) {
			t.Errorf("writer %d: eskv_writer_forward_loops_total = %v, want at least %d", w, n, rounds*len(parts))
		}
		if code, body := devCall("GET", ps.urls[w]+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "forward_loop") {
			t.Errorf("writer %d /readyz: %d %s; want 503 forward_loop", w, code, body)
		}
		logs := readLog(writers[w].Log)
		for p := range parts {
			if n := strings.Count(logs, fmt.Sprintf(`"msg":"%s","service":"writer","partition":%d,`, loopMsg, p)); n != 1 {
				t.Errorf("writer %d, partition %d: %d forward loop log lines after more than %d requests, want 1", w, p, n, rounds)
			}
		}
	}
	writers[1].Stop(stopGrace)
	testenv.WaitFor(t, 60*time.Second, "writer 0 ready once it owns every partition", func() bool {
		code, _ := devCall("GET", ps.urls[0]+"/readyz", "")
		return code == http.StatusOK
	})
	for p := range looped[0] {
		if !strings.Contains(readLog(writers[0].Log), fmt.Sprintf(`"msg":"forward loop cleared: the partition has another owner","service":"writer","partition":%d,`, p)) {
			t.Errorf("partition %d: no 'forward loop cleared' line in writer 0's log", p)
		}
	}
}

// loopMsg is the writer's log message for a partition that starts looping.
const loopMsg = "forward loop: requests for this partition would be forwarded back to this writer; " +
	"answering 503 forward_loop and not ready until writer_owners names another owner. " +
	"Check every writer's ESKV_ADVERTISE_URL: each must be an address only that writer answers at"

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
