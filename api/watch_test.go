package api_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
)

func TestParseWatch(t *testing.T) {
	const prefix = "tenant/acme/project/demo/flags/"
	for _, tc := range []struct {
		name, query, lastEventID string
		want, field              string // want: the spec as text; field: the invalid one
	}{
		{"Prefix", "prefix=" + prefix, "", "prefix " + prefix, ""},
		{"Key", "key=tenant/acme/project/demo/k", "", "key tenant/acme/project/demo/k", ""},
		{"After", "prefix=" + prefix + "&after=p3.o12", "", "prefix " + prefix + " after p3.o12", ""},
		{"LastEventID", "prefix=" + prefix, "p3.o-1", "prefix " + prefix + " after p3.o-1", ""},
		{"AfterWinsOverLastEventID", "prefix=" + prefix + "&after=p3.o5", "p3.o9", "prefix " + prefix + " after p3.o5", ""},
		{"FromVersion", "key=tenant/acme/project/demo/k&fromVersion=4", "", "key tenant/acme/project/demo/k from 4", ""},
		{"Neither", "", "", "", "prefix"},
		{"Both", "prefix=" + prefix + "&key=tenant/acme/project/demo/k", "", "", "prefix"},
		{"PrefixOutsideProject", "prefix=tenant/acme/", "", "", "prefix"},
		{"BadKey", "key=tenant/acme/project/demo/K", "", "", "key"},
		{"Unknown", "prefix=" + prefix + "&from=p1.o1", "", "", "from"},
		{"Twice", "prefix=" + prefix + "&prefix=" + prefix, "", "", "prefix"},
		{"EmptyAfter", "prefix=" + prefix + "&after=", "", "", "after"},
		{"BadAfter", "prefix=" + prefix + "&after=3-12", "", "", "after"},
		{"BadLastEventID", "prefix=" + prefix, "yesterday", "", "Last-Event-ID"},
		{"FromVersionZero", "key=tenant/acme/project/demo/k&fromVersion=0", "", "", "fromVersion"},
		{"FromVersionWithPrefix", "prefix=" + prefix + "&fromVersion=1", "", "", "fromVersion"},
		{"FromVersionAndAfter", "key=tenant/acme/project/demo/k&fromVersion=1&after=p1.o1", "", "", "fromVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := api.ParseWatch(q, tc.lastEventID)
			if tc.field != "" {
				var e *contract.Error
				if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != tc.field {
					t.Fatalf("got %+v, %v; want invalid on %s", spec, err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if spec.Prefix != "" {
				got = append(got, "prefix "+spec.Prefix)
			}
			if spec.Key != "" {
				got = append(got, "key "+spec.Key)
			}
			if spec.After != nil {
				got = append(got, "after "+spec.After.String())
			}
			if spec.FromVersion != 0 {
				got = append(got, "from "+strconv.FormatInt(spec.FromVersion, 10))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Fatalf("got %q, want %q", s, tc.want)
			}
		})
	}
}

// FuzzParseWatch: any query either parses to one prefix or one key, each
// valid, or fails invalid naming a field; it never panics.
func FuzzParseWatch(f *testing.F) {
	f.Add("prefix=tenant/acme/project/demo/&after=p1.o2", "")
	f.Add("key=tenant/acme/project/demo/k&fromVersion=3", "p1.o-1")
	f.Add("prefix=tenant/a/&key=x", "")
	f.Add("prefix=tenant/a/project/p/&=x", "")
	f.Fuzz(func(t *testing.T, query, lastEventID string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		spec, err := api.ParseWatch(q, lastEventID)
		if err != nil {
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field == "" {
				t.Fatalf("%q: %v is not invalid naming a field", query, err)
			}
			return
		}
		if (spec.Prefix == "") == (spec.Key == "") {
			t.Fatalf("%q: %+v has not exactly one of prefix and key", query, spec)
		}
		if spec.Prefix != "" && contract.ValidatePrefix(spec.Prefix) != nil {
			t.Fatalf("%q: invalid prefix %q accepted", query, spec.Prefix)
		}
		if _, err := contract.ParseKey(spec.Key); spec.Key != "" && err != nil {
			t.Fatalf("%q: invalid key %q accepted", query, spec.Key)
		}
		if spec.FromVersion > 0 && (spec.Key == "" || spec.After != nil) {
			t.Fatalf("%q: fromVersion with %+v", query, spec)
		}
	})
}
