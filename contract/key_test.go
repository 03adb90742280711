package contract

import (
	"errors"
	"strings"
	"testing"
)

// pad returns prefix followed by 'x' up to n bytes.
func pad(prefix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix))
}

func TestParseKey(t *testing.T) {
	ok := []struct {
		name string
		in   string
		want Key
	}{
		{"OK", "tenant/acme/project/web/flags/dark-mode", Key{Tenant: "acme", Project: "web", Path: "flags/dark-mode"}},
		{"OKOnePathComponent", "tenant/acme/project/web/x", Key{Tenant: "acme", Project: "web", Path: "x"}},
		{"OKAllCharacters", "tenant/a-b_c.9/project/0.z_-/a.b/c-d/e_f/019", Key{Tenant: "a-b_c.9", Project: "0.z_-", Path: "a.b/c-d/e_f/019"}},
		{"OKDotsInsideComponents", "tenant/.a/project/a./.../..b", Key{Tenant: ".a", Project: "a.", Path: ".../..b"}},
		{"OKLiteralWordsAsNames", "tenant/tenant/project/project/tenant/x/project/y", Key{Tenant: "tenant", Project: "project", Path: "tenant/x/project/y"}},
		{"OKColonInPath", "tenant/acme/project/web/user:alice", Key{Tenant: "acme", Project: "web", Path: "user:alice"}},
		{"OKRedisStyle", "tenant/acme/project/web/gbe:state:tasks:42", Key{Tenant: "acme", Project: "web", Path: "gbe:state:tasks:42"}},
		{"OKVerbNotLast", "tenant/acme/project/web/increment:x/touch:y", Key{Tenant: "acme", Project: "web", Path: "increment:x/touch:y"}},
		{"OKExactly128", pad("tenant/acme/project/web/", MaxKeyLen), Key{Tenant: "acme", Project: "web", Path: strings.Repeat("x", MaxKeyLen-len("tenant/acme/project/web/"))}},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKey(tt.in)
			if err != nil {
				t.Fatalf("ParseKey(%q): %v", tt.in, err)
			}
			if !sameKey(k, tt.want) {
				t.Errorf("ParseKey(%q) = %+v, want %+v", tt.in, k, tt.want)
			}
			if k.String() != tt.in {
				t.Errorf("String() = %q, want %q", k.String(), tt.in)
			}
			if want := "tenant/" + tt.want.Tenant + "/project/" + tt.want.Project; k.Scope() != want {
				t.Errorf("Scope() = %q, want %q", k.Scope(), want)
			}
			if !strings.HasPrefix(tt.in, k.Scope()+"/") {
				t.Errorf("Scope() %q is not a prefix of %q", k.Scope(), tt.in)
			}
			k2, err := ParseKey(k.String())
			if err != nil || k2 != k {
				t.Errorf("ParseKey(String()) = %+v, %v; want %+v", k2, err, k)
			}
		})
	}

	// Each case names the rule broken; msg is a part of the message that
	// says which.
	bad := []struct {
		name string
		in   string
		msg  string
	}{
		{"ErrEmpty", "", "empty"},
		{"ErrUppercase", "tenant/Acme/project/web/x", "uppercase"},
		{"ErrUppercaseLiteral", "TENANT/acme/project/web/x", "uppercase"},
		{"ErrSpace", "tenant/acme/project/web/a b", "whitespace"},
		{"ErrTab", "tenant/acme/project/web/a\tb", "whitespace"},
		{"ErrNewline", "tenant/acme/project/web/a\n", "whitespace"},
		{"ErrCarriageReturn", "tenant/acme/project/web/a\rb", "whitespace"},
		{"ErrNonASCII", "tenant/acme/project/web/café", "not one of"},
		{"ErrNonASCIIFullwidthSlash", "tenant/acme/project/web／x", "not one of"},
		{"ErrInvalidUTF8", "tenant/acme/project/web/\xff", "not one of"},
		{"ErrNUL", "tenant/acme/project/web/a\x00", "not one of"},
		{"ErrColonInTenant", "tenant/ac:me/project/web/a", "path only"},
		{"ErrColonInProject", "tenant/acme/project/w:eb/a", "path only"},
		{"ErrColonVerbSuffix", "tenant/acme/project/web/counter:increment", "verb name"},
		{"ErrColonVerbSuffixLock", "tenant/acme/project/web/gbe:state:acquire", "verb name"},
		{"ErrPlus", "tenant/acme/project/web/a+b", "not one of"},
		{"ErrBackslash", `tenant/acme/project/web/a\b`, "not one of"},
		{"ErrTooLong", pad("tenant/acme/project/web/", MaxKeyLen+1), "limit is 128"},
		{"ErrTooLongAndUppercase", pad("tenant/acme/project/web/X", 300), "limit is 128"},
		{"ErrLeadingSlash", "/tenant/acme/project/web/x", "component 1 is empty"},
		{"ErrTrailingSlash", "tenant/acme/project/web/x/", "component 6 is empty"},
		{"ErrTrailingSlashNoPath", "tenant/acme/project/web/", "component 5 is empty"},
		{"ErrDoubleSlash", "tenant/acme/project/web//x", "component 5 is empty"},
		{"ErrEmptyTenant", "tenant//project/web/x", "component 2 is empty"},
		{"ErrEmptyProject", "tenant/acme/project//x", "component 4 is empty"},
		{"ErrDotDot", "tenant/acme/project/web/../x", "relative"},
		{"ErrDot", "tenant/acme/project/web/./x", "relative"},
		{"ErrDotLast", "tenant/acme/project/web/x/.", "relative"},
		{"ErrDotDotTenant", "tenant/../project/web/x", "relative"},
		{"ErrDotProject", "tenant/acme/project/./x", "relative"},
		{"ErrMissingTenant", "project/web/flags/x/y", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrMissingTenantName", "tenant/project/web/x", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrMissingProject", "tenant/acme/flags/x/y", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrWrongTenantWord", "tenants/acme/project/web/x", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrWrongProjectWord", "tenant/acme/proj/web/x", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrSwappedWords", "project/web/tenant/acme/x", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrNoPath", "tenant/acme/project/web", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrTwoComponents", "tenant/acme", "tenant/<tenant>/project/<project>/<path>"},
		{"ErrOneComponent", "x", "tenant/<tenant>/project/<project>/<path>"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKey(tt.in)
			if err == nil {
				t.Fatalf("ParseKey(%q) = %+v, want an error", tt.in, k)
			}
			if k != (Key{}) {
				t.Errorf("ParseKey(%q) returned %+v with its error", tt.in, k)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if e.Code != EInvalid || e.Field != "key" {
				t.Errorf("code %q field %q, want %q %q", e.Code, e.Field, EInvalid, "key")
			}
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q does not mention %q", e.Message, tt.msg)
			}
		})
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"OKScope", "tenant/acme/project/web/", true},
		{"OKFolder", "tenant/acme/project/web/flags/", true},
		{"OKPartialComponent", "tenant/acme/project/web/fl", true},
		{"OKDeep", "tenant/acme/project/web/a/b/c", true},
		{"OKExactly128", pad("tenant/acme/project/web/", MaxKeyLen), true},

		{"ErrEmpty", "", false},
		{"ErrTooLong", pad("tenant/acme/project/web/", MaxKeyLen+1), false},
		{"ErrScopeWithoutSlash", "tenant/acme/project/web", false},
		{"ErrTenantOnly", "tenant/acme/", false},
		{"ErrTenantPrefix", "tenant/ac", false},
		{"ErrEmptyTenant", "tenant//project/web/", false},
		{"ErrEmptyProject", "tenant/acme/project//", false},
		{"ErrWrongWord", "tenants/acme/project/web/", false},
		{"ErrLeadingSlash", "/tenant/acme/project/web/", false},
		{"ErrDoubleSlash", "tenant/acme/project/web//x", false},
		{"ErrDotDot", "tenant/acme/project/web/../x", false},
		{"ErrDotTenant", "tenant/./project/web/", false},
		{"ErrUppercase", "tenant/acme/project/web/X", false},
		{"ErrWhitespace", "tenant/acme/project/web/ x", false},
		{"ErrNonASCII", "tenant/acme/project/web/é", false},
		{"ErrWildcard", "tenant/acme/project/web/*", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidatePrefix(tt.in)
			if tt.ok {
				if err != nil {
					t.Errorf("ValidatePrefix(%q): %v", tt.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidatePrefix(%q) accepted", tt.in)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != EInvalid || e.Field != "prefix" {
				t.Errorf("error %v, want an *Error with code %q and field %q", err, EInvalid, "prefix")
			}
		})
	}
}

// TestPrefixOfKey checks that the scope of every valid key, with a
// trailing slash, is a valid prefix, and so is every key itself.
func TestPrefixOfKey(t *testing.T) {
	for _, s := range []string{"tenant/acme/project/web/x", "tenant/a/project/b/c/d/e", pad("tenant/acme/project/web/", MaxKeyLen)} {
		k, err := ParseKey(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{k.Scope() + "/", k.String()} {
			if err := ValidatePrefix(p); err != nil {
				t.Errorf("ValidatePrefix(%q): %v", p, err)
			}
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"tenant/acme/project/web/flags/dark-mode",
		"tenant/a/project/b/c",
		"tenant/acme/project/web/../x",
		"tenant/acme/project/web/",
		"tenant//project/web/x",
		"tenant/Acme/project/web/x",
		"tenant/acme/project/web/a b",
		"tenant/acme/project/web/café",
		"tenants/acme/project/web/x",
		pad("tenant/acme/project/web/", MaxKeyLen),
		pad("tenant/acme/project/web/", MaxKeyLen+1),
		"",
		"/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != EInvalid || e.Field != "key" {
				t.Fatalf("ParseKey(%q): error %v, want an *Error with code %q and field %q", s, err, EInvalid, "key")
			}
			return
		}
		if k.String() != s {
			t.Fatalf("ParseKey(%q).String() = %q", s, k.String())
		}
		if !strings.HasPrefix(s, k.Scope()+"/") {
			t.Fatalf("Scope() %q is not a prefix of %q", k.Scope(), s)
		}
		if len(s) > MaxKeyLen {
			t.Fatalf("accepted %q of %d bytes", s, len(s))
		}
		for _, c := range strings.Split(s, "/") {
			if c == "" || c == "." || c == ".." || strings.ToLower(c) != c || strings.ContainsAny(c, " \t\r\n") {
				t.Fatalf("accepted %q with component %q", s, c)
			}
		}
		if k2, err := ParseKey(k.String()); err != nil || k2 != k {
			t.Fatalf("ParseKey(String()) = %+v, %v; want %+v", k2, err, k)
		}
		if err := ValidatePrefix(k.Scope() + "/"); err != nil {
			t.Fatalf("the scope of %q is not a valid prefix: %v", s, err)
		}
	})
}

func TestScopeOf(t *testing.T) {
	for in, want := range map[string]string{
		"tenant/a/project/p/k/x": "tenant/a/project/p",
		"tenant/a/project/p/k":   "tenant/a/project/p",
		"tenant/a/project/p/":    "tenant/a/project/p",
		"tenant/a/project/p":     "tenant/a/project/p",
		"tenant/a":               "tenant/a",
		"":                       "",
	} {
		if got := ScopeOf(in); got != want {
			t.Errorf("ScopeOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// parseKeySplit is parseKey as it was before it walked the components in
// place: FuzzParseKeySplit holds the two equal.
func parseKeySplit(s string) (Key, error) {
	bad := func(format string, args ...any) (Key, error) {
		return Key{}, FieldErrorf(EInvalid, "key", format, args...)
	}
	if s == "" {
		return bad("key is empty")
	}
	if len(s) > MaxKeyLen {
		return bad("key is %d characters long; the limit is %d (hash longer identifiers)", len(s), MaxKeyLen)
	}
	if err := checkChars(s); err != "" {
		return bad("%s", err)
	}
	parts := strings.Split(s, "/")
	for i, p := range parts {
		if p == "" {
			return bad("component %d is empty (leading, trailing or doubled '/')", i+1)
		}
		if p == "." || p == ".." {
			return bad("component %d is %q; relative components are not allowed", i+1, p)
		}
	}
	if len(parts) < 5 || parts[0] != "tenant" || parts[2] != "project" {
		return bad("key must look like tenant/<tenant>/project/<project>/<path>")
	}
	return Key{Tenant: parts[1], Project: parts[3], Path: strings.Join(parts[4:], "/")}, nil
}

// FuzzParseKeySplit: ParseKey answers every string as the split-based
// parser did, the same key or the same error.
func FuzzParseKeySplit(f *testing.F) {
	for _, s := range []string{"tenant/acme/project/web/flags/dark-mode", "tenant/a/project/b/c", "tenant/a/project/b",
		"tenant/a/project/b/", "tenant/a/project//c", "/tenant/a/project/b/c", "tenant/./project/b/c", "tenant/a/project/b/../c",
		"tenant/a/projects/b/c", "tenants/a/project/b/c", "a/b/c/d/e", "tenant", "", "/", "//", "tenant/a/project/b/c/d/e/f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		wk, werr := parseKeySplit(s)
		if !sameKey(k, wk) || k.String() != wk.String() || k.Scope() != wk.Scope() || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("ParseKey(%q) = %+v, %v; the split parser %+v, %v", s, k, err, wk, werr)
		}
		if err != nil {
			var e, we *Error
			if !errors.As(err, &e) || !errors.As(werr, &we) || *e != *we {
				t.Fatalf("ParseKey(%q): error %#v, the split parser %#v", s, e, we)
			}
		}
	})
}

// sameKey compares the fields of keys (a Key from ParseKey also holds
// its string).
func sameKey(a, b Key) bool {
	return a.Tenant == b.Tenant && a.Project == b.Project && a.Path == b.Path
}
