package main

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/eskv/eskv/tools/internal/cli"
)

func TestParseOnly(t *testing.T) {
	cli.SetEnv(t, nil)
	t.Run("OKAllByDefault", func(t *testing.T) {
		c, err := parse(nil, io.Discard)
		if err != nil || !c.wants("1") || !c.wants("8") || c.scanEntries != 100000 || c.scanN != 200 {
			t.Errorf("got %+v, %v", c, err)
		}
	})
	t.Run("OKSome", func(t *testing.T) {
		c, err := parse([]string{"-only", "8, 3,15"}, io.Discard)
		if err != nil || !c.wants("8") || !c.wants("3") || !c.wants("15") || c.wants("1") || c.wants("4") {
			t.Errorf("got %+v, %v", c, err)
		}
	})
	t.Run("ErrUnknownFigure", func(t *testing.T) {
		if _, err := parse([]string{"-only", "5"}, io.Discard); err == nil {
			t.Error("want an error: 5 comes with 2")
		}
	})
}

// TestScanValue checks the proportions figure 8's cases rely on.
func TestScanValue(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	cutoff := now.Add(-5 * time.Minute).Format(time.RFC3339)
	var failed, stale, low int
	for i := range 100000 {
		var v struct {
			State     string `json:"state"`
			Attempt   int    `json:"attempt"`
			UpdatedAt string `json:"updated_at"`
		}
		if err := json.Unmarshal([]byte(scanValue(i, now)), &v); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if v.State == "failed" {
			failed++
		}
		if v.UpdatedAt < cutoff {
			stale++
		}
		if v.Attempt < 5 {
			low++
		}
	}
	if failed != 100 || stale != 1000 || low != 50000 {
		t.Errorf("failed %d, stale %d, attempt < 5 %d; want 100, 1000, 50000", failed, stale, low)
	}
	if got := thousands(100000); got != "100,000" {
		t.Errorf("thousands(100000) = %q", got)
	}
}
