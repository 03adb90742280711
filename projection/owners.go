package projection

import (
	"context"
	"time"
)

// Owner is the writer that owns a partition of kv.changes.
type Owner struct {
	Partition int32
	ID        string // the writer's instance id
	Addr      string // base URL the writer answers on
	Epoch     int64
	UpdatedAt time.Time
}

// SetOwner records that writer id, answering at addr, owns partition p
// since fencing it at epoch, unless the partition's record holds a newer
// epoch: a writer that fenced the partition, stalled (a pause, a slow
// network) and lost it meanwhile must not, once it runs again, record
// itself over the owner that fenced it out, whose requests would then
// be forwarded to a writer that no longer owns the partition. Epochs
// grow with each owner (InitProducerID's epoch of the partition's fence,
// writer/fence.go), up to 32767: when Kafka starts a fence's id over at
// epoch 0, an epoch more than half that range below the recorded one is
// newer, not older.
func (s *Store) SetOwner(ctx context.Context, p int32, id, addr string, epoch int64) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO writer_owners AS o (partition, owner, addr, epoch, updated_at) VALUES ($1, $2, $3, $4, now())
ON CONFLICT (partition) DO UPDATE SET owner = excluded.owner, addr = excluded.addr, epoch = excluded.epoch, updated_at = now()
WHERE excluded.epoch >= o.epoch OR o.epoch - excluded.epoch > $5`,
		p, id, addr, epoch, epochWrap)
	return translate("set owner", err)
}

// epochWrap is how far below a recorded epoch one is newer: the fence's
// epoch started over (SetOwner).
const epochWrap = 16384

// NewerOwner reports whether a partition's owner record at epoch
// recorded is newer than an owner at epoch, so that SetOwner keeps it.
func NewerOwner(recorded, epoch int64) bool {
	return recorded > epoch && recorded-epoch <= epochWrap
}

// Owners returns the recorded owner of each partition.
func (s *Store) Owners(ctx context.Context) (map[int32]Owner, error) {
	rows, err := s.pool.Query(ctx, `SELECT partition, owner, addr, epoch, updated_at FROM writer_owners`)
	if err != nil {
		return nil, translate("owners", err)
	}
	defer rows.Close()
	out := make(map[int32]Owner)
	for rows.Next() {
		var o Owner
		if err := rows.Scan(&o.Partition, &o.ID, &o.Addr, &o.Epoch, &o.UpdatedAt); err != nil {
			return nil, translate("owners", err)
		}
		out[o.Partition] = o
	}
	return out, translate("owners", rows.Err())
}
