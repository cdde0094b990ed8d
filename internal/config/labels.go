package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/meshroll/meshroll/internal/selector"
)

// ResolveTiers puts each machine the file gives no tier (TierBySelector)
// on the lowest-numbered tier whose select matches its labels: the one
// rule by which the worker, the starter and the fleet page place a machine,
// since all three read the config through Load, which runs it. A tier the
// file gives wins, whatever the selectors say. A machine no tier selects
// keeps tier 0 and Validate names it. A config built in code that sets
// TierBySelector calls it before use.
func (c *Config) ResolveTiers() {
	for name, m := range c.Machines {
		if !m.TierBySelector {
			continue
		}
		if t, ok := c.SelectTier(m.Labels); ok {
			m.Tier = t
			c.Machines[name] = m
		}
	}
}

// SelectTier is the lowest-numbered tier whose select matches labels, and
// false when none does. A tier with no select, or one that does not parse
// (Validate reports it), selects nothing.
func (c *Config) SelectTier(labels map[string]string) (int, bool) {
	for _, t := range sortedKeys(c.Tiers) {
		src := c.Tiers[t].Select
		if strings.TrimSpace(src) == "" {
			continue
		}
		if s, err := selector.Parse(src); err == nil && s.Matches(labels) {
			return t, true
		}
	}
	return 0, false
}

// parses says a tier's select is a selector.
func parses(src string) bool {
	_, err := selector.Parse(src)
	return err == nil
}

// unplaced says machine is given no tier and no tier selects it, so its
// Tier means nothing.
func (c *Config) unplaced(machine string) bool {
	m := c.Machines[machine]
	if !m.TierBySelector {
		return false
	}
	_, ok := c.SelectTier(m.Labels)
	return !ok
}

// Selected lists the machines whose labels match sel, sorted: what
// --selector keeps. An empty selector selects every machine.
func (c *Config) Selected(sel selector.Selector) []string {
	var out []string
	for _, name := range c.MachineNames() {
		if sel.Matches(c.Machines[name].Labels) {
			out = append(out, name)
		}
	}
	return out
}

// labelProblems checks machines' labels and tiers' selectors, and names a
// machine that has no tier and that no tier selects.
func (c *Config) labelProblems(ps *problemList) {
	// A machine with a bad label is not also said to be selected by no
	// tier: fixing the label may well place it.
	badLabel := map[string]bool{}
	for _, name := range c.MachineNames() {
		m := c.Machines[name]
		for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
			msg := selector.CheckKey(k)
			if msg == "" {
				msg = selector.CheckValue(m.Labels[k])
			}
			if msg != "" {
				ps.add("machines."+name+".labels."+k, "%s", msg)
				badLabel[name] = true
			}
		}
	}
	var selects []string
	for _, t := range sortedKeys(c.Tiers) {
		src := c.Tiers[t].Select
		if strings.TrimSpace(src) == "" {
			continue
		}
		key := "tiers." + strconv.Itoa(t) + ".select"
		if _, err := selector.Parse(src); err != nil {
			ps.add(key, "%v; want requirements joined by commas, such as \"ring=canary\", \"site in (fra1, ams2)\", \"gpu\" or \"!gpu\"", err)
			continue
		}
		selects = append(selects, fmt.Sprintf("tier %d %q", t, src))
	}
	for _, name := range c.MachineNames() {
		if !c.unplaced(name) || badLabel[name] || ps.skip.has("machines."+name+".labels.*") {
			continue
		}
		key := "machines." + name + ".tier"
		if len(selects) == 0 {
			ps.add(key, "missing; give the machine a tier, a non-negative integer (tier 0 is pushed first), or labels that a tiers.<n>.select matches")
			continue
		}
		ps.add(key, "missing, and no tier's select matches the machine's labels %s (%s); give it a tier, or labels that one of these matches",
			labelString(c.Machines[name].Labels), strings.Join(selects, ", "))
	}
}

// labelWarnings warns of a machine whose tier the file gives while that
// tier's select does not match its labels: the tier it names wins, which
// is allowed but may not be what was meant.
func (c *Config) labelWarnings() []string {
	var out []string
	for _, name := range c.MachineNames() {
		m := c.Machines[name]
		src := c.Tiers[m.Tier].Select
		if m.TierBySelector || strings.TrimSpace(src) == "" {
			continue
		}
		if s, err := selector.Parse(src); err == nil && !s.Matches(m.Labels) {
			out = append(out, fmt.Sprintf("machine %s: is on tier %d because its tier says so, though tiers.%d.select %q does not match its labels %s; the tier it names wins",
				name, m.Tier, m.Tier, src, labelString(m.Labels)))
		}
	}
	return out
}

// LabelString writes labels as key=value pairs, sorted and joined by
// commas ("-" for none): how status and the fleet page show them.
func LabelString(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// labelString is LabelString in braces, for a message.
func labelString(labels map[string]string) string {
	if len(labels) == 0 {
		return "(none)"
	}
	return "{" + LabelString(labels) + "}"
}
