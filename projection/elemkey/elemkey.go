// Package elemkey holds the kv_elements members of lists and queues:
// fixed-width encodings whose byte order (COLLATE "C") is the
// collection's order, so a list's range or a queue's next item is one
// range scan of the projection. They are the store's encodings, not the
// API's: a client sees a receipt only as the opaque string a qpop
// answered. The write rules (package decide) decide with them and the
// projection stores them; the package imports the standard library only,
// so the rules need no Postgres driver to use them.
package elemkey

import (
	"fmt"
	"strconv"
	"strings"
)

// ListPosition encodes position p as a kv_elements member: 20 decimal
// digits of p+2^63, so byte order (COLLATE "C") is numeric order for
// every int64, negative positions (left of the first push) included.
func ListPosition(p int64) string {
	return fmt.Sprintf("%020d", uint64(p)^(1<<63))
}

// parseListPosition is the inverse of ListPosition.
func parseListPosition(m string) (int64, error) {
	if len(m) != 20 {
		return 0, fmt.Errorf("list position %q is not 20 digits", m)
	}
	u, err := strconv.ParseUint(m, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("list position %q: %w", m, err)
	}
	return int64(u ^ (1 << 63)), nil
}

// ListRange resolves a Redis range start..stop (inclusive; a negative
// index counts from the end, -1 the last) on a list of size elements to
// the offsets [from, to] from its head; ok is false when the range is
// empty.
func ListRange(start, stop, size int64) (from, to int64, ok bool) {
	if start < 0 {
		start += size
	}
	if stop < 0 {
		stop += size
	}
	start = max(start, 0)
	stop = min(stop, size-1)
	if start > stop || start >= size {
		return 0, 0, false
	}
	return start, stop, true
}

// QueueMember is the kv_elements member of the item pushed at version
// version with priority prio into the queue incarnation since: fixed-width
// hex of since, prio+2^63 and version, so byte order (COLLATE "C") is
// (incarnation, priority, FIFO) and an incarnation's items are the range
// QueueRange(since).
func QueueMember(since, prio, version int64) string {
	return fmt.Sprintf("%016x.%016x.%016x", uint64(since), uint64(prio)^(1<<63), uint64(version))
}

// QueueRange is the member range [from, to) of the items of the queue
// incarnation since.
func QueueRange(since int64) (from, to string) {
	p := fmt.Sprintf("%016x", uint64(since))
	return p + ".", p + "/" // '/' follows '.'
}

// ParseQueueMember is the inverse of QueueMember.
func ParseQueueMember(m string) (since, prio, version int64, err error) {
	parts := strings.Split(m, ".")
	if len(m) != 50 || len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("queue item %q is not since.priority.version", m)
	}
	var u [3]uint64
	for i, p := range parts {
		if len(p) != 16 || strings.ToLower(p) != p {
			return 0, 0, 0, fmt.Errorf("queue item %q is not since.priority.version", m)
		}
		if u[i], err = strconv.ParseUint(p, 16, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("queue item %q: %w", m, err)
		}
	}
	since, prio, version = int64(u[0]), int64(u[1]^(1<<63)), int64(u[2])
	if since < 1 || version < since {
		return 0, 0, 0, fmt.Errorf("queue item %q: version before since", m)
	}
	return since, prio, version, nil
}
