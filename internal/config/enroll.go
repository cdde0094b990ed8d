package config

import (
	"maps"
	"slices"

	"github.com/meshroll/meshroll/internal/secret"
)

// Enroll is what a machine admitted through enrollment (package enroll)
// is given. The file does not name such a machine: its agent asked, with
// its host and labels, and an operator admitted it. So its modules come
// from here, and its tier from the tiers' selects, which its labels match
// as a named machine's do; one no select matches is put on the last tier
// of the machines that run no control-plane module, pushed after them and
// before the control plane.
type Enroll struct {
	// Modules are the modules every admitted machine runs.
	Modules []string `mapstructure:"modules"`
	// HostToken is the bearer token the worker presents to admitted
	// machines' host APIs: their agents' --token-file. Put it in
	// MESHROLL_ENROLL_HOST_TOKEN, not the file; it is never logged.
	HostToken secret.String `mapstructure:"host_token"`
	// HostTokenFile is a file holding HostToken instead.
	HostTokenFile string `mapstructure:"host_token_file"`
}

// Admitted is a machine an operator admitted, as its enrollment records
// it.
type Admitted struct {
	Name   string
	Host   string
	Labels map[string]string
}

// Admit is c with the admitted machines added to those the file names,
// each running enroll.modules: the config the worker, the starter and the
// fleet page put in force, so that all three agree on the fleet. A machine
// the file names stays the file's. An admitted machine that cannot be
// added (a tier's group_by label it lacks, a host token file that cannot
// be read) is left out, and left says why, by machine, so that one bad
// enrollment never takes the fleet's config with it.
func (c *Config) Admit(adm []Admitted) (cfg *Config, left map[string]string) {
	left = map[string]string{}
	if len(adm) == 0 {
		return c, left
	}
	token, err := tokenOrFile(c.Enroll.HostToken, c.Enroll.HostTokenFile, "enroll.host_token_file")
	var take []Admitted
	for _, a := range adm {
		switch _, named := c.Machines[a.Name]; {
		case named:
			left[a.Name] = "mesh.yaml names it too; the file's machine is the one in force"
		case err != nil:
			left[a.Name] = err.Error()
		default:
			take = append(take, a)
		}
	}
	next := c.with(take, token)
	if next.Validate() == nil {
		return next, left
	}
	var good []Admitted
	for _, a := range take {
		if err := c.with([]Admitted{a}, token).Validate(); err != nil {
			left[a.Name] = err.Error()
			continue
		}
		good = append(good, a)
	}
	return c.with(good, token), left
}

// with is c with the admitted machines added, placed by the tiers'
// selects or on the last tier without the control plane.
func (c *Config) with(adm []Admitted, token secret.String) *Config {
	next := *c
	next.Machines = maps.Clone(c.Machines)
	last := 0
	for _, m := range c.Machines {
		if !slices.ContainsFunc(m.Modules, func(mod string) bool { return c.Modules[mod].ControlPlane }) {
			last = max(last, m.Tier)
		}
	}
	for _, a := range adm {
		m := Machine{Host: a.Host, Labels: a.Labels, Modules: slices.Clone(c.Enroll.Modules), Token: token, Admitted: true}
		if t, ok := c.SelectTier(a.Labels); ok {
			m.Tier, m.TierBySelector = t, true
		} else {
			m.Tier = last
		}
		next.Machines[a.Name] = m
	}
	return &next
}

// enrollProblems checks the enroll section and the worker's endpoint: a
// token to ask with (an endpoint without one would let anyone fill the
// pending list), and modules that exist for admitted machines to run.
func (c *Config) enrollProblems(ps *problemList) {
	w := c.Worker
	ps.secretOnce("worker.enroll_token", "worker.enroll_token", "the enrollment token", w.EnrollToken, w.EnrollTokenFile)
	ps.secretOnce("enroll.host_token", "enroll.host_token", "admitted machines' host token", c.Enroll.HostToken, c.Enroll.HostTokenFile)
	if w.EnrollListen != "" {
		if msg := checkListen(w.EnrollListen); msg != "" {
			ps.add("worker.enroll_listen", "%s", msg)
		} else if w.EnrollToken == "" && w.EnrollTokenFile == "" {
			ps.add("worker.enroll_listen", "the enrollment endpoint has no token: anyone who can post to %s could ask to join; "+
				"set %s (or worker.enroll_token_file) to the token agents start with", w.EnrollListen, envName("worker", "enroll_token"))
		}
		if len(c.Enroll.Modules) == 0 {
			ps.add("worker.enroll_listen", "enroll.modules is empty: an admitted machine would run nothing; list the modules admitted machines run")
		}
	}
	c.moduleListProblems(ps, "enroll.modules", c.Enroll.Modules, true)
}
