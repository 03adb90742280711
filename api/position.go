package api

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/writer"
)

// PositionHeader carries, on every read of a key or of the projection
// (GET of a key, listings, scans, history, members, ranges, peeks), the
// position of the key's partition the answer reflects, as a watch cursor
// (p<partition>.o<offset>): the answer holds every event of the partition
// at an offset up to it and none after, so GET /v1/watch?after=<it>
// delivers exactly the changes after the read. Reads that answer JSON
// objects of their own also carry it as their position field.
const PositionHeader = "ESKV-Position"

// setPosition tells the answer's position in its header; nil (a Lister
// that reads no snapshot, as test doubles are) tells none.
func setPosition(c echo.Context, at *contract.Cursor) {
	if at != nil {
		c.Response().Header().Set(PositionHeader, at.String())
	}
}

// positionText is at's text for an answer's position field ("" for nil).
func positionText(at *contract.Cursor) string {
	if at == nil {
		return ""
	}
	return at.String()
}

// snapshotter is a Lister that reads one snapshot of the projection and
// tells the position it reflects (projection.Store).
type snapshotter interface {
	Snapshot(ctx context.Context, topic string, partition int32, read func(*projection.Store) error) (contract.Cursor, error)
}

// readProjected runs read, the reads of the projection of one answer, in
// one snapshot of it (after Writer.AwaitProjected said where) and returns
// the position that snapshot reflects (projection.Store.Snapshot): the
// projector's stored offset read in the same snapshot as the rows, so
// exact, not merely at least what AwaitProjected waited for. A Lister
// that is no snapshotter reads without a snapshot and tells no position.
func (s *Server) readProjected(ctx context.Context, at writer.Projected, read func(Lister) error) (*contract.Cursor, error) {
	sn, ok := s.list.(snapshotter)
	if !ok {
		return nil, read(s.list)
	}
	pos, err := sn.Snapshot(ctx, at.Topic, at.Partition, func(v *projection.Store) error { return read(v) })
	if err != nil {
		return nil, err
	}
	return &pos, nil
}
