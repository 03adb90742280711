package stash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/eskv/eskv/contract"
)

// Key families of a table, under its project.
const (
	stashDir = "/stash/"
	nameDir  = "/stash-name/"
	scopeDir = "/stash-scope/"
	// globalScope is the scope of a global stash's name (a trail id is
	// never empty); its key component is "g", a trail's "t-<trail>".
	globalScope = ""
)

// hashedNameLen is the length of the name index key's component when the
// name is too long to spell: "h." and 32 hex digits (128 bits of SHA-256).
const hashedNameLen = 2 + 32

// idLen is the length of a UUID's text.
const idLen = 36

// maxProjectLen is the longest project whose every key fits eskv's key
// limit: the longest key a table writes is a link key or a hashed name
// key.
const maxProjectLen = contract.MaxKeyLen - max(len(scopeDir)+idLen, len(nameDir)+hashedNameLen)

// stashKey is the key of stash id.
func (t *Table) stashKey(id string) string { return t.project + stashDir + id }

// linkKey is the key of stash id's scoped_to link.
func (t *Table) linkKey(id string) string { return t.project + scopeDir + id }

// nameKey is the key that reserves name in scope (globalScope or a trail
// id). eskv keys take only a-z 0-9 - _ . /, so the name and trail are
// spelt escaped (see escape); when the key would be longer than eskv's
// limit it is "h." and a hash of scope and name instead. Both forms are
// one-to-one (the spelt form has two components after stash-name/, the
// hashed one), so two names share a key only if SHA-256 collides.
func (t *Table) nameKey(scope, name string) string {
	sc := "g"
	if scope != globalScope {
		sc = "t-" + escape(scope)
	}
	k := t.project + nameDir + sc + "/n-" + escape(name)
	if len(k) <= contract.MaxKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(sc + "\x00" + name))
	return t.project + nameDir + "h." + hex.EncodeToString(sum[:16])
}

// escape spells s with a-z 0-9 and '-' as themselves and every other
// byte as '_' and two hex digits, so it is one key component, never "."
// or "..", and distinct strings stay distinct.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "_%02x", c)
	}
	return b.String()
}

// newID is a fresh UUID v7 (time-ordered, R1.2), for stash and history
// ids alike.
func newID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("stash: generate a UUID v7: %w", err)
	}
	return u.String(), nil
}

// canonicalID checks a stash id given by the caller: empty is
// ErrInvalidID (R8.4, R11.4); anything but a UUID names no stash
// (ErrNotFound). The id is returned in the lowercase form keys use.
func canonicalID(id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("stash id is empty: %w", ErrInvalidID)
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", fmt.Errorf("stash id %q is not a UUID: %w", id, ErrNotFound)
	}
	return u.String(), nil
}
