package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/bench/stack"
	"github.com/meshroll/meshroll/internal/devlaunch/devlaunchtest"
)

// TestMain lets the footprint scenario re-execute this test binary as its
// worker process.
func TestMain(m *testing.M) {
	if stack.ChildRequested() {
		if err := stack.RunChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSmoke runs the bench at its smallest size, as CI does: it must
// complete and print a table with every scenario's rows. It asserts no
// speed; the one bound it holds (the batched scenario fails the run when
// its plan beats its batches' health waits) is correctness, not speed.
func TestSmoke(t *testing.T) {
	devlaunchtest.TemporalCLI(t, "bench smoke")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	tab, err := Run(ctx, Options{Size: SizeSmoke, Command: "go test ./internal/bench", Verbose: testing.Verbose()}, &progress)
	if err != nil {
		t.Fatalf("bench smoke: %v\n%s", err, progress.String())
	}
	var out strings.Builder
	if err := tab.Write(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{
		"machine: ", "date: ",
		"| overhead, cached Go build | ratio plan / direct |",
		"| overhead, git-digest build | ratio plan / direct |",
		"| overhead, cached Go build | direct loop",
		"| fan-out 3 | whole plan",
		"| fan-out 10 | tier 3 ",
		"| fan-out 10 | whole / ideal",
		"| fan-out 10 | whole / engine ceiling |",
		"| fan-out 10 | next plan / engine ceiling |",
		"| fan-out 10 | whole / spread ceiling |",
		"| fan-out 10 | next plan / spread ceiling |",
		"| engine | server tasks a second, spread over 10 running workflows each signalled",
		"| cost | server tasks per machine pushed, 10 machines, first plan |",
		"| cost | server tasks per machine pushed, 10 machines, next plan |",
		"| cost | workflow tasks that waited out the worker's sticky queue, per machine pushed, 10 machines, next plan |",
		"| engine | server tasks a second",
		"| batched 20 | floor: batches × min_healthy |",
		"| batched 20 | whole plan, start to converged |",
		"| batched 20 | above the floor per batch |",
		"| contention 10 | meshroll: pushes served per second",
		"| contention 10 | signal mutex: acquisitions",
		"| cost | history events per first plan: b (per machine)",
		"| cost | history events per next plan: b (per machine)",
		"| cost | billable actions per next plan: a (fixed)",
		"| cost | history events per machine pushed, 10 machines, next plan",
		"| cost | largest history in the 10-machine plan",
		"| cost | the 10-machine plan's own history, bytes per machine",
		"| footprint 20 | worker process peak RSS",
		"| footprint 20 | worker CPU per plan",
		"| engine | no-op activity in sequence",
		"| fleet page 10 | matrix, first viewer: hosts from the picture, machine workflows from the worker's feed, then rendered |",
		"| fleet page 10 | matrix, first viewer, without the feed: every machine workflow listed, then rendered |",
		"| fleet page 10 | the worker's feed: one look at what changed (nothing moving) |",
		"| fleet page 10 | status read: hosts from the picture, machine workflows from the worker's feed |",
		"| fleet page 10 | starter status, the whole command: hosts and machine workflows from the catalogue, every row printed |",
		"| fleet page 10 | matrix, other viewers: rendered from the last read |",
		"| fleet page 10 | matrix page size, gzip (as served) |",
		"| engine | no-op activities at once",
		"| engine | one-activity workflows at once",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table has no row %q:\n%s", want, out.String())
		}
	}
}
