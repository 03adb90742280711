package projection

import (
	"context"

	"github.com/eskv/eskv/contract"
)

// VersionOffset returns where a watch of key from its version (GET
// /v1/watch?key=&fromVersion=) starts reading partition p of topic: the
// offset of that version's event when kv_history holds it, else the
// projector's next offset of p (the version is not projected yet, so it
// is at or after it). One statement reads both, so a version projected
// meanwhile is not skipped. A version older than the oldest kv_history
// keeps of the key (retention) is cursor_expired.
func (s *Store) VersionOffset(ctx context.Context, topic string, p int32, key string, version int64) (int64, error) {
	var oldest, at, next *int64
	err := s.pool.QueryRow(ctx, `SELECT
    (SELECT min(version) FROM kv_history WHERE key = $1),
    (SELECT kafka_offset FROM kv_history WHERE key = $1 AND version = $2),
    (SELECT next_offset FROM projector_offsets WHERE topic = $3 AND partition = $4)`,
		key, version, topic, p).Scan(&oldest, &at, &next)
	if err != nil {
		return 0, translate("version offset", err)
	}
	switch {
	case at != nil:
		return *at, nil
	case oldest != nil && *oldest > version:
		return 0, contract.FieldErrorf(contract.ECursorExpired, "fromVersion",
			"the history of the key starts at version %d now; read the key and watch from now", *oldest)
	case next != nil:
		return *next, nil
	}
	return 0, nil
}
