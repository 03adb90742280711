package kvcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/eskv/eskv/contract"
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

// printable returns s safe to print on a terminal, on one line: control
// characters (C0 such as ESC, newline and tab, DEL, C1 such as CSI),
// bidirectional-text controls and bytes that are not UTF-8 are written
// as escapes (\x1b, \u009b, \u202e, \xff). Stored strings (values,
// holders, producers, request ids) are anyone's who may write: printed
// raw, an escape sequence in one would drive the reader's terminal. JSON
// output is left as it is; it escapes control characters itself.
func printable(s string) string {
	i := strings.IndexFunc(s, needsEscape)
	if i < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r < 0x80 && needsEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// writeEntryText writes an entry for people: one "name  value" line per
// field that is set.
func writeEntryText(w io.Writer, e contract.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(name, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", name, printable(v))
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
func writeList(w io.Writer, format string, l contract.ListAnswer) error {
	switch format {
	case formatJSON:
		return writeJSON(w, l)
	case formatValue, formatKeys:
		var buf bytes.Buffer
		for _, e := range l.Items {
			if format == formatKeys {
				fmt.Fprintf(&buf, "%s\n", printable(e.Key))
				continue
			}
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
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", printable(e.Key), e.Version, printable(e.Semantics.Purpose), printable(string(e.Value)))
	}
	return tw.Flush()
}
