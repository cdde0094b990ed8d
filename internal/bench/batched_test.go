package main

import (
	"strings"
	"testing"
	"time"
)

// TestCheckBatched: a batched plan below what batching and health allow is
// an error naming why, never a row; at or above the floor it passes.
func TestCheckBatched(t *testing.T) {
	s := batchedSize{machines: 20, maxParallel: 5, minHealthy: 200 * time.Millisecond}
	ms := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		whole   time.Duration
		batches []time.Duration
		want    string // "" for no error
	}{
		{"above the floor", 1900 * time.Millisecond, ms(400, 420, 410, 430), ""},
		{"at the floor", 800 * time.Millisecond, ms(200, 200, 200, 200), ""},
		{"one batch: the policy ignored", 500 * time.Millisecond, ms(450), "in 1 batches, want 4"},
		{"a batch that did not wait for health", 900 * time.Millisecond, ms(400, 50, 400, 400), "batch 2 of 4 took 50ms"},
		{"below the floor", 700 * time.Millisecond, ms(200, 200, 200, 200), "below its batches' health waits 800ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkBatched(s, tc.whole, tc.batches)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkBatched: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("checkBatched: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestBatchedSizeFloor: the floor counts a last, partial batch.
func TestBatchedSizeFloor(t *testing.T) {
	s := batchedSize{machines: 21, maxParallel: 5, minHealthy: 100 * time.Millisecond}
	if got := s.batches(); got != 5 {
		t.Errorf("batches = %d, want 5", got)
	}
	if got := s.floor(); got != 500*time.Millisecond {
		t.Errorf("floor = %s, want 500ms", got)
	}
}
