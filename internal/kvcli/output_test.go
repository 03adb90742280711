package kvcli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// hostile is what a writer may store in strings that kvctl prints: a
// window-title escape (OSC), a clear-screen (CSI), a raw C1 CSI, a
// right-to-left override, a forged line and a byte that is not UTF-8.
const hostile = "a\x1b]0;pwned\x07b\x1b[2Jc\u009b31md\u202ee\nkey  forged\tf\xff"

// TestPrintable: control characters, bidirectional controls and invalid
// UTF-8 are escaped; everything else is kept as it is.
func TestPrintable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"OKPlain", `{"hello":"world"}`, `{"hello":"world"}`},
		{"OKUnicode", "Zoë ✓ 🎉", "Zoë ✓ 🎉"},
		{"OKJSONEscapesKept", `"a\u001b\n"`, `"a\u001b\n"`},
		{"EscapedESC", "a\x1b[31mb", `a\x1b[31mb`},
		{"EscapedBellNewlineTab", "\x07\n\t\r\x7f", `\x07\x0a\x09\x0d\x7f`},
		{"EscapedC1", "x\u009by", `x\u009by`},
		{"EscapedBidi", "x\u202ey\u2066", `x\u202ey\u2066`},
		{"EscapedLineSeparator", "x\u2028y", `x\u2028y`},
		{"EscapedInvalidUTF8", "x\xff\xc3", `x\xff\xc3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := printable(tc.in); got != tc.want {
				t.Fatalf("printable(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestTextOutputIsPrintable: every text printer of stored strings writes
// no control character but its own newlines and the spaces of its
// columns, and no forged line; JSON output keeps the strings exactly.
func TestTextOutputIsPrintable(t *testing.T) {
	t.Parallel()
	value, _ := json.Marshal(hostile)
	value = bytes.ReplaceAll(value, []byte(`\u009b`), []byte("\u009b")) // raw C1 is valid JSON
	e := contract.Entry{Key: "tenant/acme/project/demo/" + hostile, Value: value, Version: 3, LastWriter: hostile, RequestID: hostile, SpecRef: hostile,
		Semantics: contract.Semantics{Purpose: hostile, Producer: hostile, ConsumerHints: []string{hostile}}}
	lock := client.Lock{Key: e.Key, Holder: hostile, Token: 4, Version: 3, AcquiredAt: time.Unix(0, 0)}
	for _, tc := range []struct {
		name  string
		print func(a *app) error
	}{
		{"Get", func(a *app) error { return writeEntryText(a.stdout, e) }},
		{"List", func(a *app) error {
			return writeList(a.stdout, formatText, contract.ListAnswer{Items: []contract.Entry{e, e}, Count: 2})
		}},
		{"Lock", func(a *app) error { return a.writeLock(lock, "holder") }},
		{"Released", func(a *app) error { return a.writeReleased(client.ReleaseResult{Key: e.Key, Version: 4}, "released") }},
		{"Replayed", func(a *app) error { a.noteReplayed(true, hostile, "written"); return nil }},
		{"Error", func(a *app) error {
			a.fail(&contract.Error{Code: contract.EConflict, Message: "key holds " + hostile})
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			a := &app{stdout: &out, stderr: &out, format: formatText, cmdPath: "kvctl get", subject: e.Key}
			if err := tc.print(a); err != nil {
				t.Fatal(err)
			}
			for _, r := range out.String() {
				if r != '\n' && needsEscape(r) || r == '\ufffd' {
					t.Fatalf("control character %U in the text output:\n%s", r, out.String())
				}
			}
			if strings.Contains(out.String(), "\nkey  forged") {
				t.Fatalf("a stored string forged a line:\n%s", out.String())
			}
		})
	}
	var out bytes.Buffer
	if err := writeJSON(&out, e); err != nil {
		t.Fatal(err)
	}
	var back contract.Entry
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.RequestID != strings.ToValidUTF8(hostile, "\ufffd") {
		t.Fatalf("JSON output changed the strings: %q (%v)", back.RequestID, err)
	}
}
