package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eskv/eskv/events"
)

// writeJSON writes v as one line of JSON, values byte for byte as stored
// (no \u003c for <).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeValue writes a stored JSON value on its own line.
func writeValue(w io.Writer, v json.RawMessage) error {
	_, err := fmt.Fprintf(w, "%s\n", v)
	return err
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// writeEntryText writes an entry for people: one "name  value" line per
// field that is set.
func writeEntryText(w io.Writer, e events.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(name, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", name, v)
		}
	}
	line("key", e.Key)
	line("value", string(e.Value))
	line("version", fmt.Sprint(e.Version))
	line("purpose", e.Semantics.Purpose)
	line("producer", e.Semantics.Producer)
	line("hints", strings.Join(e.Semantics.ConsumerHints, ", "))
	line("created", timeText(e.CreatedAt))
	line("updated", timeText(e.UpdatedAt)+" by "+e.LastWriter)
	if e.ExpiresAt != nil {
		line("expires", timeText(*e.ExpiresAt))
	}
	line("requestId", e.RequestID)
	line("specRef", e.SpecRef)
	return tw.Flush()
}

// writeList writes a listing in format.
func writeList(w io.Writer, format string, l events.ListAnswer) error {
	switch format {
	case formatJSON:
		return writeJSON(w, l)
	case formatValue:
		var buf bytes.Buffer
		for _, e := range l.Items {
			fmt.Fprintf(&buf, "%s\n", e.Value)
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	if len(l.Items) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVERSION\tPURPOSE\tVALUE")
	for _, e := range l.Items {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", e.Key, e.Version, e.Semantics.Purpose, e.Value)
	}
	return tw.Flush()
}
