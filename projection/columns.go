package projection

import (
	"encoding/json"
	"slices"

	"github.com/eskv/eskv/contract"
)

// semanticsMemo encodes the semantics column of a batch's kv_entries rows
// (entryColumns.add). The rows of a batch mostly share their semantics
// (figure 18a: all 64), and json.Marshal of each cost three allocations
// and a reflective walk per event (BenchmarkApplyBatchBuild, 2026-11-24),
// so it keeps the last one encoded and gives its text again while the
// semantics are equal.
type semanticsMemo struct {
	last contract.Semantics
	text string
	ok   bool
}

// encode returns s as json.Marshal writes it.
func (m *semanticsMemo) encode(s *contract.Semantics) (string, error) {
	if m.ok && m.last.Purpose == s.Purpose && m.last.Producer == s.Producer && m.last.TTLSeconds == s.TTLSeconds &&
		slices.Equal(m.last.ConsumerHints, s.ConsumerHints) && (m.last.ConsumerHints == nil) == (s.ConsumerHints == nil) {
		return m.text, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	m.last, m.text, m.ok = *s, string(b), true
	m.last.ConsumerHints = slices.Clone(s.ConsumerHints)
	return m.text, nil
}

// valueOf returns a pointer to v for the value column, from a slab of
// the batch's values instead of an allocation per row. A pointer into
// a slab that append has since moved from still points at v.
func (c *entryColumns) valueOf(v string) *string {
	c.values = append(c.values, v)
	return &c.values[len(c.values)-1]
}
