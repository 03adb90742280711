package audit

import (
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"testing"
)

// TestValueHashScheme2: scheme-2 canonical forms and hashes of
// scheme2Vectors.
func TestValueHashScheme2(t *testing.T) {
	for _, tc := range scheme2Vectors {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := CanonicalExact([]byte(tc.raw))
			if !ok || string(c) != tc.canonical {
				t.Errorf("CanonicalExact(%s) = %s, %v; want %s", tc.raw, c, ok, tc.canonical)
			}
			if got := Scheme2.ValueHash(testKey(), vectorKey, json.RawMessage(tc.raw)); got != tc.hash {
				t.Errorf("ValueHash(%s) = %s, want %s", tc.raw, got, tc.hash)
			}
		})
	}
}

// TestPythonReference: docs/audit-value-hash.py, the reference an
// auditor can run without eskv, gives the vectors too (skipped without
// python3).
func TestPythonReference(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	for _, tc := range scheme2Vectors {
		out, err := exec.Command("python3", "../docs/audit-value-hash.py", hex.EncodeToString(testKey().Secret), vectorKey, tc.raw).Output()
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if want := tc.canonical + "\n" + tc.hash + "\n"; string(out) != want {
			t.Errorf("python reference for %s:\n%s\nwant\n%s", tc.raw, out, want)
		}
	}
}

const vectorKey = "tenant/acme/project/demo/k"

// scheme2Vectors: canonical forms and hashes computed independently by the
// Python reference (docs/audit-value-hash.py) under key vectorKey and
// secret bytes 0..31.
var scheme2Vectors = []struct {
	name, raw, canonical, hash string
}{
	{"OrderSpacingAndNumberForms", `{ "b": [1.0, 2e1], "a": "x" }`, `{"a":"x","b":[1,20]}`, "c9bfa7c875cdad7f164e061e23628364d74e373bc63056eb0902d1164488322a"},
	{"TwoToThe53", `9007199254740992`, `9007199254740992`, "c6a1063724caaec3b4a67800f0efdbc0a823dbc707857414452454e0f00bd15c"},
	{"TwoToThe53PlusOne", `9007199254740993`, `9007199254740993`, "de30f35effcb809c3f936267a4d6d4ae563ef480756e7a958baa61e2dda48d7f"},
	{"Zero", `0`, `0`, "5bc811d9f6557768629d58b83478ee42bb14161b8e549d6103cb77ac04bb9464"},
	{"NegativeZero", `-0`, `-0`, "0f1993c13655e7967cffcb21689127d34506b99e6db223dd7b3bba3d0caa9b04"},
	{"NegativeZeroOtherForm", `-0.0e7`, `-0`, "0f1993c13655e7967cffcb21689127d34506b99e6db223dd7b3bba3d0caa9b04"},
	{"BelowTheDoubles", `1e-400`, `1e-400`, "367fd65abc617e563bda30351d56a65894b67b73273b38f46303af1d60eb9c5c"},
	{"LoneSurrogate", `"\ud800"`, `"\ud800"`, "0cefbb75372344e9ea063a6b45182c72e87c1b556ca6c79986862c9c43fc9867"},
	{"ReplacementCharacter", `"\ufffd"`, "\"\ufffd\"", "31a54003388655edffbe22f5b77f751320bcd7057056bd0ededc7016cd773384"},
	{"EscapedUnicodeIsUTF8", `"\u00e9"`, `"é"`, "1482f5708e88b0f6c6e3ab50e02e84113007a8e070252432f69caab475fc9d95"},
	{"MembersInUTF16Order", `{"\ud800":1,"\uffff":2,"\ud83d\ude00":3}`, "{\"\\ud800\":1,\"😀\":3,\"\uffff\":2}", "fd66a9064fccaa8005ef2620ad8d11b2519e10a0a7b0bf0828c21d40674dffb8"},
	{"SmallExponential", `123.456e-30`, `1.23456e-28`, "b9f2a17162c00cb7b789f7f89782080292f42541199274b0142f9ecb75378084"},
	{"LargeExponential", `1e21`, `1e+21`, "5f0a9a7a83cd30a13c884b9254e01b84af1de6fe0f233bd6c4f6ed44b4fe945e"},
	{"SmallestPlainFraction", `0.000001`, `0.000001`, "a965407d4f13e649a56ad2593ce427ce2dfd92331884386aa27c15d002d80a0a"},
	{"LargestExponentialFraction", `1e-7`, `1e-7`, "b8a7fe2cabcc7a02146387a02a25b74926d0565e54a3d3e60fa5ea8191803654"},
	{"ExponentForm", `1E+2`, `100`, "1a68852c77c7e563485ccdaa0f9c672d369377126804aade9fd5c6eae7806a01"},
	{"Mixed", `[1.5e300,-12.50,0.1]`, `[1.5e+300,-12.5,0.1]`, "374631fa0e191afcee9d0899551d1ffa1891df735b1da867a99537793af5ca92"},
}

// TestValueHashCollisions: values that scheme 1 hashes alike (the audit
// trail could not tell them apart), and that scheme 2 does not.
func TestValueHashCollisions(t *testing.T) {
	const key = "tenant/acme/project/demo/n"
	k := testKey()
	for _, tc := range []struct {
		name       string
		keyA, keyB string
		a, b       string
	}{
		{"TwoToThe53AndPlusOne", key, key, `9007199254740992`, `9007199254740993`},
		{"ZeroAndNegativeZero", key, key, `0`, `-0`},
		{"ZeroAndBelowTheDoubles", key, key, `0`, `1e-400`},
		{"NegativeZeroAndBelowTheDoubles", key, key, `-0`, `1e-400`},
		{"NestedBigIntegers", key, key, `{"id":12345678901234567890}`, `{"id":12345678901234567891}`},
		{"LongFractions", key, key, `0.10000000000000000001`, `0.1`},
		{"LoneSurrogateAndReplacementCharacter", key, key, `"\udc00"`, `"\ufffd"`},
		{"SameValueUnderTwoTenants", "tenant/a/project/p/k", "tenant/b/project/p/k", `{"secret":"x"}`, `{"secret":"x"}`},
		{"SameValueUnderTwoKeys", "tenant/a/project/p/k1", "tenant/a/project/p/k2", `1`, `1`},
		{"KeyAndValueSplitElsewhere", "tenant/a/project/p/k1", "tenant/a/project/p/k", `1`, `11`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if Scheme2.ValueHash(k, tc.keyA, json.RawMessage(tc.a)) == Scheme2.ValueHash(k, tc.keyB, json.RawMessage(tc.b)) {
				t.Fatalf("scheme 2 hashes %s of %s and %s of %s alike", tc.a, tc.keyA, tc.b, tc.keyB)
			}
		})
	}
}

// TestIncrementPast2To53IsAChange: an increment from 2^53 to 2^53+1 has
// a before_hash and an after_hash that differ (scheme 1 audited it as no
// change).
func TestIncrementPast2To53IsAChange(t *testing.T) {
	e := testEvent(2, `9007199254740992`, `9007199254740993`)
	if r := EventRow(e, At{Partition: 0, Offset: 1}, testKey(), Scheme1, ""); r.BeforeHash != r.AfterHash {
		t.Fatalf("scheme 1 now tells them apart: its hashes changed, and its old rows no longer verify")
	}
	if r := EventRow(e, At{Partition: 0, Offset: 1}, testKey(), CurrentScheme, ""); r.BeforeHash == r.AfterHash {
		t.Fatalf("the new row's before_hash and after_hash are equal: %s", r.AfterHash)
	}
}

// TestCanonicalExactEquivalences: forms of one value share one canonical
// form.
func TestCanonicalExactEquivalences(t *testing.T) {
	for _, forms := range [][]string{
		{`100`, `1e2`, `1E+2`, `100.000`, `0.1e3`, `1000e-1`},
		{`-0`, `-0.0`, `-0e-5`, `-0.000E+99`},
		{`0`, `0.0`, `0e10`},
		{`{"a":[1,{"c":"é","b":null}],"b":true}`, " { \"b\" : true , \"a\" : [ 1.0 , { \"b\" : null , \"c\" : \"\\u00e9\" } ] } "},
		{`"😀"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`},
		{`"/"`, `"\/"`},
		{`null`, ``, `  `},
	} {
		want, _ := CanonicalExact([]byte(forms[0]))
		for _, f := range forms[1:] {
			if got, ok := CanonicalExact([]byte(f)); !ok || string(got) != string(want) {
				t.Errorf("CanonicalExact(%s) = %s, %v; want %s, the form of %s", f, got, ok, want, forms[0])
			}
		}
	}
}

// BenchmarkCanonicalExact: scheme 2's canonical form of figure 18a's value
// (the auditor computes one per event) and of one with escapes, nesting
// and numbers to rewrite.
func BenchmarkCanonicalExact(b *testing.B) {
	for name, v := range map[string]string{
		"Small":  `{"client":17,"seq":1206,"name":"peer-3","tags":["a","b"],"ok":true}`,
		"Nested": `{"z":{"b":[1,2.50,{"c":"d\u00e9"}],"e":null},"name":"caf\u00e9","n":-12.5e0,"s":"x\"y\ud83d\ude00","t":true,"u":[[],{}]}`,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := CanonicalExact([]byte(v)); !ok {
					b.Fatal("no canonical form")
				}
			}
		})
	}
}
