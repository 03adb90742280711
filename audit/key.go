package audit

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// MinKeyBytes is the shortest audit key accepted.
const MinKeyBytes = 32

// InsecureDevKeyID is the id of the publicly known key behind
// InsecureDevKey. Rows hashed with it protect nothing.
const InsecureDevKeyID = "insecure-dev"

// HMACKey is an audit key: the HMAC-SHA256 secret of every hash in a row and
// the id stored beside the hashes, so that rows survive a key rotation.
type HMACKey struct {
	ID     string
	Secret []byte
}

// Keyring is the current key, which hashes new rows, and the keys of
// earlier rotations, which verification needs for older rows.
type Keyring struct {
	Current HMACKey
	byID    map[string]HMACKey
}

// NewKeyring returns a keyring with current and older keys. Two keys with
// the same id are an error unless they are equal.
func NewKeyring(current HMACKey, older ...HMACKey) (*Keyring, error) {
	kr := &Keyring{Current: current, byID: make(map[string]HMACKey, 1+len(older))}
	for _, k := range append([]HMACKey{current}, older...) {
		if err := k.check(); err != nil {
			return nil, err
		}
		if prev, ok := kr.byID[k.ID]; ok && string(prev.Secret) != string(k.Secret) {
			return nil, fmt.Errorf("audit key id %q is given twice with different keys", k.ID)
		}
		kr.byID[k.ID] = k
	}
	return kr, nil
}

// Lookup returns the key with id.
func (kr *Keyring) Lookup(id string) (HMACKey, bool) {
	k, ok := kr.byID[id]
	return k, ok
}

// IDs returns the ids of every key in the keyring, current first.
func (kr *Keyring) IDs() []string {
	ids := []string{kr.Current.ID}
	for id := range kr.byID {
		if id != kr.Current.ID {
			ids = append(ids, id)
		}
	}
	return ids
}

func (k HMACKey) check() error {
	switch {
	case k.ID == "":
		return errors.New("audit key has an empty id")
	case strings.ContainsAny(k.ID, ":, \t\r\n"):
		return fmt.Errorf("audit key id %q contains ':', ',' or whitespace", k.ID)
	case len(k.Secret) < MinKeyBytes:
		return fmt.Errorf("audit key %q is %d bytes; at least %d are needed (generate one with: head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n')", k.ID, len(k.Secret), MinKeyBytes)
	}
	return nil
}

// ParseSecret decodes key material given as hex (tried first) or base64
// (standard or URL alphabet, padded or not).
func ParseSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("audit key is empty")
	}
	if b, err := hex.DecodeString(s); err == nil {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("audit key is neither hex nor base64")
}

// FingerprintID returns the default id of a secret: "fp-" and the first
// 12 hex digits of its SHA-256. It names the key without revealing
// anything of it.
func FingerprintID(secret []byte) string {
	sum := sha256.Sum256(secret)
	return "fp-" + hex.EncodeToString(sum[:6])
}

// ParseKey parses "id:material" or bare "material" (its id is then
// FingerprintID of it), material in hex or base64.
func ParseKey(s string) (HMACKey, error) {
	id, material, found := strings.Cut(strings.TrimSpace(s), ":")
	if !found {
		id, material = "", id
	}
	secret, err := ParseSecret(material)
	if err != nil {
		return HMACKey{}, err
	}
	if id == "" {
		id = FingerprintID(secret)
	}
	k := HMACKey{ID: id, Secret: secret}
	return k, k.check()
}

// ParseKeys parses a comma- or newline-separated list of keys in the form
// of ParseKey; blank entries and lines starting with # are skipped.
func ParseKeys(s string) ([]HMACKey, error) {
	var keys []HMACKey
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(s, ",", "\n")))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := ParseKey(line)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", n, err)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// LoadKeyFile reads a key file: one key per line in the form of ParseKey,
// the current key first and the keys of earlier rotations after it.
func LoadKeyFile(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("key file %s holds no key", path)
	}
	kr, err := NewKeyring(keys[0], keys[1:]...)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return kr, nil
}

// InsecureDevKey is a publicly known key for local experiments only: with
// it, anyone can brute-force low-entropy values from the hashes.
func InsecureDevKey() HMACKey {
	sum := sha256.Sum256([]byte("eskv insecure development audit key; never use it for real data"))
	return HMACKey{ID: InsecureDevKeyID, Secret: sum[:]}
}

// Others returns the keys of earlier rotations.
func (kr *Keyring) Others() []HMACKey {
	var ks []HMACKey
	for id, k := range kr.byID {
		if id != kr.Current.ID {
			ks = append(ks, k)
		}
	}
	return ks
}
