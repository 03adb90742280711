package client

import (
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// canonical is RFC 9562's text form of a version-7, variant-10 UUID.
var canonical = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestUUIDv7(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 123_456_789, time.UTC)
	id := uuidV7(now)
	if !canonical.MatchString(id) {
		t.Fatalf("%q is not a canonical UUIDv7", id)
	}
	ms, err := strconv.ParseInt(strings.ReplaceAll(id[:13], "-", ""), 16, 64)
	if err != nil || ms != now.UnixMilli() {
		t.Fatalf("timestamp field of %q is %d (%v), want %d", id, ms, err, now.UnixMilli())
	}
	if later := uuidV7(now.Add(time.Millisecond)); later <= id {
		t.Fatalf("an id of a later millisecond sorts first: %q <= %q", later, id)
	}
}

func TestNewRequestIDUnique(t *testing.T) {
	seen := make(map[string]bool)
	for range 10000 {
		id := newRequestID()
		if !canonical.MatchString(id) || seen[id] {
			t.Fatalf("%q: not canonical, or drawn twice", id)
		}
		if _, err := hex.DecodeString(strings.ReplaceAll(id, "-", "")); err != nil {
			t.Fatal(err)
		}
		seen[id] = true
	}
}
