package main

import (
	"testing"
	"time"
)

func TestTestClockSkew(t *testing.T) {
	t.Setenv(testClockSkewEnv, "")
	if _, skew, err := testClock(); err != nil || skew != 0 {
		t.Fatalf("unset: skew %s, %v", skew, err)
	}
	t.Setenv(testClockSkewEnv, "-60s")
	c, skew, err := testClock()
	if err != nil || skew != -time.Minute {
		t.Fatalf("-60s: skew %s, %v", skew, err)
	}
	if d := time.Since(c.Now()); d < 59*time.Second || d > 61*time.Second {
		t.Errorf("clock %s behind, want 60s", d)
	}
	t.Setenv(testClockSkewEnv, "soon")
	if _, _, err := testClock(); err == nil {
		t.Error("a value that is not a duration was accepted")
	}
}
