package kvcli

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestCommandSolutionsDisjoint checks what makes the rows' order not
// matter: per kind of answer, no command of kvctl's tree gets a line from
// two rows; and every row names a command that exists.
func TestCommandSolutionsDisjoint(t *testing.T) {
	t.Parallel()
	var paths []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		paths = append(paths, c.CommandPath())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&app{cmdPath: "kvctl", getenv: func(string) string { return "" }}).rootCommand())
	fields := map[string]func(s solutions) bool{
		"absent":    func(s solutions) bool { return s.absent != nil },
		"held":      func(s solutions) bool { return s.held != nil },
		"wrongType": func(s solutions) bool { return s.wrongType != nil },
		"ttl":       func(s solutions) bool { return s.ttl != "" },
	}
	used := make([]bool, len(commandSolutions))
	for _, p := range paths {
		for name, has := range fields {
			n := 0
			for i, s := range commandSolutions {
				if s.cmds(p) {
					used[i] = true
					if has(s) {
						n++
					}
				}
			}
			if n > 1 {
				t.Errorf("%s gets its %s line from %d rows", p, name, n)
			}
		}
	}
	for i, u := range used {
		if !u {
			t.Errorf("commandSolutions[%d] matches no command of %v", i, paths)
		}
	}
}
