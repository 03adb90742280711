package contract

import (
	"strings"
)

// MaxKeyLen is the longest key accepted, in bytes (keys are ASCII).
const MaxKeyLen = 128

// Key is a parsed, valid KV key: tenant/<tenant>/project/<project>/<path>.
// Keys come from ParseKey; their fields are not to be changed after.
type Key struct {
	Tenant  string
	Project string
	Path    string
	// full is the key as ParseKey read it, String's answer: String is
	// called several times per request (authorization, routing, the
	// overlay, logs, answers), and building it each time was 2.5 % of the
	// writer's CPU under figure 18a (docs/performance.md, p6-http). ""
	// in a Key built from its fields, whose String builds it.
	full string
}

// String returns the full key.
func (k Key) String() string {
	if k.full != "" {
		return k.full
	}
	return "tenant/" + k.Tenant + "/project/" + k.Project + "/" + k.Path
}

// Scope returns the key's scope, tenant/<t>/project/<p>: the unit of
// partitioning and of multi-key atomicity.
func (k Key) Scope() string {
	if k.full != "" { // its prefix: routing asks for it on every request
		return k.full[:len("tenant/")+len(k.Tenant)+len("/project/")+len(k.Project)]
	}
	return "tenant/" + k.Tenant + "/project/" + k.Project
}

// ScopeOf returns the tenant/<t>/project/<p> prefix of a key string
// without validating it, or the string itself when it has no fourth '/'.
func ScopeOf(key string) string {
	n := 0
	for i := range len(key) {
		if key[i] == '/' {
			if n++; n == 4 {
				return key[:i]
			}
		}
	}
	return key
}

// ParseKey validates s against the key rules and returns it parsed. The
// error is an *Error with code invalid and field "key", naming the rule
// broken.
func ParseKey(s string) (Key, error) {
	return parseKey(s, "key")
}

func parseKey(s, field string) (Key, error) {
	bad := func(format string, args ...any) (Key, error) {
		return Key{}, FieldErrorf(EInvalid, field, format, args...)
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
	// The components are walked in place, not split: every request
	// parses its key, and strings.Split and strings.Join cost two
	// allocations. The path is the rest of s from the fifth component
	// on; the checks and their order are those of a split.
	var first [4]string // the first four components
	n, start, path := 0, 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '/' {
			continue
		}
		p := s[start:i]
		if p == "" {
			return bad("component %d is empty (leading, trailing or doubled '/')", n+1)
		}
		if p == "." || p == ".." {
			return bad("component %d is %q; relative components are not allowed", n+1, p)
		}
		switch {
		case n < len(first):
			first[n] = p
		case n == len(first):
			path = start
		}
		n, start = n+1, i+1
	}
	if n < 5 || first[0] != "tenant" || first[2] != "project" {
		return bad("key must look like tenant/<tenant>/project/<project>/<path>")
	}
	if strings.IndexByte(s[:path], ':') >= 0 {
		return bad("':' is allowed in the path only, not in tenant or project")
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 && IsVerb(s[i+1:]) {
		return bad("the key ends in ':%s', a verb name (GET/POST /v1/kv/{key}:%s would be that verb); rename its last ':' segment", s[i+1:], s[i+1:])
	}
	return Key{Tenant: first[1], Project: first[3], Path: s[path:], full: s}, nil
}

// checkChars reports the first character outside lowercase a-z, 0-9, '-',
// '_', '.', '/', ':'. ':' is allowed in a key's path only (user:alice,
// Redis-style gbe:state:tasks), never in the tenant or project, and a
// key's last ':' segment is never a verb name (see SplitVerb).
func checkChars(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == '/', c == ':':
		case c >= 'A' && c <= 'Z':
			return "uppercase letters are not allowed (position " + itoa(i+1) + ")"
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return "whitespace is not allowed (position " + itoa(i+1) + ")"
		default:
			return "character at position " + itoa(i+1) + " is not one of a-z 0-9 - _ . / :"
		}
	}
	return ""
}

// ValidatePrefix checks a list prefix: the same characters as a key, at
// most MaxKeyLen long, and it must start with tenant/<t>/project/<p>/ so
// that a listing never crosses scopes.
func ValidatePrefix(p string) error {
	bad := func(format string, args ...any) error {
		return FieldErrorf(EInvalid, "prefix", format, args...)
	}
	if len(p) > MaxKeyLen {
		return bad("prefix is longer than %d characters", MaxKeyLen)
	}
	if err := checkChars(p); err != "" {
		return bad("%s", err)
	}
	parts := strings.Split(p, "/")
	if len(parts) < 5 || parts[0] != "tenant" || parts[1] == "" || parts[2] != "project" || parts[3] == "" {
		return bad("prefix must start with tenant/<tenant>/project/<project>/")
	}
	if strings.Contains(parts[1], ":") || strings.Contains(parts[3], ":") {
		return bad("':' is allowed in the path only, not in tenant or project")
	}
	for i, c := range parts[:len(parts)-1] {
		if c == "" || c == "." || c == ".." {
			return bad("component %d of the prefix is empty or relative", i+1)
		}
	}
	return nil
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	return string(b[n:])
}
