package projection_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestUILogouts: a logout ends a token's sessions until the later of the
// session's own time and the database's clock, never moves back, is the
// token's alone, and rows older than keep are deleted at a later logout
// of another token.
func TestUILogouts(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	ctx := context.Background()
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	if until, err := s.UISessionsEnded(ctx, a); err != nil || !until.IsZero() {
		t.Fatalf("before any logout: %v, %v; want the zero time", until, err)
	}
	before := time.Now().Add(-time.Second)
	until, err := s.EndUISessions(ctx, a, time.Time{}, time.Hour)
	if err != nil || until.Before(before) {
		t.Fatalf("logout: %v, %v; want about now", until, err)
	}
	ahead := until.Add(time.Minute).Truncate(time.Microsecond) // a session dated by a clock ahead of the database's
	if got, err := s.EndUISessions(ctx, a, ahead, time.Hour); err != nil || !got.Equal(ahead) {
		t.Fatalf("logout of a session made at %v: ended until %v, %v", ahead, got, err)
	}
	if got, err := s.EndUISessions(ctx, a, time.Time{}, time.Hour); err != nil || !got.Equal(ahead) {
		t.Fatalf("a later logout moved the end back: %v, %v; want %v", got, err, ahead)
	}
	if got, err := s.UISessionsEnded(ctx, b); err != nil || !got.IsZero() {
		t.Fatalf("another token: %v, %v; want none ended", got, err)
	}
	// keep 0: a's row (ended until a minute from now) stays, b's own row
	// is never deleted by its own logout; a's goes once it is past.
	if _, err := s.EndUISessions(ctx, b, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.UISessionsEnded(ctx, a); !got.Equal(ahead) {
		t.Fatalf("a's logout, still ending sessions, deleted: %v", got)
	}
	if _, err := s.EndUISessions(ctx, b, time.Time{}, -2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.UISessionsEnded(ctx, a); !got.IsZero() {
		t.Fatalf("a's logout older than keep kept: %v", got)
	}
	if got, _ := s.UISessionsEnded(ctx, b); got.IsZero() {
		t.Fatal("b's own logout deleted by itself")
	}
}
