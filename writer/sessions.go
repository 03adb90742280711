package writer

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// attachedOfSessions reads, in one more round trip when needed, the
// states of the keys attached to every live session the batch read
// (contract.SessionValue): a session's end (revoke, delete, expiry, a
// prefix write over it) deletes or releases them in its own decision,
// and an attach drops the attachments no longer the session's. A key
// attached to a session is in its partition (a session's keys lie in
// its project), so the overlay, the state cache and the projection hold
// it as any key of the batch. The keys a batch's own decisions attach
// later are in its states already: the attaching write wrote them.
func (p *partition) attachedOfSessions(ctx context.Context, states map[string]keystate.State) error {
	var sessions []keystate.State
	for _, st := range states {
		if st.Live && st.Entry.Semantics.Purpose == contract.PurposeSession {
			sessions = append(sessions, st)
		}
	}
	if len(sessions) == 0 {
		return nil
	}
	var q projection.Query
	p.mu.RLock()
	for _, st := range sessions {
		var v contract.SessionValue
		if err := json.Unmarshal(st.Entry.Value, &v); err != nil {
			continue // the decision refuses it wrong_type
		}
		for _, a := range v.Attached {
			if _, seen := states[a.Key]; seen {
				continue
			}
			if e, in := p.overlay[a.Key]; in {
				states[a.Key] = e.state
			} else if cached, in := p.cache.Get(a.Key); in {
				states[a.Key] = cached
			} else {
				states[a.Key] = keystate.State{} // asked below; never decided on unread
				q.Keys = append(q.Keys, a.Key)
			}
		}
	}
	p.mu.RUnlock()
	if len(q.Keys) == 0 {
		return nil
	}
	f, err := p.w.proj.Find(ctx, q)
	if err != nil {
		return err
	}
	maps.Copy(states, f.States)
	p.cacheRead(q.Keys, states)
	return nil
}
