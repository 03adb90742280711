package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The figures of the core's shape (make shape, -core): how big the writer's
// runtime is, how long parameter lists are, how much the contract exports
// and how many hand-written JSON scanners there are.

// coreFigures measures the repository at root (the product module with its
// nested contract and client modules; tools/ apart).
type coreFigures struct {
	writerLines, partitionLines int
	manyParams                  []string
	contractExports             int
	scanners                    map[string][]string // package dir -> files
}

// manyParamsAt is the parameter count from which a function is listed.
const manyParamsAt = 6

func measureCore(root string) (*coreFigures, error) {
	c := &coreFigures{scanners: map[string][]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			return skipCoreDir(root, p, rel, d.Name())
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		c.add(fset, f, rel)
		return nil
	})
	sort.Strings(c.manyParams)
	return c, err
}

// skipCoreDir keeps the product module and the contract and client
// modules: tools/ is the harness, not the product.
func skipCoreDir(root, p, rel, name string) error {
	if p == root {
		return nil
	}
	if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || rel == "tools" {
		return filepath.SkipDir
	}
	return nil
}

func (c *coreFigures) add(fset *token.FileSet, f *ast.File, rel string) {
	dir := filepath.Dir(rel)
	lines := fset.Position(f.End()).Line
	if dir == "writer" {
		c.writerLines += lines
	}
	if rel == filepath.Join("writer", "partition.go") {
		c.partitionLines = lines
	}
	if dir == "contract" {
		c.contractExports += exportedDecls(f)
	}
	if scansJSON(f) {
		c.scanners[dir] = append(c.scanners[dir], filepath.Base(rel))
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if n := fieldCount(fd.Type.Params); n >= manyParamsAt {
			c.manyParams = append(c.manyParams, fmt.Sprintf("%d %s %s", n, rel, fd.Name.Name))
		}
	}
}

// fieldCount counts names, not groups: (a, b int) is two parameters.
func fieldCount(fl *ast.FieldList) int {
	n := 0
	if fl == nil {
		return 0
	}
	for _, f := range fl.List {
		n += max(len(f.Names), 1)
	}
	return n
}

// exportedDecls counts a file's exported identifiers as a user of the
// package sees them in go doc: top-level types, functions, variables and
// constants, and the exported methods of exported types.
func exportedDecls(f *ast.File) int {
	n := 0
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil || receiverExported(d.Recv) {
				n++
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						n++
					}
				case *ast.ValueSpec:
					for _, name := range s.Names {
						if name.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

func receiverExported(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// scansJSON reports whether a file lexes JSON text byte by byte: it
// compares bytes with at least four of JSON's structural characters and
// skips whitespace itself (compares with two or more of JSON's
// whitespace characters). A check of a value's first byte ('{' or '[') is
// not a scanner; an encoder appends those characters without reading
// them; and a walker over another package's scanner (sc.Next('{')) lets
// that scanner lex.
func scansJSON(f *ast.File) bool {
	structural, space := map[string]bool{}, map[string]bool{}
	compared := func(e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.CHAR {
			return
		}
		c, err := strconv.Unquote(lit.Value)
		switch {
		case err != nil:
		case strings.Contains(`{}[]:,"`, c):
			structural[c] = true
		case strings.Contains(" \t\n\r", c):
			space[c] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CaseClause:
			for _, e := range n.List {
				compared(e)
				if b, ok := e.(*ast.BinaryExpr); ok && (b.Op == token.EQL || b.Op == token.NEQ) {
					compared(b.X)
					compared(b.Y)
				}
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				compared(n.X)
				compared(n.Y)
			}
		}
		return true
	})
	return len(structural) >= 4 && len(space) >= 2
}

func (c *coreFigures) print(root string) {
	fmt.Printf("writer/ non-test lines: %d (target ≤ 4000)\n", c.writerLines)
	fmt.Printf("writer/partition.go lines: %d (target ≤ 400)\n", c.partitionLines)
	fmt.Printf("functions with ≥ %d parameters (product, contract and client modules): %d (target ≤ 5)\n", manyParamsAt, len(c.manyParams))
	for _, l := range c.manyParams {
		fmt.Println("  " + l)
	}
	fmt.Printf("exported identifiers of package contract: %d (target ≤ 150)\n", c.contractExports)
	dirs := make([]string, 0, len(c.scanners))
	for d := range c.scanners {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	fmt.Printf("hand-written JSON scanners (packages): %d (target ≤ 1)\n", len(dirs))
	for _, d := range dirs {
		fmt.Printf("  %s: %s\n", d, strings.Join(c.scanners[d], ", "))
	}
	for _, doc := range []struct{ path, target string }{{"README.md", "≤ 350"}, {"docs/performance.md", "≤ 300"}} {
		b, err := os.ReadFile(filepath.Join(root, doc.path))
		if err != nil {
			fmt.Printf("%s: %v\n", doc.path, err)
			continue
		}
		fmt.Printf("%s lines: %d (target %s)\n", doc.path, strings.Count(string(b), "\n"), doc.target)
	}
}
