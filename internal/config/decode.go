package config

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/meshroll/meshroll/internal/mesh"
)

// What a key's value must be, and how viper's Unmarshal decodes it. overlay
// reads each value with read before decoding, to report the ones that
// cannot be read by key; decodeHook reads them again, the same way, as
// Unmarshal sets them.

// rule says what a key's value must be where its type alone does not.
type rule struct {
	// want is what the value must be, for a message (default: what its
	// type takes).
	want string
	// missing, when set, says why the key may not be left out.
	missing string
	// auto makes it a probe's port: "auto" is mesh.PortAuto, 0 is refused
	// (once read it would mean auto).
	auto bool
}

// autoPort is how the file asks the host agent to pick a probe's port.
const autoPort = "auto"

// ruleOf names a key by the struct holding it and its tag.
type ruleOf struct {
	in  reflect.Type
	key string
}

// rules are the keys with a rule. A negative tier or a port out of range is
// read, and Validate reports it. A machine's tier may be left out when a
// tier's select picks it; Validate names a machine that neither gives one
// nor is selected.
var rules = map[ruleOf]rule{
	{reflect.TypeFor[Machine](), "tier"}:        {want: "a non-negative integer"},
	{reflect.TypeFor[mesh.HTTPProbe](), "port"}: probePort,
	{reflect.TypeFor[mesh.TCPProbe](), "port"}:  probePort,
}

var probePort = rule{want: "a port " + portRule, missing: "give the port the container serves, " + portRule, auto: true}

// defaults are what a module, tier policy, check or HTTP probe starts from
// before the file's keys are decoded onto it, so that a key left out keeps
// its default and every module read from a file carries a health.
var defaults = map[reflect.Type]func() any{
	reflect.TypeFor[Module]():         func() any { h := DefaultHealth(); return Module{Main: DefaultMain, Health: &h} },
	reflect.TypeFor[TierPolicy]():     func() any { return DefaultTierPolicy() },
	reflect.TypeFor[Check]():          func() any { return DefaultCheck() },
	reflect.TypeFor[mesh.HTTPProbe](): func() any { return mesh.HTTPProbe{Path: "/"} },
}

// setDefault sets v to its type's default, if it has one.
func setDefault(v reflect.Value) {
	if def := defaults[v.Type()]; def != nil {
		v.Set(reflect.ValueOf(def()))
	}
}

// badValue says what a value must be: want, or for a list that its item
// (counted from 1) is not a string.
type badValue struct {
	want string
	item int
}

// read converts v, a key's value as viper holds it (from the file or a
// variable), to t, the type of the key's field, under the key's rule.
// Durations want a unit (viper would read 300 as 300ns), integers and
// amounts a whole number (viper would truncate 1.5 to 1), and a variable
// gives a list as its items split at commas and spaces
// ("host,mesh-controller").
func read(t reflect.Type, v any, r rule) (any, *badValue) {
	switch {
	case t == durationType:
		if d, ok := v.(time.Duration); ok {
			return d, nil
		}
		if s, ok := v.(string); ok {
			if d, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
				return d, nil
			}
		}
		return nil, &badValue{want: "a duration such as 90s or 5m"}
	case t == amountType:
		switch x := v.(type) {
		case Amount:
			return x, nil
		case int:
			return Amount{N: x}, nil
		case string:
			num, percent := strings.CutSuffix(strings.TrimSpace(x), "%")
			if n, err := strconv.Atoi(num); err == nil {
				return Amount{N: n, Percent: percent}, nil
			}
		}
		return nil, &badValue{want: "a number of machines such as 2 or a percentage such as 25%"}
	case t.Kind() == reflect.Slice:
		switch x := v.(type) {
		case []string:
			return x, nil
		case string:
			return strings.FieldsFunc(x, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }), nil
		case []any:
			out := make([]string, 0, len(x))
			for i, e := range x {
				s, bad := read(t.Elem(), e, rule{})
				if bad != nil {
					return nil, &badValue{item: i + 1}
				}
				out = append(out, s.(string))
			}
			return out, nil
		}
		return nil, &badValue{want: "a list, such as [a, b]"}
	case t.Kind() == reflect.String:
		switch x := v.(type) {
		case bool, int, int64, uint64, float64:
			return fmt.Sprint(x), nil
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
			return rv.String(), nil
		}
		return nil, &badValue{want: "a string"}
	case t.Kind() == reflect.Bool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b, nil
			}
		}
		return nil, &badValue{want: "true or false"}
	}
	// An integer.
	n, ok := v.(int)
	if s, isString := v.(string); isString {
		if r.auto && s == autoPort {
			return mesh.PortAuto, nil
		}
		var err error
		n, err = strconv.Atoi(strings.TrimSpace(s))
		ok = err == nil
	}
	if !ok || (r.auto && n == 0) {
		return nil, &badValue{want: cmp.Or(r.want, "a whole number")}
	}
	return n, nil
}

// decodeHook is what viper's Unmarshal converts each value with, before
// mapstructure sets it: a module, tier, check or HTTP probe starts from its
// defaults, a value is read as its field's type takes it (read), and a
// section's keys that spell a value (spelled) become it. overlay has read
// every value first, so an error here is the loader's, not the file's.
func decodeHook(from, to reflect.Value) (any, error) {
	t := to.Type()
	if to.CanSet() && to.IsZero() {
		setDefault(to)
	}
	data := from.Interface()
	if m, ok := data.(map[string]any); ok {
		return spelled(t, m), nil
	}
	if !isLeaf(t) {
		return data, nil
	}
	out, bad := read(t, data, rule{})
	if bad != nil {
		return nil, fmt.Errorf("%v is not %s", data, cmp.Or(bad.want, "a list of strings"))
	}
	return out, nil
}

// spelled turns the keys of a section that spell a value into it: a probe's
// port auto is mesh.PortAuto, and a module's empty main its default.
func spelled(t reflect.Type, m map[string]any) map[string]any {
	switch {
	case (t == reflect.TypeFor[mesh.HTTPProbe]() || t == reflect.TypeFor[mesh.TCPProbe]()) && m["port"] == autoPort:
		m = maps.Clone(m)
		m["port"] = mesh.PortAuto
	case t == reflect.TypeFor[Module]() && m["main"] == "":
		m = maps.Clone(m)
		delete(m, "main")
	}
	return m
}
