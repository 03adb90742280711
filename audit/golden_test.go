package audit

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// goldenEvents is a chain of events that covers every branch of a row's
// hashes: 18a's values, member order and exact numbers, a value without a
// canonical form, escapes, a transaction, an expiry, the elements of a
// set, a list and a queue, a key outside tenant/project, and (scheme 1's
// slow path) a version beyond 2^53.
func goldenEvents() []*contract.Event {
	ev := func(v int64, before, after string) *contract.Event { return testEvent(v, before, after) }
	var es []*contract.Event
	e := ev(1, ``, `{"client":7,"seq":123}`)
	e.Key, e.Scope, e.Op = "tenant/bench/project/p3/kv/c7", "tenant/bench/project/p3", contract.OpCreate
	es = append(es, e)
	e = ev(2, `{"client":7,"seq":123}`, `{"client":7,"seq":124}`)
	e.Key, e.Scope = "tenant/bench/project/p3/kv/c7", "tenant/bench/project/p3"
	es = append(es, e)
	es = append(es, ev(3, `null`, ` { "b": [1.0, 2e1], "a": "x", "\u00e9": "\u00e9", "\ud83d\ude00": 1, "\uffff": 2, "": {"z": null, "y": [true, false]} } `))
	e = ev(4, `{"n":9007199254740993,"m":-0,"s":1e-400,"t":[1E+2,-12.50,0.000001,1e21,123.456e-30]}`, ``)
	e.Kind, e.Op = contract.KindDelete, contract.OpDelete
	es = append(es, e)
	es = append(es, ev(5, ``, `{"a":1,"a":2}`))
	e = ev(6, `{"a":1,"a":2}`, `"\"\\\/\b\f\n\r\t\u0001\u001f\ud800 <&> \u2028"`)
	exp := time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC)
	e.TxnID, e.TxnSize, e.ExpiresAt, e.Semantics.TTLSeconds, e.Semantics.ConsumerHints = "t-9", 3, &exp, 3600, nil
	e.SpecRef, e.Principal, e.RequestID = "adr\"\\\n\x01é😀\xff", "bob <&>", "r-\u2028"
	es = append(es, e)
	e = ev(7, `{"x":1}`, `{"x":1}`)
	e.Op, e.Element = contract.OpSAdd, &contract.Element{Op: contract.ElementAdd, Member: "blue <&> \"\u2028"}
	es = append(es, e)
	e = ev(8, `{"x":1}`, `{"x":1}`)
	e.Op, e.Element = contract.OpRPop, &contract.Element{Op: contract.ElementRemove, Member: "00000000000000000007", Value: json.RawMessage(`[1,{"z":null,"y":true}]`)}
	es = append(es, e)
	e = ev(9, `{"x":1}`, `{"x":2}`)
	e.Op, e.Element = contract.OpQPush, &contract.Element{Op: contract.ElementAdd, Member: "q1", State: "ready", Value: json.RawMessage(`{"job":42}`)}
	es = append(es, e)
	e = ev(10, `1`, `2`)
	e.Key, e.Scope = "other/key", ""
	es = append(es, e)
	e = ev(1<<53+1, `1`, `2`)
	e.Key = "tenant/acme/project/demo"
	es = append(es, e)
	return es
}

func goldenConflicts() []*decide.Conflict {
	ts := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
	op := 1
	return []*decide.Conflict{
		{ID: "c-1", Key: "tenant/bench/project/p3/kv/c7", Op: contract.OpCAS, ExpectedVersion: 2, CurrentVersion: 3,
			Attempted: json.RawMessage(`{"client":7,"seq":124}`), Current: json.RawMessage(`{"seq":125,"client":7}`),
			Principal: "alice", TS: ts, Reason: "version_mismatch", TxnID: "t-1", TxnOp: &op, TxnSize: 2},
		{ID: "c-2", Key: "tenant/acme/project/demo/x", Op: contract.OpPut, ExpectedVersion: -1,
			Attempted: json.RawMessage(`null`), Current: json.RawMessage(`null`), Principal: "mallory", TS: ts, Reason: decide.ReasonForbidden},
		{ID: "c-3", Key: "tenant/acme/project/demo/y", Op: contract.OpPut, Attempted: json.RawMessage(`{"a":1,"a":2}`), TS: ts, Reason: "version_mismatch"},
	}
}

// goldenRows: the rows of goldenEvents, chained in order, and of
// goldenConflicts, in both schemes. They were computed before the hashing
// was optimized (issue 16) and pin every byte: the trail written before
// and after must verify alike.
var goldenRows = map[Scheme][]string{
	Scheme1: {
		"bench|p3|884ed757342dea179553ab752b618ea3727be91a8b5bc775d5b51aa17ed291c0|6f300315998724507005099b50ffb7d7646c93acb6302631647345b9d5ba7c8a||||bca7f10237958e989f577bec3329fd578d833e7d21cb3565454f8fe38f1a43e0",
		"bench|p3|6f300315998724507005099b50ffb7d7646c93acb6302631647345b9d5ba7c8a|774bb4e6c326eda1feccc9628548736a799f459bd400f98c60663647a5adc950|||bca7f10237958e989f577bec3329fd578d833e7d21cb3565454f8fe38f1a43e0|5cbf7e73196871699fcad4b6346fa178b51fda3aecc8e220c8ab12fdc494d57d",
		"acme|demo|884ed757342dea179553ab752b618ea3727be91a8b5bc775d5b51aa17ed291c0|4548819a7c6c37b5b24824b12152a514a846863c94814e0c5964fa8a206aa119|||5cbf7e73196871699fcad4b6346fa178b51fda3aecc8e220c8ab12fdc494d57d|d3c484f798de172ed3e90ec3d0be556bb1a2e7d960c124e57c6ef903d3fd3d37",
		"acme|demo|005a12c9d64d83307a873a5cec61f2036b8513c35183b19d6e5ab84d7a6556d7|884ed757342dea179553ab752b618ea3727be91a8b5bc775d5b51aa17ed291c0|||d3c484f798de172ed3e90ec3d0be556bb1a2e7d960c124e57c6ef903d3fd3d37|93e5bd221554193f491f3b82eecac42c621aee679f2623ae77fbea485fb37b14",
		"acme|demo|884ed757342dea179553ab752b618ea3727be91a8b5bc775d5b51aa17ed291c0|2fbfd5402612d93c3fd5f28d60b7fcfeaf9faded37d78a2e20689b3d2a79770b|||93e5bd221554193f491f3b82eecac42c621aee679f2623ae77fbea485fb37b14|3cebaa937e5d28ceed46c81dff91fe09d3a1f0602ca23f682b6912aa59f45688",
		"acme|demo|2fbfd5402612d93c3fd5f28d60b7fcfeaf9faded37d78a2e20689b3d2a79770b|c37e957c1971e4aebe70e18116e528f066fa34f5acb1aba41a0b34dbfcd9656d|||3cebaa937e5d28ceed46c81dff91fe09d3a1f0602ca23f682b6912aa59f45688|dd6d8f2d05c950ea1d2e6eac105320dbefd88a3edae266ed0c4d06bcc51b746f",
		"acme|demo|965310886be11ca2e77f7a99beda0ea2ee7855f6e4604bf1ea6c60105071e855|965310886be11ca2e77f7a99beda0ea2ee7855f6e4604bf1ea6c60105071e855|add|300900d10e867a0caf6d44e2cd6c084bb5aa836decf7b31f2b92505b3ef90be9|dd6d8f2d05c950ea1d2e6eac105320dbefd88a3edae266ed0c4d06bcc51b746f|c5a7e701d5aab3b6882c2883c572509b3e2318c1da53c21e183f75d46f0c62da",
		"acme|demo|965310886be11ca2e77f7a99beda0ea2ee7855f6e4604bf1ea6c60105071e855|965310886be11ca2e77f7a99beda0ea2ee7855f6e4604bf1ea6c60105071e855|remove|70e22f199d93181a23f215abb33acd1ae85c25c62f70a90fc8253a92ebc077fd|c5a7e701d5aab3b6882c2883c572509b3e2318c1da53c21e183f75d46f0c62da|1f898e9536f1daa75d41ec40d29e89b61a2f49c20a8c0be7a922b3b6d9795167",
		"acme|demo|965310886be11ca2e77f7a99beda0ea2ee7855f6e4604bf1ea6c60105071e855|5562d60045f2916982be212a32b09b1a8f0620b322ce89500aa631031c58485b|ready|71fc6cb65773b404238efc363d9758f11346c1d4f39b6305d8488ba3f46eb8fb|1f898e9536f1daa75d41ec40d29e89b61a2f49c20a8c0be7a922b3b6d9795167|692d4bcebcb125c30d851646f11c6d407fe8e4608456158a4aee6c575350dee9",
		"||7761b1cc25227dfca0bd6d972acc52abb62f24ce50ad5a7a430b05c5a6f5497b|80ddc33417b469e126d6fdd676dad740a8e89b94199378bb19030b1fdb325b58|||692d4bcebcb125c30d851646f11c6d407fe8e4608456158a4aee6c575350dee9|4df6eff5f43ba27c8d628cbc1e3fe001e50f9cac5cd409b97c7139fc4b3d0fb0",
		"acme|demo|7761b1cc25227dfca0bd6d972acc52abb62f24ce50ad5a7a430b05c5a6f5497b|80ddc33417b469e126d6fdd676dad740a8e89b94199378bb19030b1fdb325b58|||4df6eff5f43ba27c8d628cbc1e3fe001e50f9cac5cd409b97c7139fc4b3d0fb0|1365bf19b311f52053ba063dbaab0860d44941705a689f87c28ffe0d9019bc36",
		"bench|p3|774bb4e6c326eda1feccc9628548736a799f459bd400f98c60663647a5adc950|3cdab6ee43402d69fb2cc63287737a9ae04e555e17d25b773c9748c0f8d8ea02|1",
		"acme|demo|||-1",
		"acme|demo|2fbfd5402612d93c3fd5f28d60b7fcfeaf9faded37d78a2e20689b3d2a79770b|884ed757342dea179553ab752b618ea3727be91a8b5bc775d5b51aa17ed291c0|-1",
	},
	Scheme2: {
		"bench|p3|c55d787aca01572afcd83749b7c1540e99cec2d9bdfe241326fa98eb6a528f66|1e82bd574972e9f2fb272acaae2d139b3d4da5d11cc7c2d73b8b7ecd18085e34||||fde4d020308f8dc5ee4e5529e2cf2cff40335243f95a051e4a22aa0d4304a01c",
		"bench|p3|1e82bd574972e9f2fb272acaae2d139b3d4da5d11cc7c2d73b8b7ecd18085e34|83dcfa59dd85d40c9db7da86bb365960aae3fe4d6fc43b3128d4b02d13713484|||fde4d020308f8dc5ee4e5529e2cf2cff40335243f95a051e4a22aa0d4304a01c|b0e2cececc9c9b10d7d06d8ddff207e1d45dcd3997bcb8aa3084f3c5ac88f3e5",
		"acme|demo|581f2a2595191664c5c74ea954958b6a41181cc4ec1bce5752ec54ffa91088b1|752570724ddf154628292a5f86d8b0bacf1cd3984430b46287af0d2df3a83861|||b0e2cececc9c9b10d7d06d8ddff207e1d45dcd3997bcb8aa3084f3c5ac88f3e5|0c1b1a7c7e31f9efb8cd1cefad0503b8385c292b8ece6b20943fe36be3f56447",
		"acme|demo|38bc9fedd3f09ae556c1f6db34cf39a7d77039120a172ffa7e99fc60b6981f4e|581f2a2595191664c5c74ea954958b6a41181cc4ec1bce5752ec54ffa91088b1|||0c1b1a7c7e31f9efb8cd1cefad0503b8385c292b8ece6b20943fe36be3f56447|a2aa5f708afaf87e511d2e5aaa9a929b8a54be43c2a8ff8556a97829b6d4f2c7",
		"acme|demo|581f2a2595191664c5c74ea954958b6a41181cc4ec1bce5752ec54ffa91088b1|c152e8a1dbce149e2a009042b8eb591f1f962b4fb0b3cd3a82fdc84c9b30d06e|||a2aa5f708afaf87e511d2e5aaa9a929b8a54be43c2a8ff8556a97829b6d4f2c7|48c5ffa1252c31cb6cfbb174236c98efe37804b4674c740a7968194bd2a418b9",
		"acme|demo|c152e8a1dbce149e2a009042b8eb591f1f962b4fb0b3cd3a82fdc84c9b30d06e|302f7616d92b854b0b83a74cf1f2c9ecaa6e10788471a353086559efc0baed16|||48c5ffa1252c31cb6cfbb174236c98efe37804b4674c740a7968194bd2a418b9|2e88f92e60002e980e5f1eeb222ece1e9dc5a9fd3e605a61f7c3350e6caee4e9",
		"acme|demo|fd6dbee6f6fd199de4612b2480ddf6eef49fdfe8f4db89bbc719bae3b94b0cdc|fd6dbee6f6fd199de4612b2480ddf6eef49fdfe8f4db89bbc719bae3b94b0cdc|add|9984246524ee226368d577504f34535aa2fa71a9563cf0d138a7b6886c4addd8|2e88f92e60002e980e5f1eeb222ece1e9dc5a9fd3e605a61f7c3350e6caee4e9|718ce753dca7bfd21f034b0108b0aaa25d690e409acbc5dbe5638452b8a3ae21",
		"acme|demo|fd6dbee6f6fd199de4612b2480ddf6eef49fdfe8f4db89bbc719bae3b94b0cdc|fd6dbee6f6fd199de4612b2480ddf6eef49fdfe8f4db89bbc719bae3b94b0cdc|remove|297099bc1fc5b5b354b0ce73eb5838a832e87c16eec0e33b1d7f739a7b8cf555|718ce753dca7bfd21f034b0108b0aaa25d690e409acbc5dbe5638452b8a3ae21|dbeb67061e1d3418d85d52905aad17d76ab651d2b5867638c6efdfbb184d1971",
		"acme|demo|fd6dbee6f6fd199de4612b2480ddf6eef49fdfe8f4db89bbc719bae3b94b0cdc|d943f7a8abbe137ac05cc78f941adedc4eec75b0a7a270e9679920aebf737a89|ready|47aa748d0be1dcdf8fb732fd0d6c42dd457464b16e7a96391e5230f443806e14|dbeb67061e1d3418d85d52905aad17d76ab651d2b5867638c6efdfbb184d1971|2c27a7295242933b60acb37d364ce4a47edee1b3efbca59d52aefeb70c33b944",
		"||7b9edf1d5e6c6c1e1a581dbf71ed2503f496f9d3f2582307dbd7794d7020f55a|545b5aff5eb35ea737f3ffd332d6f43676f52faf1d6b491beb450174394fc8f6|||2c27a7295242933b60acb37d364ce4a47edee1b3efbca59d52aefeb70c33b944|8c6857edcf70db57befdb77be404d558309df7bd288e007ec1a0b22b57488d94",
		"acme|demo|ea113086443fdcc34ee7e434d53bebff13a6b9a9e86d24d8b3cecc777d8e8b01|8073abec899d42a5fcfb9e5ed9dee20669c0f159450b09d264e9b22d397e832c|||8c6857edcf70db57befdb77be404d558309df7bd288e007ec1a0b22b57488d94|77b5c17a0a5ae6de2c4043cf746e7b266bf60914e8b333ffc6ea94b0206630ec",
		"bench|p3|83dcfa59dd85d40c9db7da86bb365960aae3fe4d6fc43b3128d4b02d13713484|6ba526c98d8cb982b1cf0c9402aa73bf8be6ec1f0de5a28c261c53fe736839f1|1",
		"acme|demo|||-1",
		"acme|demo|6e505cb990e71b797188922927538c33ed0c19f5ce42fb0befb2c09784db93c9|f4d6d347f7898ea63193147a73dc444cabfd8d0a843f2e8719e6e05393ad8b2e|-1",
	},
}

func rowLine(r *Row) string {
	return strings.Join([]string{r.Tenant, r.Project, r.BeforeHash, r.AfterHash, r.ElementOp, r.ElementHash, r.PrevChainHash, r.ChainHash}, "|")
}

func conflictLine(r *ConflictRow) string {
	return strings.Join([]string{r.Tenant, r.Project, r.AttemptedHash, r.CurrentHash, fmt.Sprint(r.TxnOp)}, "|")
}

func goldenLines(s Scheme) []string {
	k := testKey()
	var lines []string
	prev := ""
	for i, e := range goldenEvents() {
		r := EventRow(e, At{Partition: 3, Offset: int64(i)}, k, s, prev)
		lines = append(lines, rowLine(&r))
		prev = r.ChainHash
	}
	for i, c := range goldenConflicts() {
		r := ConflictRowOf(c, At{Partition: 1, Offset: int64(i)}, k, s)
		lines = append(lines, conflictLine(&r))
	}
	return lines
}

func TestGoldenRows(t *testing.T) {
	for _, s := range []Scheme{Scheme1, Scheme2} {
		t.Run(fmt.Sprintf("Scheme%d", s), func(t *testing.T) {
			got := goldenLines(s)
			want := goldenRows[s]
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("row %d\n got %s\nwant %s", i, got[i], want[i])
				}
			}
		})
	}
}

// TestTenantProject: tenantProject reads the parts strings.SplitN(key,
// "/", 5) cuts.
func TestTenantProject(t *testing.T) {
	for _, key := range []string{"", "tenant", "tenant/", "tenant/a", "tenant/a/", "tenant/a/project", "tenant/a/project/",
		"tenant/a/project/p", "tenant/a/project/p/", "tenant/a/project/p/k/l/m", "x/a/project/p/k", "tenant/a/x/p/k", "a/b/c/d/e/f", "/tenant/a/project/p"} {
		parts := strings.SplitN(key, "/", 5)
		var tenant, project string
		if len(parts) >= 2 && parts[0] == "tenant" {
			tenant = parts[1]
		}
		if len(parts) >= 4 && parts[2] == "project" {
			project = parts[3]
		}
		if gt, gp := tenantProject(key); gt != tenant || gp != project {
			t.Errorf("tenantProject(%q) = %q, %q; want %q, %q", key, gt, gp, tenant, project)
		}
	}
}

// TestChainRowsAreEventRows: the auditor's rows of a partition are
// EventRow's, also when it takes a before_hash from the key's previous
// row (same bytes) and when it does not (other bytes, even of the same
// value, another key, a gap).
func TestChainRowsAreEventRows(t *testing.T) {
	k := testKey()
	values := []string{`{"client":1,"seq":1}`, `{"client":1,"seq":2}`, `{"seq":2,"client":1}`, ``, `null`, `{"a":1,"a":2}`}
	p := &part{topic: "kv.changes", id: 4}
	version := map[string]int64{}
	after := map[string]string{}
	for i := range 40 {
		key := fmt.Sprintf("tenant/t/project/p/k%d", i%3)
		before := after[key]
		if i%7 == 3 {
			before = values[i%len(values)] // not the previous after
		}
		e := testEvent(version[key]+1, before, values[(i*5)%len(values)])
		e.Key = key
		if i%11 == 5 {
			e.Version++ // a gap: the next event's prev_version is not in the part
		}
		version[key], after[key] = e.Version, string(e.After)
		p.events = append(p.events, *e)
		p.eventRecs = append(p.eventRecs, &kgo.Record{Offset: int64(100 + i)})
	}
	a := &Auditor{cfg: Config{HashScheme: CurrentScheme}, tips: map[string]tip{}}
	a.chain(p, nil, k)
	prev := map[string]Row{}
	for i := range p.events {
		e := &p.events[i]
		chain := ""
		if r, ok := prev[e.Key]; ok && r.Version == e.PrevVersion {
			chain = r.ChainHash
		}
		want := EventRow(e, At{Partition: 4, Offset: int64(100 + i)}, k, CurrentScheme, chain)
		if !reflect.DeepEqual(p.rows[i], want) {
			t.Fatalf("row %d\n got %+v\nwant %+v", i, p.rows[i], want)
		}
		prev[e.Key] = want
	}
	for key, r := range prev {
		if p.tips[key] != (tip{r.Version, r.ChainHash}) {
			t.Errorf("tip of %s = %+v, want version %d", key, p.tips[key], r.Version)
		}
	}
}
