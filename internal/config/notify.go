package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/secret"
)

// Kinds of NotifyTarget.Kind.
const (
	// NotifyWebhook posts the event as JSON, signed with the target's
	// secret when it has one.
	NotifyWebhook = "webhook"
	// NotifySlack posts {"text": ...} to a Slack-compatible incoming
	// webhook.
	NotifySlack = "slack"
)

// Notify is where plans tell the team what happened: each target gets
// the events it names, of the modules it names, delivered durably and
// never holding a plan back.
type Notify struct {
	// Targets are the receivers, by name (the name is part of the
	// deliveries' workflow IDs and of the metric's labels).
	Targets map[string]NotifyTarget `mapstructure:"targets"`
	// FleetURL is the fleet page's address as the team reaches it (such as
	// https://meshroll.example.com/): notifications link to it. Empty: no
	// link.
	FleetURL string `mapstructure:"fleet_url"`
}

// NotifyTarget is one receiver of notifications.
type NotifyTarget struct {
	// Kind is NotifyWebhook or NotifySlack.
	Kind string `mapstructure:"kind"`
	// URL is where the events are posted.
	URL string `mapstructure:"url"`
	// Secret signs a webhook's body (X-Meshroll-Signature-256, an HMAC-SHA256
	// of it); never logged. SecretFile holds it instead.
	Secret     secret.String `mapstructure:"secret"`
	SecretFile string        `mapstructure:"secret_file"`
	// Events are the events it wants (meshapi.NotifyEvents); empty means
	// every one.
	Events []string `mapstructure:"events"`
	// Modules limits it to plans of these modules; empty means every
	// module.
	Modules []string `mapstructure:"modules"`
	// RetryFirst, RetryMax and GiveUpAfter are how a delivery that fails
	// is tried again: after RetryFirst, twice as long each time up to
	// RetryMax, until GiveUpAfter has passed since the first try. Zero:
	// meshapi's defaults (1s, 10m, 24h).
	RetryFirst  time.Duration `mapstructure:"retry_first"`
	RetryMax    time.Duration `mapstructure:"retry_max"`
	GiveUpAfter time.Duration `mapstructure:"give_up_after"`
}

// Retry is how the target's Notifier tries a failing delivery again.
func (t NotifyTarget) Retry() meshapi.NotifyRetry {
	return meshapi.NotifyRetry{First: t.RetryFirst, Max: t.RetryMax, GiveUp: t.GiveUpAfter}
}

// Wants says whether the target asks for event of a plan of module.
func (t NotifyTarget) Wants(event, module string) bool {
	return (len(t.Events) == 0 || slices.Contains(t.Events, event)) &&
		(len(t.Modules) == 0 || slices.Contains(t.Modules, module))
}

// Key is the target's signing secret: Secret, or the contents of
// SecretFile read now; "" when neither is set.
func (t NotifyTarget) Key(name string) (secret.String, error) {
	return tokenOrFile(t.Secret, t.SecretFile, "notify.targets."+name+".secret_file")
}

// notifyProblems checks the notify section: each target's kind, an http(s)
// URL, one secret, and events and modules that exist.
func (c *Config) notifyProblems(ps *problemList) {
	if u := c.Notify.FleetURL; u != "" {
		if msg := checkHTTPURL(u); msg != "" {
			ps.add("notify.fleet_url", "%s; want the fleet page's address, such as https://meshroll.example.com/", msg)
		}
	}
	names := make([]string, 0, len(c.Notify.Targets))
	for name := range c.Notify.Targets {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := c.Notify.Targets[name]
		key := "notify.targets." + name
		if !ps.named("notify target", key, name) {
			continue
		}
		switch t.Kind {
		case NotifyWebhook, NotifySlack:
		case "":
			ps.add(key+".kind", "missing; want %s or %s", NotifyWebhook, NotifySlack)
		default:
			ps.add(key+".kind", "%q is not a kind of target; want %s or %s", t.Kind, NotifyWebhook, NotifySlack)
		}
		if t.URL == "" {
			ps.add(key+".url", "missing; want the URL the events are posted to")
		} else if msg := checkHTTPURL(t.URL); msg != "" {
			ps.add(key+".url", "%s", msg)
		}
		ps.secretOnce(key+".secret", key+".secret", "the target's secret", t.Secret, t.SecretFile)
		if t.Kind == NotifySlack && (t.Secret != "" || t.SecretFile != "") {
			ps.add(key+".secret", "a slack target signs nothing (its URL is its secret); drop it or make the target kind %s", NotifyWebhook)
		}
		for _, e := range t.Events {
			if !meshapi.KnownEvent(e) {
				ps.add(key+".events", "unknown event %q; events are %s", e, strings.Join(meshapi.NotifyEvents, ", "))
			}
		}
		for _, m := range t.Modules {
			if _, ok := c.Modules[m]; !ok {
				ps.add(key+".modules", "unknown module %q; modules are %s", m, orNone(c.ModuleNames()))
			}
		}
		for _, d := range []struct {
			name  string
			value time.Duration
		}{{"retry_first", t.RetryFirst}, {"retry_max", t.RetryMax}, {"give_up_after", t.GiveUpAfter}} {
			if d.value < 0 {
				ps.add(key+"."+d.name, "%s is negative; want a duration such as 30s, or leave it out for the default", d.value)
			}
		}
		if r := t.Retry().WithDefaults(); r.First > r.Max {
			ps.add(key+".retry_first", "%s is longer than retry_max (%s): the first wait is the shortest", r.First, r.Max)
		}
	}
}

// notifyWarnings warns of each target posted to over plain http beyond
// loopback: the plans' words travel in clear, and a Slack URL, which is
// its own secret, with them. The URL itself is not repeated.
func (c *Config) notifyWarnings() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Notify.Targets)) {
		u, err := url.Parse(c.Notify.Targets[name].URL)
		if err != nil || u.Scheme != "http" || Loopback(u.Hostname()) {
			continue
		}
		out = append(out, fmt.Sprintf("notify.targets.%s: posts to %s over plain http, so the plans' events travel in clear; use an https URL", name, u.Hostname()))
	}
	return out
}
