package main

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// countDuplicates reads the rows of the `duplicates` command (D1 a:10-20
// ~ b:30-40 …) and returns how many pairs there are and how many of them
// lie wholly inside the import blocks of both Go files: files that use
// the same packages, not code written twice.
func countDuplicates(r io.Reader, root string) (pairs, imports int, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "D") || f[2] != "~" {
			continue
		}
		pairs++
		if inImports(root, f[1]) && inImports(root, f[3]) {
			imports++
		}
	}
	return pairs, imports, sc.Err()
}

// inImports reports whether place (file:from-to) lies in the file's
// import declarations.
func inImports(root, place string) bool {
	file, lines, ok := strings.Cut(place, ":")
	from, to, ok2 := strings.Cut(lines, "-")
	if !ok || !ok2 || !strings.HasSuffix(file, ".go") {
		return false
	}
	lo, err1 := strconv.Atoi(from)
	hi, err2 := strconv.Atoi(to)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.ImportsOnly)
	if err1 != nil || err2 != nil || err != nil || len(f.Imports) == 0 {
		return false
	}
	first := fset.Position(f.Imports[0].Pos()).Line - 1 // the "import (" line
	last := fset.Position(f.Imports[len(f.Imports)-1].End()).Line + 1
	return lo >= first && hi <= last
}

func printDuplicates(r io.Reader, root string) error {
	pairs, imports, err := countDuplicates(r, root)
	if err != nil {
		return err
	}
	fmt.Printf("duplicates: %d pairs; %d of them are import blocks only; %d pairs of code\n", pairs, imports, pairs-imports)
	return nil
}
