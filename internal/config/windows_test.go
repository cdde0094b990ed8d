package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWindowsParsed(t *testing.T) {
	src := valid + `windows:
  - {deny: "0 18 * * FRI", duration: 62h, time_zone: Europe/Berlin, reason: weekend}
  - {allow: "0 9 * * MON-FRI", duration: 8h, time_zone: UTC}
`
	c, err := Parse("mesh.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Window{
		{Deny: "0 18 * * FRI", Duration: 62 * time.Hour, TimeZone: "Europe/Berlin", Reason: "weekend"},
		{Allow: "0 9 * * MON-FRI", Duration: 8 * time.Hour, TimeZone: "UTC"},
	}
	if len(c.Windows) != 2 || c.Windows[0] != want[0] || c.Windows[1] != want[1] {
		t.Fatalf("Windows = %+v; want %+v", c.Windows, want)
	}
	set := c.DeployWindows()
	if len(set) != 2 || !set[0].Deny || set[1].Deny {
		t.Fatalf("DeployWindows = %+v", set)
	}
	// Saturday noon: held by the weekend until Monday 09:00 UTC (the
	// office window; the weekend ends at 07:00 UTC).
	at, err := set.OpensAt(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	if err != nil || !at.Equal(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("OpensAt = %v, %v", at, err)
	}
}

func TestWindowProblems(t *testing.T) {
	src := valid + `windows:
  - {deny: "0 18 * * FRY", duration: 62h, time_zone: Europe/Berlin}
  - {allow: "0 9 * * *", duration: 0s, time_zone: Mars/Olympus}
  - {allow: "0 9 * * *", deny: "0 18 * * *", duration: 1h}
  - {duration: 1h}
  - {allow: "@daily", duration: soon, zone: UTC}
  - nope
`
	_, err := Parse("mesh.yaml", []byte(src))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse = %v; want a ValidationError", err)
	}
	want := map[string]string{
		"windows[0].deny":      "is not a cron schedule",
		"windows[1].duration":  "must be above zero",
		"windows[1].time_zone": "is not a time zone",
		"windows[2]":           "is both allow and deny",
		"windows[3]":           "needs allow or deny",
		"windows[4].duration":  "is not a duration",
		"windows[4].zone":      "unknown key",
		"windows[5]":           "must be a mapping",
	}
	got := map[string]string{}
	for _, p := range ve.Problems {
		got[p.Key] = p.Message
	}
	for key, says := range want {
		msg, ok := got[key]
		if !ok || !strings.Contains(msg, says) || !strings.Contains(msg, "(line ") {
			t.Errorf("problem %s = %q; want one saying %q with its line\nall: %v", key, msg, says, ve)
		}
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("%d problems; want %d:\n%v", len(ve.Problems), len(want), ve)
	}
}
