package fleetui

import (
	"testing"

	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// The matrix's queue words say when a rollback is first in line.
func TestQueueWords(t *testing.T) {
	n := func(i int) *int { return &i }
	pushing := &meshapi.QueuedRequest{Module: "host", Generation: 27}
	cases := []struct {
		name string
		row  machines.Row
		want string
	}{
		{"not asked", machines.Row{}, ""},
		{"idle", machines.Row{Queue: n(0)}, "idle"},
		{"pushing with merges queued", machines.Row{Queue: n(2), Current: pushing}, "pushing host 27, 2 queued"},
		{"a rollback first in line", machines.Row{Queue: n(3), Current: pushing, Rollbacks: 1}, "pushing host 27, 3 queued, 1 rollback first in line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := queueWords(tc.row); got != tc.want {
				t.Errorf("queueWords = %q, want %q", got, tc.want)
			}
		})
	}
}
