package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestExportedIdentifiers(t *testing.T) {
	dir := t.TempDir()
	src := `package p

type T struct{}
type u struct{}

func (T) M()  {}
func (T) m()  {}
func (u) N()  {}
func F()      {}
func f()      {}

const (
	A, b = 1, 2
	C    = 3
)

var V, W int
`
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("p.go", src)
	write("p_test.go", "package p\n\nfunc TestX() {}\n")
	n, err := exportedIdentifiers(dir)
	if err != nil {
		t.Fatal(err)
	}
	// T, M, N, F, A, C, V, W
	if n != 8 {
		t.Fatalf("exportedIdentifiers = %d, want 8", n)
	}
}
