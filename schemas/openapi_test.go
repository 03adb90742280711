package schemas_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/schemas"
)

// The OpenAPI document must not drift from the code. The code is read as
// Go source (../api, ../contract), never imported: schemas sits below api
// (the contract, which sits below schemas, is also imported, for what
// its op table says of an op).

const openapiURL = "https://eskv.io/schemas/openapi.json"

// openapiDoc decodes the embedded document into plain JSON values (maps,
// slices, strings, json.Number, bools, nil).
func openapiDoc(t *testing.T) map[string]any {
	t.Helper()
	var y any
	if err := yaml.Unmarshal(schemas.OpenAPI, &y); err != nil {
		t.Fatalf("openapi.yaml is not YAML: %v", err)
	}
	b, err := json.Marshal(y)
	if err != nil {
		t.Fatalf("openapi.yaml has a value JSON cannot hold: %v", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var doc map[string]any
	if err := d.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// at follows a JSON pointer ("/a/b~1c") from v.
func at(v any, pointer string) (any, bool) {
	if pointer == "" {
		return v, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return v, true
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// deref resolves a local {"$ref": "#/..."} object.
func deref(t *testing.T, doc map[string]any, v any) any {
	t.Helper()
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		if v, ok = at(doc, strings.TrimPrefix(ref, "#")); !ok {
			t.Fatalf("$ref %s does not resolve", ref)
		}
	}
	t.Fatal("$ref chain too long")
	return nil
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestOpenAPIRoutes(t *testing.T) {
	doc := openapiDoc(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", v)
	}
	// The routes api.New registers, and nothing else: those of api's op
	// table (opRoutes) and the others.
	want := map[string][]string{
		"/v1/kv/{key}":           {"delete", "get", "patch", "put"},
		"/v1/kv":                 {"get"},
		"/v1/kv:batchGet":        {"post"},
		"/v1/kv:deleteRange":     {"post"},
		"/v1/kv:expireDue":       {"post"},
		"/v1/projects":           {"get"},
		"/v1/txn":                {"post"},
		"/v1/watch":              {"get"},
		"/healthz":               {"get"},
		"/readyz":                {"get"},
		"/version":               {"get"},
		"/metrics":               {"get"},
		"/ui/":                   {"get"},
		"/ui/login":              {"get", "post"},
		"/ui/logout":             {"post"},
		"/ui/api/me":             {"get"},
		"/ui/api/projects":       {"get"},
		"/ui/api/keys":           {"get"},
		"/ui/api/history":        {"get"},
		"/ui/api/at":             {"get"},
		"/ui/api/conflicts":      {"get"},
		"/ui/api/watch":          {"get"},
		"/ui/api/overview":       {"get"},
		"/ui/api/health":         {"get"},
		"/ui/api/key":            {"get"},
		"/ui/api/peer/conflicts": {"get"},
	}
	rows := opRoutes(t)
	for _, r := range rows {
		if !slices.Contains(want[r.path], r.method) {
			want[r.path] = append(want[r.path], r.method)
			sort.Strings(want[r.path])
		}
	}
	for _, r := range rows {
		if _, ok := obj(obj(doc["paths"])[r.path])[r.method]; !ok {
			t.Errorf("api's handler row %s (%s %s) is not in openapi.yaml", r.name, strings.ToUpper(r.method), r.path)
		}
	}
	paths := obj(doc["paths"])
	if got := sortedKeys(paths); !slices.Equal(got, sortedKeys(anyMap(want))) {
		t.Fatalf("paths = %v, want %v", got, sortedKeys(anyMap(want)))
	}
	for p, methods := range want {
		var got []string
		for k := range obj(paths[p]) {
			if slices.Contains(httpMethods, k) {
				got = append(got, k)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, methods) {
			t.Errorf("%s methods = %v, want %v", p, got, methods)
		}
	}

	// /v1 needs the bearer token; the ops routes do not.
	if !reflect.DeepEqual(doc["security"], []any{map[string]any{"bearer": []any{}}}) {
		t.Errorf("top-level security = %v, want bearer", doc["security"])
	}
	if s := obj(obj(obj(doc["components"])["securitySchemes"])["bearer"]); s["type"] != "http" || s["scheme"] != "bearer" {
		t.Errorf("bearer scheme = %v", s)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if sec, ok := obj(obj(paths[p])["get"])["security"].([]any); !ok || len(sec) != 0 {
			t.Errorf("%s: security = %v, want []", p, obj(obj(paths[p])["get"])["security"])
		}
	}
	for _, op := range []string{"/v1/kv/{key}/get", "/v1/kv/{key}/put", "/v1/kv/{key}/delete", "/v1/kv/get"} {
		i := strings.LastIndex(op, "/")
		resp := obj(obj(obj(paths[op[:i]])[op[i+1:]])["responses"])
		for _, code := range []string{"200", "401", "403"} {
			if resp[code] == nil {
				t.Errorf("%s %s: no %s answer", strings.ToUpper(op[i+1:]), op[:i], code)
			}
		}
	}

	// Query parameters are exactly those the handlers accept (others are 400).
	params := func(p, m string) []string {
		var names []string
		ps, _ := obj(obj(paths[p])[m])["parameters"].([]any)
		for _, q := range ps {
			q := obj(deref(t, doc, q))
			if q["in"] == "query" {
				names = append(names, q["name"].(string))
			}
		}
		sort.Strings(names)
		return names
	}
	if got := params("/v1/kv/{key}", "delete"); !slices.Equal(got, []string{"expectedVersion", "requestId"}) {
		t.Errorf("DELETE query parameters = %v", got)
	}
	if got := params("/v1/kv/{key}", "get"); !slices.Equal(got, []string{"at", "field"}) {
		t.Errorf("GET query parameters = %v", got)
	}
	if got := params("/v1/kv", "get"); !slices.Equal(got, []string{"at", "cursor", "field", "keysOnly", "limit", "op", "prefix", "value"}) {
		t.Errorf("list query parameters = %v", got)
	}
	for _, r := range rows {
		if r.op.Verb() == "" { // the plain GET: its field parameter is checked above
			continue
		}
		want := slices.Sorted(slices.Values(r.params))
		if got := params(r.path, r.method); !slices.Equal(got, want) {
			t.Errorf("%s %s query parameters = %v; api's row %s takes %v", strings.ToUpper(r.method), r.path, got, r.name, want)
		}
	}
}

// opRoute is the route of one row of api's handler table.
type opRoute struct {
	name         string      // the row's key in api/ops.go: OpTouch
	op           contract.Op // its value
	path, method string      // /v1/kv/{key}:touch, post
	params       []string    // the query parameters a query row takes
}

// opRoutes reads api's handler table (the handlers map of ../api/ops.go):
// a row with write is POST /v1/kv/{key}:{verb}, one with read or query
// is GET /v1/kv/{key}:{verb}, or GET /v1/kv/{key} for the op without a
// verb. The op constants are resolved from ../contract's source, their
// verbs from the contract's op table.
func opRoutes(t *testing.T) []opRoute {
	t.Helper()
	consts := contractStrings(t)
	f, err := parser.ParseFile(token.NewFileSet(), "../api/ops.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var table *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "handlers" && len(vs.Values) == 1 {
			table, _ = vs.Values[0].(*ast.CompositeLit)
		}
		return table == nil
	})
	if table == nil || len(table.Elts) == 0 {
		t.Fatal("api/ops.go: no handlers map literal (update this test if the table moved)")
	}
	var out []opRoute
	for _, e := range table.Elts {
		kv := e.(*ast.KeyValueExpr)
		sel, ok := kv.Key.(*ast.SelectorExpr)
		if !ok || consts[sel.Sel.Name] == "" {
			t.Fatalf("api/ops.go: handlers key %v is not a contract op constant", kv.Key)
		}
		r := opRoute{name: sel.Sel.Name, op: contract.Op(consts[sel.Sel.Name]), method: "get"}
		for _, fe := range kv.Value.(*ast.CompositeLit).Elts {
			fkv := fe.(*ast.KeyValueExpr)
			switch fkv.Key.(*ast.Ident).Name {
			case "write":
				r.method = "post"
			case "params":
				for _, p := range fkv.Value.(*ast.CompositeLit).Elts {
					v, _ := strconv.Unquote(p.(*ast.BasicLit).Value)
					r.params = append(r.params, v)
				}
			}
		}
		if (r.method == "get") != r.op.Reads() {
			t.Errorf("api/ops.go: row %s is served by %s, but the contract says reads=%v", r.name, r.method, r.op.Reads())
		}
		r.path = "/v1/kv/{key}"
		if v := r.op.Verb(); v != "" {
			r.path += ":" + v
		}
		out = append(out, r)
	}
	return out
}

// contractStrings maps the names of ../contract's string constants to
// their values.
func contractStrings(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../contract/*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") }) {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
			return true
		})
	}
	return consts
}

func anyMap[V any](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := openapiDoc(t)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !strings.HasPrefix(ref, "#/") {
					t.Errorf("%s: $ref %s is not local", path, ref)
				} else if _, ok := at(doc, ref[1:]); !ok {
					t.Errorf("%s: $ref %s does not resolve", path, ref)
				}
			}
			for k, e := range v {
				walk(path+"/"+escape(k), e)
			}
		case []any:
			for i, e := range v {
				walk(path+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("", doc)
}

// statusTable reads api's statusOf map (code -> HTTP status) from
// ../api/errors.go, resolving contract.E* names from ../contract/error.go.
func statusTable(t *testing.T) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	ev, err := parser.ParseFile(fset, "../contract/error.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	ast.Inspect(ev, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
		return true
	})
	api, err := parser.ParseFile(fset, "../api/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var table *ast.CompositeLit
	ast.Inspect(api, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "statusOf" && len(vs.Values) == 1 {
			table, _ = vs.Values[0].(*ast.CompositeLit)
		}
		return table == nil
	})
	if table == nil {
		t.Fatal("api/errors.go: no statusOf map literal (update this test if the table moved)")
	}
	out := map[string]int{}
	for _, e := range table.Elts {
		kv := e.(*ast.KeyValueExpr)
		var code string
		switch k := kv.Key.(type) {
		case *ast.BasicLit:
			code, _ = strconv.Unquote(k.Value)
		case *ast.SelectorExpr:
			if x, ok := k.X.(*ast.Ident); !ok || x.Name != "contract" || consts[k.Sel.Name] == "" {
				t.Fatalf("statusOf key %s is not a contract constant", k.Sel.Name)
			}
			code = consts[k.Sel.Name]
		default:
			t.Fatalf("statusOf key %T is not a string or contract constant", kv.Key)
		}
		sel, ok := kv.Value.(*ast.SelectorExpr)
		if !ok {
			t.Fatalf("statusOf[%s] is not an http.Status constant", code)
		}
		status, ok := httpStatus[sel.Sel.Name]
		if !ok {
			t.Fatalf("statusOf[%s] = http.%s: add it to httpStatus in this test", code, sel.Sel.Name)
		}
		out[code] = status
	}
	return out
}

var httpStatus = map[string]int{
	"StatusBadRequest":            http.StatusBadRequest,
	"StatusUnauthorized":          http.StatusUnauthorized,
	"StatusForbidden":             http.StatusForbidden,
	"StatusNotFound":              http.StatusNotFound,
	"StatusMethodNotAllowed":      http.StatusMethodNotAllowed,
	"StatusNotAcceptable":         http.StatusNotAcceptable,
	"StatusConflict":              http.StatusConflict,
	"StatusGone":                  http.StatusGone,
	"StatusPreconditionFailed":    http.StatusPreconditionFailed,
	"StatusRequestEntityTooLarge": http.StatusRequestEntityTooLarge,
	"StatusUnsupportedMediaType":  http.StatusUnsupportedMediaType,
	"StatusUnprocessableEntity":   http.StatusUnprocessableEntity,
	"StatusLocked":                http.StatusLocked,
	"StatusPreconditionRequired":  http.StatusPreconditionRequired,
	"StatusTooManyRequests":       http.StatusTooManyRequests,
	"StatusInternalServerError":   http.StatusInternalServerError,
	"StatusNotImplemented":        http.StatusNotImplemented,
	"StatusBadGateway":            http.StatusBadGateway,
	"StatusServiceUnavailable":    http.StatusServiceUnavailable,
	"StatusGatewayTimeout":        http.StatusGatewayTimeout,
}

func TestOpenAPIErrorCodes(t *testing.T) {
	doc := openapiDoc(t)
	table := statusTable(t)
	if len(table) == 0 {
		t.Fatal("empty statusOf table")
	}
	var enum []string
	for _, c := range obj(deref(t, doc, map[string]any{"$ref": "#/components/schemas/ErrorCode"}))["enum"].([]any) {
		enum = append(enum, c.(string))
	}
	if got, _ := at(doc, "/components/schemas/ErrorDetail/properties/code/$ref"); got != "#/components/schemas/ErrorCode" {
		t.Fatalf("ErrorDetail.code does not use the ErrorCode enum")
	}
	for code := range table {
		if !slices.Contains(enum, code) {
			t.Errorf("error code %q (api statusOf) is missing from the ErrorCode enum", code)
		}
	}
	for _, code := range enum {
		if _, ok := table[code]; !ok {
			t.Errorf("ErrorCode enum has %q, which api's statusOf does not know", code)
		}
	}

	// Every example error answer sits under the status its code maps to.
	for _, p := range sortedKeys(obj(doc["paths"])) {
		for _, m := range sortedKeys(obj(obj(doc["paths"])[p])) {
			responses := obj(obj(obj(obj(doc["paths"])[p])[m])["responses"])
			for _, status := range sortedKeys(responses) {
				r := obj(deref(t, doc, responses[status]))
				for _, ex := range obj(obj(obj(r["content"])["application/json"])["examples"]) {
					val := obj(deref(t, doc, ex))["value"]
					code, ok := at(val, "/error/code")
					if !ok {
						continue
					}
					want, ok := table[code.(string)]
					if !ok {
						t.Errorf("%s %s %s: example code %v is unknown", strings.ToUpper(m), p, status, code)
					} else if strconv.Itoa(want) != status {
						t.Errorf("%s %s: example with code %v is under %s; api answers it with %d", strings.ToUpper(m), p, code, status, want)
					}
				}
			}
		}
	}
}

// TestOpenAPIMatchesGoTypes compares schema properties with the JSON
// field names of the Go types that are encoded or decoded: the bodies
// and answers of api's op table's routes (opBodies), and the others
// listed here.
func TestOpenAPIMatchesGoTypes(t *testing.T) {
	doc := openapiDoc(t)
	contractFiles, err := filepath.Glob("../contract/*.go")
	if err != nil {
		t.Fatal(err)
	}
	contractFiles = slices.DeleteFunc(contractFiles, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	fields := goJSONFields(t, append(contractFiles, "../api/uidata.go", "../api/uiconflicts.go", "../api/uiconsole.go", "../api/uihealth.go")...)
	for _, c := range append(opBodies(t, doc), []goSchema{
		{"PutBody", "PutBody", false},
		{"DeleteAnswer", "DeleteAnswer", true},
		{"ListAnswer", "ListAnswer", true},
		{"KeysAnswer", "KeysAnswer", true},
		{"KeyInfo", "KeyInfo", true},
		{"BatchGetBody", "BatchGetBody", false},
		{"DeleteRangeBody", "DeleteRangeBody", false},
		{"ExpireDueBody", "ExpireDueBody", false},
		{"PrefixAnswer", "PrefixAnswer", true},
		{"BatchGetAnswer", "BatchGetAnswer", true},
		{"BatchGetItem", "BatchGetItem", true},
		{"PartitionRead", "PartitionRead", true},
		{"ProjectsAnswer", "ProjectsAnswer", true},
		{"ProjectInfo", "ProjectInfo", true},
		{"BuildInfo", "BuildInfo", true},
		{"ErrorBody", "ErrorBody", true},
		{"ErrorDetail", "ErrorDetail", true},
		{"Semantics", "Semantics", false},
		{"PatchBody", "PatchBody", false},
		{"FieldCondition", "FieldCondition", false},
		{"TxnBody", "TxnBody", false},
		{"TxnOp", "TxnOp", false},
		{"Condition", "Condition", false},
		{"TxnResult", "TxnResult", true},
		{"TxnAnswer", "TxnAnswer", true},
		{"HistoryVersion", "HistoryVersion", true},
		{"QueueItem", "QueueItem", true},
		{"FieldIndexState", "FieldIndexState", true},
		{"WatchEvent", "WatchEvent", true},
		{"WatchEnd", "WatchEnd", true},
		{"UIMe", "UIMe", true},
		{"UIProject", "UIProject", true},
		{"UIKeys", "UIKeys", true},
		{"UIKey", "UIKey", true},
		{"UIVersion", "UIVersion", true},
		{"UIHistory", "UIHistory", true},
		{"UIAt", "UIAt", true},
		{"UIEvent", "UIEvent", true},
		{"ConflictRates", "ConflictRates", true},
		{"ConflictMinute", "ConflictMinute", true},
		{"UIPeer", "UIPeer", true},
		{"UIAlert", "UIAlert", true},
		{"UIOverview", "UIOverview", true},
		{"UIOverviewProject", "UIOverviewProject", true},
		{"UIPeerConflicts", "UIPeerConflicts", true},
		{"UIHealth", "UIHealth", true},
		{"UIPartition", "UIPartition", true},
		{"UIWriter", "UIWriter", true},
		{"UIReach", "UIReach", true},
		{"UIAudit", "UIAudit", true},
	}...) {
		s := obj(deref(t, doc, map[string]any{"$ref": "#/components/schemas/" + c.schema}))
		f, ok := fields[c.goType]
		if !ok {
			t.Errorf("Go type %s not found", c.goType)
			continue
		}
		var names, always []string
		for n, omit := range f {
			names = append(names, n)
			if !omit {
				always = append(always, n)
			}
		}
		sort.Strings(names)
		sort.Strings(always)
		if got := sortedKeys(obj(s["properties"])); !slices.Equal(got, names) {
			t.Errorf("schema %s properties = %v; Go type %s has %v", c.schema, got, c.goType, names)
		}
		if c.checkRequired {
			var req []string
			for _, r := range s["required"].([]any) {
				req = append(req, r.(string))
			}
			sort.Strings(req)
			if !slices.Equal(req, always) {
				t.Errorf("schema %s required = %v; Go type %s always encodes %v", c.schema, req, c.goType, always)
			}
		}
	}
	if s := obj(deref(t, doc, map[string]any{"$ref": "#/components/schemas/PutBody"})); s["additionalProperties"] != false {
		t.Error("PutBody must forbid additional properties: the API rejects unknown fields")
	}
}

// goSchema is a component schema and the Go type it describes.
type goSchema struct {
	schema, goType string
	checkRequired  bool // required = the fields always encoded
}

// opBodies are the schemas of the request bodies and the 2xx answers of
// the routes of api's op table, each the Go type of the same name (an
// answer also checks required): a new op's types are checked once its
// route is in openapi.yaml.
func opBodies(t *testing.T, doc map[string]any) []goSchema {
	t.Helper()
	seen := map[string]bool{}
	var out []goSchema
	add := func(where string, content any, answer bool) {
		s := obj(obj(obj(content)["application/json"])["schema"])
		refs := []any{s}
		if one, ok := s["oneOf"].([]any); ok {
			refs = one
		}
		for _, r := range refs {
			ref, _ := obj(r)["$ref"].(string)
			name, ok := strings.CutPrefix(ref, "#/components/schemas/")
			if !ok {
				t.Errorf("%s: the schema is not a components/schemas entry named after its Go type: %v", where, s)
				continue
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, goSchema{name, name, answer})
			}
		}
	}
	for _, r := range opRoutes(t) {
		o := obj(obj(obj(doc["paths"])[r.path])[r.method])
		where := strings.ToUpper(r.method) + " " + r.path
		if b, ok := o["requestBody"]; ok {
			add(where+" requestBody", obj(deref(t, doc, b))["content"], false)
		}
		responses := obj(o["responses"])
		for _, status := range sortedKeys(responses) {
			if c := obj(deref(t, doc, responses[status]))["content"]; strings.HasPrefix(status, "2") && c != nil {
				add(where+" "+status, c, true)
			}
		}
	}
	return out
}

// goJSONFields returns, per struct type in files, its JSON field names and
// whether each is omitempty; the fields of an embedded struct of files
// count as the embedding type's, as encoding/json promotes them.
func goJSONFields(t *testing.T, files ...string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	embeds := map[string][]string{} // type → the types it embeds
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			m := map[string]bool{}
			for _, fld := range st.Fields.List {
				if id, ok := fld.Type.(*ast.Ident); ok && len(fld.Names) == 0 && fld.Tag == nil {
					embeds[ts.Name.Name] = append(embeds[ts.Name.Name], id.Name)
					continue
				}
				if fld.Tag == nil {
					continue
				}
				tag, _ := strconv.Unquote(fld.Tag.Value)
				j, ok := reflect.StructTag(tag).Lookup("json")
				if !ok || j == "-" {
					continue
				}
				n, opts, _ := strings.Cut(j, ",")
				m[n] = slices.Contains(strings.Split(opts, ","), "omitempty")
			}
			out[ts.Name.Name] = m
			return true
		})
	}
	for typ, embedded := range embeds {
		for _, e := range embedded {
			if out[e] == nil {
				t.Fatalf("%s embeds %s, which is not a struct of %v", typ, e, files)
			}
			maps.Copy(out[typ], out[e])
		}
	}
	return out
}

// TestOpenAPIExamples validates every example (media types and
// parameters) against its schema, as JSON Schema 2020-12.
func TestOpenAPIExamples(t *testing.T) {
	doc := openapiDoc(t)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openapiURL, doc); err != nil {
		t.Fatal(err)
	}
	compile := func(pointer string) *jsonschema.Schema {
		t.Helper()
		s, err := c.Compile(openapiURL + "#" + pointer)
		if err != nil {
			t.Fatalf("compile %s: %v", pointer, err)
		}
		return s
	}
	for _, name := range sortedKeys(obj(obj(doc["components"])["schemas"])) {
		compile("/components/schemas/" + name)
	}

	n := 0
	check := func(where, schemaPtr string, example any) {
		if err := compile(schemaPtr).Validate(example); err != nil {
			t.Errorf("%s: example does not match its schema: %#v", where, err)
		}
		n++
	}
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			if a, ok := v.([]any); ok {
				for i, e := range a {
					walk(ptr+"/"+strconv.Itoa(i), e)
				}
			}
			return
		}
		if _, ok := m["schema"]; ok {
			if ex, ok := m["example"]; ok {
				check(ptr+"/example", ptr+"/schema", ex)
			}
			for k, ex := range obj(m["examples"]) {
				val, ok := obj(deref(t, doc, ex))["value"]
				if !ok {
					t.Errorf("%s/examples/%s has no value", ptr, k)
					continue
				}
				check(ptr+"/examples/"+k, ptr+"/schema", val)
			}
		}
		for k, e := range m {
			if k == "schema" || k == "examples" || k == "example" {
				continue
			}
			walk(ptr+"/"+escape(k), e)
		}
	}
	walk("", doc)

	// The named component examples, against the schemas they illustrate.
	for ex, schema := range map[string]string{"CheckpointPut": "PutBody", "CheckpointEntry": "Entry", "Conflict": "ErrorBody"} {
		v, ok := at(doc, "/components/examples/"+ex+"/value")
		if !ok {
			t.Errorf("no example %s", ex)
			continue
		}
		check("example "+ex, "/components/schemas/"+schema, v)
	}
	if n < 15 {
		t.Errorf("only %d examples checked", n)
	}

	// Counter-examples: the schemas reject what the API rejects.
	for _, bad := range []struct{ schema, json string }{
		{"PutBody", `{}`},
		{"PutBody", `{"value": 1, "extra": true}`},
		{"PutBody", `{"value": 1, "ttlSeconds": 0}`},
		{"PutBody", `{"value": 1, "expectedVersion": -1}`},
		{"PutBody", `{"value": 1, "semantics": {"purpose": "cache"}}`},
		{"PutBody", `{"value": 1, "semantics": {"owner": "x"}}`},
		{"Key", `"tenant/acme/project/billing"`},
		{"Key", `"tenant/acme/project/billing/Jobs"`},
		{"Key", `"tenant/acme/project/billing//jobs"`},
		{"Key", `"tenant/acme/project/billing/jobs/"`},
		{"ErrorBody", `{"error": {"code": "teapot", "message": "x"}}`},
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(bad.json))
		if err != nil {
			t.Fatal(err)
		}
		if compile("/components/schemas/"+bad.schema).Validate(v) == nil {
			t.Errorf("schema %s accepts %s", bad.schema, bad.json)
		}
	}
	for _, good := range []struct{ schema, json string }{
		{"PutBody", `{"value": null}`},
		{"Key", `"tenant/acme/project/billing/jobs/invoices/checkpoint"`},
	} {
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(good.json))
		if err := compile("/components/schemas/" + good.schema).Validate(v); err != nil {
			t.Errorf("schema %s rejects %s: %v", good.schema, good.json, err)
		}
	}
}
