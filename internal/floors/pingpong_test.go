package floors

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// pingPongChild, set in a child's environment, makes TestMain run it as
// BenchmarkPingPongProcesses' echo process on the address it names.
const pingPongChild = "ESKV_FLOORS_PINGPONG_ECHO"

// TestMain runs the echo process of BenchmarkPingPongProcesses when the
// test binary is started as one, and the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(pingPongChild) != "" {
		echoProcess()
		return
	}
	os.Exit(m.Run())
}

// echoProcess accepts one connection on 127.0.0.1:0, prints its address
// on stdout, and echoes every byte back until the connection ends.
func echoProcess() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(2)
	}
	_, _ = os.Stdout.WriteString(ln.Addr().String() + "\n")
	c, err := ln.Accept()
	if err != nil {
		os.Exit(2)
	}
	_, _ = io.Copy(c, c)
}

// BenchmarkPingPongProcesses is the floor of one message and its answer
// between two processes on this machine: one client sends 64 bytes over
// loopback TCP to an echo process and waits for them back, as every hop
// of a lone client's write does (client → writer, writer → broker and
// back, three times per round). Its ns/op is one round trip, its two
// write(2)s, two read(2)s and the wakeups of both processes included.
func BenchmarkPingPongProcesses(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pingPongChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("echo process: %v", err)
	}
	c, err := net.Dial("tcp", strings.TrimSpace(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg, back := make([]byte, 64), make([]byte, 64)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/roundtrip")
}
