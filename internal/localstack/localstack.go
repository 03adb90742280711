// Package localstack holds what the tools that start eskv as local
// processes (eskvbench, eskvchaos) share: ports, the environment the
// services inherit, the module root and database names.
package localstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// HTTPOK reports whether GET u answers 200.
func HTTPOK(c *http.Client, u string) bool {
	resp, err := c.Get(u)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// PortOpen reports whether a TCP connection to addr succeeds within a
// second.
func PortOpen(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// FreePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago.
func FreePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// BaseEnv is this process's environment without ESKV_ settings, which
// would otherwise override those a tool gives its services; the variables
// named in pass (e.g. "ESKV_PPROF_ADDR") go through.
func BaseEnv(pass ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "ESKV_") || contains(pass, name) {
			env = append(env, kv)
		}
	}
	return env
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ModuleRoot returns the directory of the eskv module, as the module the
// tool runs in sees it (the tools module replaces it with ../); outside
// either the error says how to run the tool (hint).
func ModuleRoot(ctx context.Context, hint string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/eskv/eskv").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("%s (go list -m github.com/eskv/eskv: %v)", hint, err)
	}
	return dir, nil
}

// WithDatabase returns the connection string u with its database replaced
// by name. u is a postgres:// URL or a keyword/value string.
func WithDatabase(u, name string) (string, error) {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		pu, err := url.Parse(u)
		if err != nil {
			return "", err
		}
		pu.Path = "/" + name
		return pu.String(), nil
	}
	return u + " dbname=" + name, nil
}

// RandomHex returns n random bytes in hex, for run and database names.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
