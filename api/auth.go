package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/eskv/eskv/contract"
)

// Right is what a grant allows.
type Right string

// Rights.
const (
	Read  Right = "read"
	Write Right = "write"
)

// Grant gives rights on a key path and everything below it. The path is
// matched by whole components: "tenant/acme" (or "tenant/acme/") covers
// tenant/acme/project/x/k but not tenant/acmex/…. "tenant/" covers every
// key; an empty prefix is refused.
type Grant struct {
	Prefix string  `json:"prefix"`
	Rights []Right `json:"rights"`
}

// TokenConfig is one bearer token and what it may do. Tokens files hold
// {"tokens": [TokenConfig...]}. ExpiresAt, when set, ends the token: from
// that instant it is answered 401.
type TokenConfig struct {
	Token     string     `json:"token"`
	Principal string     `json:"principal"`
	Grants    []Grant    `json:"grants"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// DevPrincipal is the principal of the --dev-token.
const DevPrincipal = "dev"

// UnknownPrincipal labels denials of callers no token identifies (in the
// denial counter and log). The eskv- prefix is reserved, so no configured
// principal can take it.
const UnknownPrincipal = "eskv-unknown"

// reserved reports whether name is one the server uses itself (the dev
// token's principal, the TTL sweeper's eskv-sweeper, and every eskv- name).
func reserved(name string) bool {
	return name == DevPrincipal || strings.HasPrefix(name, "eskv-")
}

// Principal is an authenticated caller.
type Principal struct {
	Name   string
	Grants []Grant
}

// Allows reports whether the principal has right r on key: a grant's
// path covers the key itself and every key below it.
func (p *Principal) Allows(r Right, key string) bool {
	return p.allows(r, func(path string) bool { return key == path || strings.HasPrefix(key, path+"/") })
}

// AllowsPrefix reports whether the principal has right r on every key
// starting with prefix, a listing's string prefix: a grant on path covers
// it only when prefix starts with path + "/", so "tenant/acme" never lets
// a listing of "tenant/acm" or "tenant/acmex" through.
func (p *Principal) AllowsPrefix(r Right, prefix string) bool {
	return p.allows(r, func(path string) bool { return strings.HasPrefix(prefix, path+"/") })
}

func (p *Principal) allows(r Right, covers func(path string) bool) bool {
	for _, g := range p.Grants {
		if !covers(strings.TrimSuffix(g.Prefix, "/")) {
			continue
		}
		for _, gr := range g.Rights {
			if gr == r {
				return true
			}
		}
	}
	return false
}

// credential is what a token stands for.
type credential struct {
	principal *Principal
	expiresAt time.Time // zero: never
}

// Tokens authenticates bearer tokens. Only their SHA-256 is kept. Its
// table can be replaced while requests are served (Replace, for a reloaded
// tokens file): each request is checked against one table, the old or the
// new, never a mix.
type Tokens struct {
	table atomic.Pointer[tokenTable]
}

// tokenTable is one immutable generation of the tokens.
type tokenTable struct {
	byHash map[[32]byte]credential
	// names lists the principals, for the bounded denial label space.
	names map[string]bool
}

// NewTokens builds the token table and rejects malformed entries, naming
// the entry: short or non-token68 tokens, bad principal names, grants that
// are empty, not a key path or repeated, rights that are empty, unknown or
// repeated, and duplicate tokens or principals.
func NewTokens(cfgs []TokenConfig) (*Tokens, error) {
	t := &tokenTable{byHash: make(map[[32]byte]credential, len(cfgs)), names: make(map[string]bool, len(cfgs))}
	principals := t.names
	for i, c := range cfgs {
		if err := checkEntry(c); err != nil {
			return nil, fmt.Errorf("token %d (%s): %w", i, c.Principal, err)
		}
		if principals[c.Principal] {
			return nil, fmt.Errorf("token %d (%s): duplicate principal: each principal has one token", i, c.Principal)
		}
		principals[c.Principal] = true
		h := sha256.Sum256([]byte(c.Token))
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("token %d (%s): duplicate token", i, c.Principal)
		}
		cr := credential{principal: &Principal{Name: c.Principal, Grants: c.Grants}}
		if c.ExpiresAt != nil {
			cr.expiresAt = *c.ExpiresAt
		}
		t.byHash[h] = cr
	}
	tt := &Tokens{}
	tt.table.Store(t)
	return tt, nil
}

// Replace makes the tokens of n this table's, atomically: requests
// authenticated from now on see n's tokens only.
func (t *Tokens) Replace(n *Tokens) { t.table.Store(n.table.Load()) }

// Len returns the number of tokens.
func (t *Tokens) Len() int { return len(t.table.Load().byHash) }

// knows reports whether principal is named by the current tokens.
func (t *Tokens) knows(principal string) bool { return t.table.Load().names[principal] }

// checkEntry checks one entry on its own.
func checkEntry(c TokenConfig) error {
	if len(c.Token) < 16 || !isToken68(c.Token) {
		return errors.New("tokens must be at least 16 characters of A-Z a-z 0-9 - . _ ~ + / (then = padding)")
	}
	if c.Principal == "" || !utf8.ValidString(c.Principal) || strings.ContainsRune(c.Principal, 0) || len(c.Principal) > 128 {
		return errors.New("principal is required: 1 to 128 characters of valid UTF-8 without NUL")
	}
	if len(c.Grants) == 0 {
		return errors.New("grants are empty: a token needs at least one grant")
	}
	if c.ExpiresAt != nil && c.ExpiresAt.IsZero() {
		return errors.New("expiresAt is the zero time: omit it for a token that does not expire")
	}
	seen := make(map[string]bool, len(c.Grants))
	for j, g := range c.Grants {
		if err := checkGrant(g); err != nil {
			return fmt.Errorf("grant %d (%q): %w", j, g.Prefix, err)
		}
		path := strings.TrimSuffix(g.Prefix, "/")
		if seen[path] {
			return fmt.Errorf("grant %d (%q): the same path is granted twice: merge the rights into one grant", j, g.Prefix)
		}
		seen[path] = true
	}
	return nil
}

// checkGrant checks a grant's path and rights.
func checkGrant(g Grant) error {
	path := strings.TrimSuffix(g.Prefix, "/")
	if path == "" {
		return errors.New(`prefix is empty: name a key path by whole components, such as "tenant/acme/"; "tenant/" grants every tenant`)
	}
	if len(path) > contract.MaxKeyLen {
		return fmt.Errorf("prefix is longer than %d characters", contract.MaxKeyLen)
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if p == "" || p == "." || p == ".." || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
			return fmt.Errorf("component %d of the prefix is empty, relative or not of the characters a-z 0-9 - _ . (as in keys)", i+1)
		}
	}
	if parts[0] != "tenant" || len(parts) > 2 && parts[2] != "project" {
		return errors.New("prefix must be a key path: tenant/<tenant>/project/<project>/<path>, cut after any component")
	}
	if len(g.Rights) == 0 {
		return errors.New("rights are empty (read, write)")
	}
	for k, r := range g.Rights {
		if r != Read && r != Write {
			return fmt.Errorf("unknown right %q (read, write)", r)
		}
		for _, before := range g.Rights[:k] {
			if before == r {
				return fmt.Errorf("right %q is listed twice", r)
			}
		}
	}
	return nil
}

// isToken68 reports whether s is an RFC 7235 token68.
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	return body != "" && strings.Trim(body, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/") == ""
}

// LoadTokens reads a tokens file ({"tokens": [...]}): see ParseTokens.
func LoadTokens(path string) ([]TokenConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	cfgs, err := ParseTokens(b)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return cfgs, nil
}

// ParseTokens decodes a tokens file strictly: unknown fields (at the top
// or in an entry) and reserved principal names are errors naming the
// entry. NewTokens checks the rest.
func ParseTokens(b []byte) ([]TokenConfig, error) {
	var f struct {
		Tokens []json.RawMessage `json:"tokens"`
	}
	if err := strictJSON(b, &f); err != nil {
		return nil, err
	}
	cfgs := make([]TokenConfig, len(f.Tokens))
	for i, raw := range f.Tokens {
		if err := strictJSON(raw, &cfgs[i]); err != nil {
			return nil, fmt.Errorf("token %d (%s): %w", i, cfgs[i].Principal, err)
		}
		if reserved(cfgs[i].Principal) {
			return nil, fmt.Errorf("token %d (%s): principal name is reserved (dev, and every eskv- name)", i, cfgs[i].Principal)
		}
	}
	return cfgs, nil
}

// strictJSON decodes one JSON object into v with no unknown fields.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// DevToken is a token with read and write rights on every tenant, for the
// local stack.
func DevToken(token string) TokenConfig {
	return TokenConfig{Token: token, Principal: DevPrincipal, Grants: []Grant{{Prefix: "tenant/", Rights: []Right{Read, Write}}}}
}

// Reasons a request is denied: the reason label of
// eskv_http_denied_total and of the denial log.
const (
	reasonMissing   = "missing_token"
	reasonMalformed = "malformed_authorization"
	reasonMultiple  = "multiple_authorization"
	reasonUnknown   = "unknown_token"
	reasonExpired   = "expired_token"
	reasonForbidden = "forbidden"
)

// authError is a failed authentication: the answer, why, and the
// principal when the token named one (an expired token does).
type authError struct {
	err       error
	reason    string
	principal *Principal
}

// authenticate returns the principal of a request's Authorization header.
// The scheme is matched case-insensitively (RFC 7235); more than one
// Authorization header is refused.
func (t *Tokens) authenticate(h http.Header, now time.Time) (*Principal, *authError) {
	vals := h.Values("Authorization")
	switch {
	case len(vals) > 1:
		return nil, &authError{reason: reasonMultiple, err: contract.FieldErrorf(contract.EInvalid, "Authorization",
			"the request has %d Authorization headers: send exactly one", len(vals))}
	case len(vals) == 0 || strings.TrimSpace(vals[0]) == "":
		return nil, &authError{reason: reasonMissing, err: contract.Errorf(contract.EUnauthenticated,
			"missing bearer token: send Authorization: Bearer <token>")}
	}
	scheme, tok, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
	tok = strings.TrimLeft(tok, " ")
	if !strings.EqualFold(scheme, "Bearer") || !isToken68(tok) {
		return nil, &authError{reason: reasonMalformed, err: contract.Errorf(contract.EUnauthenticated,
			"malformed Authorization header: send Authorization: Bearer <token>")}
	}
	cr, ok := t.table.Load().byHash[sha256.Sum256([]byte(tok))]
	if !ok {
		return nil, &authError{reason: reasonUnknown, err: contract.Errorf(contract.EUnauthenticated, "unknown bearer token")}
	}
	if !cr.expiresAt.IsZero() && !now.Before(cr.expiresAt) {
		return nil, &authError{reason: reasonExpired, principal: cr.principal, err: contract.Errorf(contract.EUnauthenticated,
			"bearer token expired at %s: ask for a new one", cr.expiresAt.UTC().Format(time.RFC3339))}
	}
	return cr.principal, nil
}
