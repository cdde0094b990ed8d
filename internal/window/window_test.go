package window

import (
	"errors"
	"testing"
	"time"
)

func mustNew(t *testing.T, deny bool, spec string, d time.Duration, zone string) Window {
	t.Helper()
	w, err := New(deny, spec, d, zone, "")
	if err != nil {
		t.Fatalf("New(%q, %s, %q): %v", spec, d, zone, err)
	}
	return w
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec string
		d    time.Duration
		zone string
	}{
		{"not cron", time.Hour, ""},
		{"0 18 * * FRI", 0, ""},
		{"0 18 * * FRI", -time.Hour, ""},
		{"0 18 * * FRI", time.Hour, "Mars/Olympus"},
		{"0 0 18 * * FRI", time.Hour, ""}, // six fields: seconds are not taken
		{"TZ=UTC", time.Hour, ""},         // robfig/cron v3.0.1 panics on it
		{"CRON_TZ=UTC 0 18 * * FRI", time.Hour, ""},
		{"@every 1h", time.Hour, ""},
		{"", time.Hour, ""},
	} {
		if _, err := New(true, tc.spec, tc.d, tc.zone, ""); err == nil {
			t.Errorf("New(%q, %s, %q) = nil error; want one", tc.spec, tc.d, tc.zone)
		}
	}
	if _, err := New(false, "@weekly", time.Hour, "UTC", ""); err != nil {
		t.Errorf("a descriptor: %v", err)
	}
}

func TestContains(t *testing.T) {
	// Friday 18:00 in Berlin for 62 h: to Monday 08:00 Berlin time.
	weekend := mustNew(t, true, "0 18 * * FRI", 62*time.Hour, "Europe/Berlin")
	for _, tc := range []struct {
		at      string
		in      bool
		wantEnd string
	}{
		{"2026-12-04T16:59:59Z", false, ""}, // Fri 17:59:59 Berlin (CET, UTC+1)
		{"2026-12-04T17:00:00Z", true, "2026-12-07T07:00:00Z"},
		{"2026-12-06T12:00:00Z", true, "2026-12-07T07:00:00Z"},
		{"2026-12-07T06:59:59Z", true, "2026-12-07T07:00:00Z"},
		{"2026-12-07T07:00:00Z", false, ""}, // the end is outside
		{"2026-12-09T12:00:00Z", false, ""},
		// Summer time: Friday 18:00 CEST is 16:00 UTC.
		{"2026-07-03T16:30:00Z", true, "2026-07-06T06:00:00Z"},
	} {
		in, end := weekend.Contains(utc(tc.at))
		if in != tc.in || (tc.in && !end.Equal(utc(tc.wantEnd))) {
			t.Errorf("Contains(%s) = %v, %v; want %v, %s", tc.at, in, end, tc.in, tc.wantEnd)
		}
	}
}

func TestOpensAt(t *testing.T) {
	weekend := mustNew(t, true, "0 18 * * FRI", 62*time.Hour, "Europe/Berlin")
	office := mustNew(t, false, "0 9 * * MON-FRI", 8*time.Hour, "UTC")
	lunch := mustNew(t, true, "0 12 * * *", time.Hour, "UTC")
	// Overlapping deny windows: each hour for 90 minutes, from 20:00 to
	// 23:00, so 20:00 to 00:30 is one long stretch.
	evening := mustNew(t, true, "0 20-23 * * *", 90*time.Minute, "UTC")
	for _, tc := range []struct {
		name string
		set  Set
		at   string
		want string
	}{
		{"no windows", nil, "2026-12-05T12:00:00Z", "2026-12-05T12:00:00Z"},
		{"outside a deny window", Set{weekend}, "2026-12-03T12:00:00Z", "2026-12-03T12:00:00Z"},
		{"inside a deny window", Set{weekend}, "2026-12-05T12:00:00Z", "2026-12-07T07:00:00Z"},
		{"inside an allow window", Set{office}, "2026-12-03T10:00:00Z", "2026-12-03T10:00:00Z"},
		{"before an allow window", Set{office}, "2026-12-03T06:00:00Z", "2026-12-03T09:00:00Z"},
		{"after it, on a Friday", Set{office}, "2026-12-04T18:00:00Z", "2026-12-07T09:00:00Z"},
		{"deny wins inside allow", Set{office, lunch}, "2026-12-03T12:30:00Z", "2026-12-03T13:00:00Z"},
		{"a deny window ends outside the allow", Set{office, weekend}, "2026-12-05T12:00:00Z", "2026-12-07T09:00:00Z"},
		{"overlapping deny windows", Set{evening}, "2026-12-03T20:10:00Z", "2026-12-04T00:30:00Z"},
	} {
		got, err := tc.set.OpensAt(utc(tc.at))
		if err != nil || !got.Equal(utc(tc.want)) {
			t.Errorf("%s: OpensAt(%s) = %v, %v; want %s", tc.name, tc.at, got.UTC(), err, tc.want)
		}
		ok, _ := tc.set.Allowed(utc(tc.at))
		if ok != (tc.at == tc.want) {
			t.Errorf("%s: Allowed(%s) = %v", tc.name, tc.at, ok)
		}
	}
}

func TestNeverOpens(t *testing.T) {
	always := mustNew(t, true, "* * * * *", 2*time.Minute, "UTC")
	if got, err := (Set{always}).OpensAt(utc("2026-12-03T12:00:00Z")); !errors.Is(err, ErrNeverOpens) {
		t.Fatalf("OpensAt under a deny window that always applies = %v, %v; want ErrNeverOpens", got, err)
	}
}
