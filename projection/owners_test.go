package projection_test

import (
	"context"
	"testing"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestSetOwnerKeepsNewerEpoch: a partition's owner record moves to a
// newer epoch, never back to an older one (a writer that stalled after
// fencing and lost the partition meanwhile records itself late), except
// across the fence's epoch starting over at 0 after 32767.
func TestSetOwnerKeepsNewerEpoch(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	ctx := context.Background()
	for i, step := range []struct {
		id        string
		epoch     int64
		wantID    string
		wantEpoch int64
	}{
		{"a", 7, "a", 7},
		{"b", 4, "a", 7}, // stale: kept out
		{"a", 7, "a", 7}, // the same again
		{"b", 8, "b", 8},
		{"c", 32760, "c", 32760},
		{"d", 32001, "c", 32760}, // stale
		{"d", 3, "d", 3},         // the epoch started over
	} {
		if err := s.SetOwner(ctx, 5, step.id, "http://"+step.id, step.epoch); err != nil {
			t.Fatal(err)
		}
		owners, err := s.Owners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if kept := projection.NewerOwner(step.wantEpoch, step.epoch); kept != (step.wantID != step.id) {
			t.Errorf("step %d: NewerOwner(%d, %d) = %v, but SetOwner kept %s", i, step.wantEpoch, step.epoch, kept, step.wantID)
		}
		if o := owners[5]; o.ID != step.wantID || o.Epoch != step.wantEpoch || o.Addr != "http://"+step.wantID {
			t.Fatalf("step %d: after %s at epoch %d the record is %+v; want %s at %d", i, step.id, step.epoch, o, step.wantID, step.wantEpoch)
		}
	}
}
