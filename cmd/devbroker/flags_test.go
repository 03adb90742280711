package main

import (
	"io"
	"testing"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/internal/service/servicetest"
)

// TestVariables: every setting of the broker reads the variable
// scripts/run-local.sh and the documentation name.
func TestVariables(t *testing.T) {
	servicetest.Variables(t, func() *service.Flags { return new(config).flags(io.Discard) }, map[string]string{
		"addr":       "ESKV_BROKER_PORT",
		"data":       "ESKV_BROKER_DATA",
		"log-level":  "ESKV_BROKER_LOG_LEVEL",
		"pprof-addr": "ESKV_PPROF_ADDR",
		"sync":       "ESKV_BROKER_SYNC",
	})
}
