package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/eskv/eskv/internal/proc"
)

// peerNames are the peers figure 18 knows, in the order it runs them.
var peerNames = []string{"postgres", "etcd", "nats", "redis"}

// peerConfig is what starting a peer needs from the bench's flags.
type peerConfig struct {
	adminPostgresURL string
	clients          int // the most clients a scenario runs: connection pools are sized for them
}

func (b *bench) peerConfig() peerConfig {
	return peerConfig{adminPostgresURL: b.c.adminPostgresURL, clients: max(b.c.peerClients, sharedClients)}
}

// startPeer starts peer name (its server and a client) and returns it
// ready for setup; an error says why it is unavailable.
func startPeer(ctx context.Context, name string, pc peerConfig) (system, error) {
	switch name {
	case "postgres":
		return startPostgresPeer(ctx, pc)
	case "etcd":
		return startEtcdPeer(ctx, pc)
	case "nats":
		return startNATSPeer(ctx, pc)
	case "redis":
		return startRedisPeer(ctx, pc)
	}
	return system{}, fmt.Errorf("no peer %q (one of %s)", name, strings.Join(peerNames, ", "))
}

// peerServer is a peer's server process: started on free ports with a
// temporary directory for its data and log, stopped (SIGTERM, then
// SIGKILL) and the directory removed by stop. internal/proc starts it in
// its own process group with a parent-death signal, so it does not
// outlive a bench that is killed.
type peerServer struct {
	p     *proc.Proc
	dir   string
	ports []int
	addr  string // 127.0.0.1:ports[0], the client port
}

// peerStartTimeout bounds a peer server's start.
const peerStartTimeout = 60 * time.Second

// startServer starts bin as peer name with the arguments args returns
// for its directory and nPorts free ports, and waits until it listens on
// the first.
func startServer(ctx context.Context, name, bin string, nPorts int, args func(dir string, ports []int) []string) (_ *peerServer, err error) {
	s := &peerServer{}
	if s.dir, err = os.MkdirTemp("", "eskvbench-"+name+"-"); err != nil {
		return nil, err
	}
	if s.ports, err = proc.FreePorts(nPorts); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", s.ports[0])
	s.p = proc.New(proc.Spec{Name: name, Path: bin, Args: args(s.dir, s.ports), Dir: s.dir, Log: filepath.Join(s.dir, name+".log")})
	if err := s.p.Start(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	err = proc.WaitFor(ctx, peerStartTimeout, name+" to listen on "+s.addr, s.p, func() bool { return proc.PortOpen(s.addr) })
	if err != nil {
		return nil, s.failed(err)
	}
	return s, nil
}

// failed stops s after err and returns err with the tail of its log.
func (s *peerServer) failed(err error) error {
	tail := proc.Tail(s.p.Log, 800, "")
	s.stop()
	if tail = strings.TrimSpace(tail); tail != "" {
		err = fmt.Errorf("%w; log: %s", err, strings.ReplaceAll(tail, "\n", " | "))
	}
	return err
}

// stop stops the server and removes its directory.
func (s *peerServer) stop() {
	s.p.Stop(10 * time.Second)
	os.RemoveAll(s.dir)
}

// serverClassifier counts the server process of s for a peer's CPU.
func serverClassifier(name string, s *peerServer) classifier {
	pid, self := s.p.PID(), os.Getpid()
	return func(p procInfo) string {
		switch p.PID {
		case pid:
			return name + "-server"
		case self:
			return kindLoadGenerator
		}
		return ""
	}
}

// findBinary returns the first of candidates that is an executable file:
// absolute paths as they are, names looked up in PATH.
func findBinary(candidates ...string) (string, error) {
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %s found (bash scripts/ensure-peers.sh installs the peers)", strings.Join(candidates, ", "))
}

// goBinaries returns where `go install` puts name: GOBIN, else the bin
// directory of the first GOPATH entry.
func goBinaries(name string) []string {
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var dirs []string
	if len(lines) > 0 && strings.TrimSpace(lines[0]) != "" {
		dirs = append(dirs, lines[0])
	}
	if len(lines) > 1 {
		if first, _, _ := strings.Cut(lines[1], string(os.PathListSeparator)); first != "" {
			dirs = append(dirs, filepath.Join(first, "bin"))
		}
	}
	var paths []string
	for _, d := range dirs {
		paths = append(paths, filepath.Join(strings.TrimSpace(d), name))
	}
	return paths
}

// binaryVersion is the version bin prints for args (its version flag),
// or "?".
func binaryVersion(bin string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return versionOf(string(out))
}

// versionRe is a version number as servers print it among other words
// ("etcd Version: 3.4.23", "Redis server v=7.0.15 sha=…", "nats-server:
// v2.15.2", "15.20 (Debian 15.20-0+deb12u1)").
var versionRe = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// versionOf is the first version number in s, or "?".
func versionOf(s string) string {
	if v := versionRe.FindString(s); v != "" {
		return v
	}
	return "?"
}
