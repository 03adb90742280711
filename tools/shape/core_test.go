package main

import (
	"go/parser"
	"go/token"
	"testing"
)

func parse(t *testing.T, src string) (*token.FileSet, *coreFigures) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", "package x\n"+src, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &coreFigures{scanners: map[string][]string{}}
	c.add(fset, f, "contract/x.go")
	return fset, c
}

func TestCoreFigures(t *testing.T) {
	tests := []struct {
		name            string
		src             string
		exports, params int
		scanner         bool
	}{
		{"ExportedOnly", "type T int\ntype u int\nfunc (T) M() {}\nfunc (u) N() {}\nfunc F() {}\nvar V, w = 1, 2\nconst C = 1", 5, 0, false},
		{"ParamsByName", "func f(a, b, c int, d, e string, g bool) {}\nfunc h(a, b, c, d, e int) {}", 0, 1, false},
		{"Scanner", "func s(b []byte) { switch b[0] { case ' ', '\\t': case '{', '[': case '\"': }; if b[1] == ':' {} }", 0, 0, true},
		{"WalkerOverAScanner", "func s(d *D) { switch d.Peek() { case '{', '[', '\"': }; d.Next(':'); d.Next(','); d.Next('}') }", 0, 0, false},
		{"SniffIsNoScanner", "func s(b []byte) bool { return b[0] == '{' || b[0] == '[' }", 0, 0, false},
		{"EncoderIsNoScanner", "func e(b []byte) []byte { b = append(b, '{', '\"'); b = append(b, ':', ','); return append(b, '}') }", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := parse(t, tt.src)
			if c.contractExports != tt.exports || len(c.manyParams) != tt.params || (len(c.scanners) == 1) != tt.scanner {
				t.Errorf("exports %d params %v scanners %v; want %d, %d, %v", c.contractExports, c.manyParams, c.scanners, tt.exports, tt.params, tt.scanner)
			}
		})
	}
}
