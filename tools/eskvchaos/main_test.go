package main

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/tools/internal/cli"
)

func TestParse(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		cli.SetEnv(t, nil, "CHAOS_SECONDS")
		c, err := parse(nil, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if c.duration != 2*time.Minute || c.clients != 12 || c.txnClients != 4 || c.queueClients != 4 || c.keys != 5 || c.writers != 3 || c.projectors != 2 {
			t.Fatalf("%+v", c)
		}
		if !slices.Equal(c.faults, slices.Concat(faultKinds, netFaultKinds)) || c.killBroker || !c.netFaults {
			t.Fatalf("faults %v, kill-broker %v, net-faults %v: want every kind but the broker's kill", c.faults, c.killBroker, c.netFaults)
		}
		if c.writerPause.min <= 10*time.Second {
			t.Fatalf("writer pause %s must outlast the writers' 10s session timeout", c.writerPause)
		}
	})
	t.Run("ChaosSecondsAndSeedFromEnvironment", func(t *testing.T) {
		cli.SetEnv(t, map[string]string{"CHAOS_SECONDS": "60", "ESKV_CHAOS_SEED": "42", "ESKV_CHAOS_KEYS": "3"}, "CHAOS_SECONDS")
		c, err := parse(nil, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if c.duration != time.Minute || c.seed != 42 || c.keys != 3 {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("FlagsOverrideEnvironment", func(t *testing.T) {
		cli.SetEnv(t, map[string]string{"CHAOS_SECONDS": "60"}, "CHAOS_SECONDS")
		c, err := parse([]string{"-seconds", "1.5", "-clients", "4", "-writer-pause", "11s-12s"}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if c.duration != 1500*time.Millisecond || c.clients != 4 || c.writerPause != (span{11 * time.Second, 12 * time.Second}) {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("KillBrokerAddsTheFault", func(t *testing.T) {
		cli.SetEnv(t, nil, "CHAOS_SECONDS")
		c, err := parse([]string{"-kill-broker", "-faults", "kill-writer"}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.faults, []string{faultKillWriter, faultKillBroker}) {
			t.Fatalf("faults %v", c.faults)
		}
	})
	t.Run("NoNetFaultsLeavesTheCutsOut", func(t *testing.T) {
		cli.SetEnv(t, nil, "CHAOS_SECONDS")
		c, err := parse([]string{"-net-faults=false"}, &bytes.Buffer{})
		if err != nil || !slices.Equal(c.faults, faultKinds) {
			t.Fatalf("%v %v", c.faults, err)
		}
	})
	t.Run("HostileRunsWithoutNamespaces", func(t *testing.T) {
		cli.SetEnv(t, nil, "CHAOS_SECONDS")
		c, err := parse([]string{"-hostile"}, &bytes.Buffer{})
		if err != nil || c.netFaults {
			t.Fatalf("net-faults %v, err %v", c.netFaults, err)
		}
	})
	t.Run("NoFaults", func(t *testing.T) {
		cli.SetEnv(t, nil, "CHAOS_SECONDS")
		c, err := parse([]string{"-faults", "none"}, &bytes.Buffer{})
		if err != nil || len(c.faults) != 0 {
			t.Fatalf("%v %v", c.faults, err)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ErrSeconds", []string{"-seconds", "0"}, "-seconds"},
		{"ErrUnknownFault", []string{"-faults", "kill-postgres"}, "unknown fault"},
		{"ErrCutWithoutNamespaces", []string{"-net-faults=false", "-faults", "cut-writer-broker"}, "needs -net-faults"},
		{"ErrSpan", []string{"-fault-every", "5s-2s"}, "fault-every"},
		{"ErrClients", []string{"-clients", "0"}, "positive"},
		{"ErrQueueClients", []string{"-queue-clients", "-1"}, "-queue-clients"},
		{"ErrThroughputOneWriter", []string{"-throughput", "-writers", "1"}, "at least 2 writers"},
		{"ErrArguments", []string{"extra"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli.SetEnv(t, nil, "CHAOS_SECONDS")
			_, err := parse(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestHelpExplainsTheBrokerCaveat(t *testing.T) {
	var out bytes.Buffer
	cli.SetEnv(t, nil, "CHAOS_SECONDS")
	_, err := parse([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"CHAOS_SECONDS", "-kill-broker", "kfake", "transaction", "-throughput", "docs/chaos.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h does not mention %q:\n%s", want, out.String())
		}
	}
}

func TestParseSpan(t *testing.T) {
	for in, want := range map[string]span{
		"2s-5s":    {2 * time.Second, 5 * time.Second},
		"3s":       {3 * time.Second, 3 * time.Second},
		" 1s - 2s": {time.Second, 2 * time.Second},
	} {
		got, err := parseSpan(in)
		if err != nil || got != want {
			t.Errorf("parseSpan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseSpan("x"); err == nil {
		t.Error("parseSpan(x) succeeded")
	}
}
