package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// BaseEnv is this process's environment without ESKV_ settings, which
// would otherwise override those given to a service; the variables named
// in pass (e.g. "ESKV_PPROF_ADDR") go through.
func BaseEnv(pass ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "ESKV_") || slices.Contains(pass, name) {
			env = append(env, kv)
		}
	}
	return env
}

// Build runs `go build -trimpath -o out/ pkgs...` in the module
// directory dir. -trimpath, as make run and the release build: Go's
// build cache keys a package built without it by its directory, and
// each checkout (a CI clone, make test-scripts' clones) compiled every
// package of the module again.
func Build(ctx context.Context, dir, out string, pkgs ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-trimpath", "-o", out + "/"}, pkgs...)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	return nil
}

// ModuleDir returns the directory of module as the module the caller runs
// in sees it (for example the eskv module, which tools/ replaces with
// ../).
func ModuleDir(ctx context.Context, module string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	dir := string(bytes.TrimSpace(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("go list -m %s: %v", module, err)
	}
	return dir, nil
}

// Tail returns about the last n bytes of the file's lines, leaving out
// those that contain skip (when not empty).
func Tail(path string, n int, skip string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.SplitAfter(string(b), "\n")
	var out []string
	size := 0
	for i := len(lines) - 1; i >= 0 && size < n; i-- {
		if lines[i] == "" || (skip != "" && strings.Contains(lines[i], skip)) {
			continue
		}
		out = append(out, lines[i])
		size += len(lines[i])
	}
	slices.Reverse(out)
	return strings.Join(out, "")
}
