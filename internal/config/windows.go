package config

import (
	"time"

	"github.com/meshroll/meshroll/internal/window"
)

// Window is one deployment window as the file writes it: a cron schedule
// of its starts (allow or deny, exactly one), how long each lasts, and the
// time zone the schedule is read in. Plans outside the windows hold before
// their next tier or batch until they open; rollbacks pass.
type Window struct {
	Allow    string        `mapstructure:"allow"`
	Deny     string        `mapstructure:"deny"`
	Duration time.Duration `mapstructure:"duration"`
	// TimeZone is an IANA zone such as Europe/Berlin; "" is UTC.
	TimeZone string `mapstructure:"time_zone"`
	// Reason is shown by the plans a deny window holds.
	Reason string `mapstructure:"reason"`
}

// DeployWindows is the windows as the hold check judges them. A window
// that does not parse is left out: Validate reports it, and a loaded
// config has none.
func (c *Config) DeployWindows() window.Set {
	var out window.Set
	for _, w := range c.Windows {
		spec, deny := w.Allow, false
		if w.Deny != "" {
			spec, deny = w.Deny, true
		}
		if win, err := window.New(deny, spec, w.Duration, w.TimeZone, w.Reason); err == nil {
			out = append(out, win)
		}
	}
	return out
}
