package api

import (
	"context"
	"sync"
	"time"
)

// UILogouts records the status page's logouts where the writers that
// share a UI key read them (cmd/writer: the projection's database). A
// logout ends every session of the token it was made with that was made
// until then, on every writer: sessions are remembered by token, not one
// by one, so the record of them is bounded by the tokens configured
// however often anyone logs in and out. Sessions made later are
// unaffected.
type UILogouts interface {
	// EndUISessions ends the sessions of the token reference ref made
	// until at, or until now by the store's clock if later, and returns
	// the time they are ended until. Records older than keep may be
	// forgotten: every session they end has reached its end.
	EndUISessions(ctx context.Context, ref []byte, at time.Time, keep time.Duration) (time.Time, error)
	// UISessionsEnded returns the time the sessions of ref are ended
	// until (the zero time when none are).
	UISessionsEnded(ctx context.Context, ref []byte) (time.Time, error)
}

// uiLogoutKeep is how long, beyond the session TTL, a logout is kept:
// the writers of a deployment should share ESKV_UI_SESSION_TTL, this
// covers them differing by up to a day.
const uiLogoutKeep = 24 * time.Hour

// memLogouts keeps the logouts in this process's memory (Config has no
// UILogouts): a logout then ends the token's sessions on this writer
// only. Its entries are the tokens logged out of in the last
// ttl+uiLogoutKeep, pruned at each logout.
type memLogouts struct {
	mu    sync.Mutex
	ended map[[32]byte]time.Time
}

func (m *memLogouts) EndUISessions(_ context.Context, ref []byte, at time.Time, keep time.Duration) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for r, t := range m.ended {
		if now.Sub(t) > keep {
			delete(m.ended, r)
		}
	}
	until := latest(now, latest(at, m.ended[[32]byte(ref)]))
	m.ended[[32]byte(ref)] = until
	return until, nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (m *memLogouts) UISessionsEnded(_ context.Context, ref []byte) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ended[[32]byte(ref)], nil
}

// uiLoggedOut reports whether a logout ended the session sc; the error
// is the store's (events.Error: 503 when the database is unreachable).
func (s *Server) uiLoggedOut(ctx context.Context, sc uiSessionCookie) (bool, error) {
	until, err := s.uiLogouts.UISessionsEnded(ctx, sc.ref[:])
	if err != nil {
		return false, err
	}
	return !sc.issued.After(until), nil
}

// uiIssued is when a session of ref made now is said to be made: after
// the token's last logout, even when the store's clock, which dated it,
// is ahead of ours. The store failing, it is now (the session is checked
// against the store at each use anyway).
func (s *Server) uiIssued(ctx context.Context, ref [32]byte, now time.Time) time.Time {
	until, err := s.uiLogouts.UISessionsEnded(ctx, ref[:])
	if err != nil || now.After(until) {
		return now
	}
	return until.Add(time.Microsecond)
}

// uiEndSessions records the logout of session sc.
func (s *Server) uiEndSessions(ctx context.Context, sc uiSessionCookie) error {
	_, err := s.uiLogouts.EndUISessions(ctx, sc.ref[:], sc.issued, s.ui.ttl+uiLogoutKeep)
	return err
}
