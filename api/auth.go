package api

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/eskv/eskv/events"
)

// Right is what a grant allows.
type Right string

// Rights.
const (
	Read  Right = "read"
	Write Right = "write"
)

// Grant gives rights on every key starting with Prefix.
type Grant struct {
	Prefix string  `json:"prefix"`
	Rights []Right `json:"rights"`
}

// TokenConfig is one bearer token and what it may do. Tokens files hold
// {"tokens": [TokenConfig...]}.
type TokenConfig struct {
	Token     string  `json:"token"`
	Principal string  `json:"principal"`
	Grants    []Grant `json:"grants"`
}

// Principal is an authenticated caller.
type Principal struct {
	Name   string
	Grants []Grant
}

// Allows reports whether the principal has right r on every key starting
// with prefix (a full key is its own prefix).
func (p *Principal) Allows(r Right, prefix string) bool {
	for _, g := range p.Grants {
		if !strings.HasPrefix(prefix, g.Prefix) {
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

// Tokens authenticates bearer tokens. Only their SHA-256 is kept.
type Tokens struct {
	byHash map[[32]byte]*Principal
}

// NewTokens builds the token table and rejects malformed entries.
func NewTokens(cfgs []TokenConfig) (*Tokens, error) {
	t := &Tokens{byHash: make(map[[32]byte]*Principal, len(cfgs))}
	for i, c := range cfgs {
		if len(c.Token) < 16 {
			return nil, fmt.Errorf("token %d (%s): tokens must be at least 16 characters", i, c.Principal)
		}
		if c.Principal == "" || !utf8.ValidString(c.Principal) || strings.ContainsRune(c.Principal, 0) || len(c.Principal) > 128 {
			return nil, fmt.Errorf("token %d: principal is required: 1 to 128 characters of valid UTF-8 without NUL", i)
		}
		for _, g := range c.Grants {
			for _, r := range g.Rights {
				if r != Read && r != Write {
					return nil, fmt.Errorf("token %d (%s): unknown right %q (read, write)", i, c.Principal, r)
				}
			}
		}
		h := sha256.Sum256([]byte(c.Token))
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("token %d (%s): duplicate token", i, c.Principal)
		}
		t.byHash[h] = &Principal{Name: c.Principal, Grants: c.Grants}
	}
	return t, nil
}

// LoadTokens reads a tokens file ({"tokens": [...]}).
func LoadTokens(path string) ([]TokenConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	var f struct {
		Tokens []TokenConfig `json:"tokens"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return f.Tokens, nil
}

// DevToken is a token with read and write rights on every tenant, for the
// local stack.
func DevToken(token string) TokenConfig {
	return TokenConfig{Token: token, Principal: "dev", Grants: []Grant{{Prefix: "tenant/", Rights: []Right{Read, Write}}}}
}

// authenticate returns the principal of an Authorization header value.
func (t *Tokens) authenticate(header string) (*Principal, error) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" {
		return nil, events.Errorf(events.EUnauthenticated, "missing bearer token: send Authorization: Bearer <token>")
	}
	p, ok := t.byHash[sha256.Sum256([]byte(tok))]
	if !ok {
		return nil, events.Errorf(events.EUnauthenticated, "unknown bearer token")
	}
	return p, nil
}
