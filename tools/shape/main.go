// Command shape prints code-shape figures for one Go module (make shape):
// non-test functions longer than a limit, packages without a doc comment,
// and the share of non-test lines under cmd/; with -duplicates, it counts
// the rows of the workplace's duplicates command, import blocks apart; with
// -core, the figures of the core's shape (core.go).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	root := flag.String("root", ".", "module root")
	limit := flag.Int("max-lines", 80, "a function longer than this is listed")
	dups := flag.Bool("duplicates", false, "read the rows of the duplicates command on stdin and count them (import blocks apart) instead")
	core := flag.Bool("core", false, "print the core's figures for the repository at -root instead (writer/, parameter lists, the contract's exports, JSON scanners, README and docs/performance.md lengths)")
	flag.Parse()
	if *core {
		c, err := measureCore(*root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shape:", err)
			os.Exit(1)
		}
		c.print(*root)
		return
	}
	if *dups {
		if err := printDuplicates(os.Stdin, *root); err != nil {
			fmt.Fprintln(os.Stderr, "shape:", err)
			os.Exit(1)
		}
		return
	}
	r, err := measure(*root, *limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(1)
	}
	r.print(*limit)
}

type report struct {
	long       []string
	undoc      []string
	total, cmd int
}

// measure walks the module below root, skipping nested modules, hidden
// folders and testdata.
func measure(root string, limit int) (*report, error) {
	r := &report{}
	fset := token.NewFileSet()
	docs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipDir(root, p, d.Name())
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		docs[dir] = docs[dir] || f.Doc != nil
		lines := fset.Position(f.End()).Line
		r.total += lines
		if dir == "cmd" || strings.HasPrefix(dir, "cmd/") {
			r.cmd += lines
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if n > limit {
					rel, _ := filepath.Rel(root, p)
					r.long = append(r.long, fmt.Sprintf("%4d %s %s", n, rel, fd.Name.Name))
				}
			}
		}
		return nil
	})
	for dir, ok := range docs {
		if !ok {
			r.undoc = append(r.undoc, dir)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(r.long)))
	sort.Strings(r.undoc)
	return r, err
}

func skipDir(root, p, name string) error {
	if p == root {
		return nil
	}
	if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" {
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
		return filepath.SkipDir
	}
	return nil
}

func (r *report) print(limit int) {
	fmt.Printf("non-test functions over %d lines: %d\n", limit, len(r.long))
	for _, l := range r.long {
		fmt.Println("  " + l)
	}
	fmt.Printf("packages without a doc comment: %d\n", len(r.undoc))
	for _, d := range r.undoc {
		fmt.Println("  " + d)
	}
	share := 0.0
	if r.total > 0 {
		share = 100 * float64(r.cmd) / float64(r.total)
	}
	fmt.Printf("non-test Go lines: %d, under cmd/: %d (%.1f%%)\n", r.total, r.cmd, share)
}
