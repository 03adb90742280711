package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// answerEntry answers an entry as c.JSON would, byte for byte, without
// reflection: every PUT and GET answers one, and encoding/json's
// reflection over Entry and Semantics was about 5 % of the writer's CPU
// under figure 18's load (docs/performance.md). ?pretty, and times
// encoding/json refuses (years outside 0–9999), go through c.JSON.
func answerEntry(c echo.Context, e *contract.Entry) error {
	if _, pretty := queryOf(c)["pretty"]; pretty || c.Echo().Debug {
		return c.JSON(http.StatusOK, e)
	}
	b, ok := appendEntry(make([]byte, 0, 256+len(e.Value)), e)
	if !ok {
		return c.JSON(http.StatusOK, e)
	}
	return c.JSONBlob(http.StatusOK, b)
}

// appendEntry appends e's JSON as jsonSerializer writes it (field order
// and omitempty of contract.Entry, no HTML escaping, a final newline);
// false when e holds what only encoding/json can report (an invalid
// value, a time it cannot encode).
func appendEntry(b []byte, e *contract.Entry) ([]byte, bool) {
	b = append(b, `{"key":`...)
	b = codec.AppendJSONString(b, e.Key)
	b = append(b, `,"value":`...)
	if e.Value == nil {
		b = append(b, "null"...)
	} else {
		// Values from the projection come back from jsonb with spaces:
		// compacted as encoding/json compacts a RawMessage.
		var err error
		if b, err = codec.AppendCompact(b, e.Value); err != nil {
			return nil, false
		}
	}
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, e.Version, 10)
	var ok bool
	if b, ok = appendTime(append(b, `,"createdAt":`...), e.CreatedAt); !ok {
		return nil, false
	}
	if b, ok = appendTime(append(b, `,"updatedAt":`...), e.UpdatedAt); !ok {
		return nil, false
	}
	if e.ExpiresAt != nil {
		if b, ok = appendTime(append(b, `,"expiresAt":`...), *e.ExpiresAt); !ok {
			return nil, false
		}
	}
	b = codec.AppendJSONString(append(b, `,"lastWriter":`...), e.LastWriter)
	if e.RequestID != "" {
		b = codec.AppendJSONString(append(b, `,"requestId":`...), e.RequestID)
	}
	if e.SpecRef != "" {
		b = codec.AppendJSONString(append(b, `,"specRef":`...), e.SpecRef)
	}
	b = appendSemantics(append(b, `,"semantics":`...), &e.Semantics)
	return append(b, "}\n"...), true
}

// appendSemantics appends s as encoding/json does (omitempty included).
func appendSemantics(b []byte, s *contract.Semantics) []byte {
	b = codec.AppendJSONString(append(b, `{"purpose":`...), s.Purpose)
	if s.Producer != "" {
		b = codec.AppendJSONString(append(b, `,"producer":`...), s.Producer)
	}
	if len(s.ConsumerHints) > 0 {
		b = append(b, `,"consumerHints":[`...)
		for i, h := range s.ConsumerHints {
			if i > 0 {
				b = append(b, ',')
			}
			b = codec.AppendJSONString(b, h)
		}
		b = append(b, ']')
	}
	if s.TTLSeconds != 0 {
		b = strconv.AppendInt(append(b, `,"ttlSeconds":`...), s.TTLSeconds, 10)
	}
	return append(b, '}')
}

// appendTime appends t as time.Time's MarshalJSON does; false where it
// would fail.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y >= 10000 {
		return nil, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}
