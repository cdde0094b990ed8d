package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// The node walk: what viper cannot tell about the file. viper gives values,
// but no line numbers; it refuses a duplicate key outright, ignores an
// unknown one, lowercases names, reads a name such as 00 as the number 0 and
// drops an empty mapping. So a walk over the file's yaml.v3 nodes, led by
// the types the file decodes into (the structs' tags name the keys), records
// where each key is, reports duplicate and unknown keys and sections of the
// wrong shape, and lists the keys that hold values (leaves) and the names of
// modules, machines and the like as written. It also builds the document
// viper reads, so that viper misreads nothing: without a key's second
// occurrence (dedupe), unknown keys or tiers that are not numbers; with a
// section that is not a mapping read as empty; with names and strings tagged
// as strings, as written (path: 1.10 is "1.10", not the number 1.1).

// Types the walk and the decoding treat apart from their kind.
var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[time.Duration]()
	amountType   = reflect.TypeFor[Amount]()
	windowsType  = reflect.TypeFor[[]Window]()
)

// isLeaf says whether a key of type t holds a value rather than keys: a
// string, boolean, integer, duration, amount or list of strings.
func isLeaf(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return t == amountType
}

// field is a struct field as the file names it.
type field struct {
	key   string
	index int
	typ   reflect.Type
}

// fieldsOf lists t's fields under their keys: the mapstructure tag, or the
// json tag of mesh's wire types (the probes), which viper's Unmarshal
// matches by the field's name.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		tag := t.Field(i).Tag
		k, ok := tag.Lookup("mapstructure")
		if !ok {
			k, _, _ = strings.Cut(tag.Get("json"), ",")
		}
		if k != "" && k != "-" {
			out = append(out, field{k, i, t.Field(i).Type})
		}
	}
	return out
}

// tagKeys lists t's keys in the order of its fields, for messages.
func tagKeys(t reflect.Type) []string {
	var keys []string
	for _, f := range fieldsOf(t) {
		keys = append(keys, f.key)
	}
	return keys
}

// mapsOf says what each mapping of names maps, by its key, for the message
// about one that is not a mapping.
var mapsOf = map[string]string{
	"modules":   "module name to module",
	"machines":  "machine name to machine",
	"tiers":     "tier number to tier policy",
	"providers": "provider name to provider",
	"checks":    "check name to check",
	"env":       "variable name to value",
	"headers":   "header name to value",
	"labels":    "label key to value",
}

var (
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// headerRE is an HTTP header name: a token of RFC 9110.
	headerRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// nameRules say what is wrong with a name in a mapping of names to
// strings, by the mapping's key, or "".
var nameRules = map[string]func(string) string{
	"env": func(name string) string {
		if !envKeyRE.MatchString(name) {
			return strconv.Quote(name) + " is not an environment variable name (letters, digits and _, not starting with a digit)"
		}
		return ""
	},
	"headers": func(name string) string {
		if !headerRE.MatchString(name) {
			return strconv.Quote(name) + " is not an HTTP header name (letters, digits and -, such as X-Api-Key)"
		}
		return ""
	},
}

// leaf is a key that holds a value: what viper is asked for and a
// variable may override.
type leaf struct {
	parts []string // the key's parts: tags, and names as written
	key   string   // the parts joined by '.', as problems name it
	typ   reflect.Type
	rule  rule
}

// childParts is parts and k, without sharing parts' array.
func childParts(parts []string, k string) []string {
	return append(parts[:len(parts):len(parts)], k)
}

// walk checks n, the value of the key made of parts, against t, the type it
// decodes into, descending into the keys t has whether the file gives them
// or not (a variable may). It returns what viper is to read for n, nil for
// nothing: a mapping is built anew for each use of n, so that what one use
// leaves out or fixes does not change another's (through an anchor).
func (l *loader) walk(n *yaml.Node, t reflect.Type, parts []string, r rule) *yaml.Node {
	key := strings.Join(parts, ".")
	// A section every config has: not a pointer, which may be nil, nor a
	// named entry, which mapping marks present before walking it.
	fixed := t.Kind() == reflect.Struct && !l.present[key]
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	v := resolve(n)
	switch {
	case t == windowsType:
		return l.windows(v)
	case isLeaf(t):
		l.leaves = append(l.leaves, leaf{parts, key, t, r})
		if t.Kind() == reflect.String && v != nil && v.Kind == yaml.ScalarNode && !isNull(v) {
			return asString(v)
		}
		return n
	}
	var what string
	if t.Kind() == reflect.Struct {
		what = strings.Join(tagKeys(t), ", ")
	}
	if len(parts) > 0 {
		if name := envName(parts...); isSet(name) {
			l.unreadable(key, "%s is set, which hides everything under %s from viper; unset it and override single keys (%s_<KEY>)", name, key, name)
			return emptyNode()
		}
		if t.Kind() == reflect.Map {
			what = mapsOf[parts[len(parts)-1]]
		}
	}
	out := emptyNode() // a null section too, which would hide what a variable sets under it
	if !isNull(v) && v.Kind != yaml.MappingNode {
		l.unreadable(key, "must be a mapping of %s, got %s", what, describe(v))
		if !fixed {
			return out
		}
		v = nil // a section every config has: its keys are still read from variables
	}
	var es []entry
	if !isNull(v) {
		es = entries(v)
		l.present[key] = true
	}
	if t.Kind() == reflect.Map {
		l.mapping(es, t, parts, out)
		return out
	}
	fields := fieldsOf(t)
	for _, e := range es {
		k := joinKey(key, e.key.Value)
		l.lines[k], l.nodes[k] = e.key.Line, e.val
		if !slices.ContainsFunc(fields, func(f field) bool { return f.key == e.key.Value }) {
			// Left out: viper, which lowercases keys, would read Host as host.
			l.problem(k, "unknown key; known keys: %s", what)
		}
	}
	for _, f := range fields {
		var val *yaml.Node
		i := slices.IndexFunc(es, func(e entry) bool { return e.key.Value == f.key })
		if i >= 0 {
			val = es[i].raw
		}
		if val = l.walk(val, f.typ, childParts(parts, f.key), rules[ruleOf{t, f.key}]); i >= 0 && val != nil {
			out.Content = append(out.Content, es[i].key, val)
		}
	}
	return out
}

// mapping walks the entries of a mapping of names (modules, machines, a
// module's env...), of type t, into out, recording the names as written.
// A tier's name must be a tier number, written as machines' tier is (1, not
// 01), so that one tier has one key and one MESHROLL_TIERS_<N>_* name; a
// tier whose name or value cannot be read is left out.
func (l *loader) mapping(es []entry, t reflect.Type, parts []string, out *yaml.Node) {
	key := strings.Join(parts, ".")
	tiers := t.Key().Kind() == reflect.Int
	first := map[string]string{}
	for _, e := range es {
		name := e.key.Value
		k := joinKey(key, name)
		l.lines[k], l.nodes[k] = e.key.Line, e.val
		l.present[k] = true
		if n, err := strconv.Atoi(name); tiers && (err != nil || strconv.Itoa(n) != name) {
			l.problem(k, "is not a tier number; write it as machines' tier is written, such as 1")
			continue
		}
		if rule := nameRules[parts[len(parts)-1]]; rule != nil {
			if msg := rule(name); msg != "" {
				l.problem(k, "%s", msg)
			}
		}
		// viper lowercases names, and '.', '-' and '_' all become '_' in the
		// name of a variable, which overrides a key of a module, machine,
		// provider or check.
		id := strings.ToLower(name)
		if t.Elem().Kind() == reflect.Struct {
			id = envName(name)
		}
		switch prev, ok := first[id]; {
		case !ok:
			first[id] = name
		case strings.EqualFold(prev, name):
			l.problem(k, "collides with %s: viper lowercases keys, so the two would be read as one", prev)
		default:
			l.problem(k, "collides with %s: both are overridden by the same %s_* variables; rename one", prev, envName(childParts(parts, name)...))
		}
		val := l.walk(e.raw, t.Elem(), childParts(parts, name), rule{})
		if tiers && l.skip.tree[k] {
			continue
		}
		l.names[key] = append(l.names[key], name)
		out.Content = append(out.Content, asString(e.key), val) // 00 is "00", not 0
	}
}

// windows checks the windows list, v, and returns what viper is to read
// for it. It is read from the file alone: viper cannot override one item of
// a list by a variable, so MESHROLL_* variables do not reach it. A value
// that cannot be read is reported and left empty.
func (l *loader) windows(v *yaml.Node) *yaml.Node {
	if isNull(v) {
		return v
	}
	if v.Kind != yaml.SequenceNode {
		l.problem("windows", "must be a list of windows ({allow|deny: CRON, duration: D, time_zone: Z, reason: R}), got %s", describe(v))
		return nil
	}
	known := tagKeys(reflect.TypeFor[Window]())
	out := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for i, item := range v.Content {
		key := fmt.Sprintf("windows[%d]", i)
		item = resolve(item)
		l.lines[key] = item.Line
		w := emptyNode() // one that is not a mapping too, so that the windows after it keep their index
		out.Content = append(out.Content, w)
		if item.Kind != yaml.MappingNode {
			l.unreadable(key, "must be a mapping of %s, got %s", strings.Join(known, ", "), describe(item))
			l.skip.leaf[key] = true
			continue
		}
		for _, e := range entries(item) {
			k := key + "." + e.key.Value
			l.lines[k] = e.key.Line
			switch {
			case !slices.Contains(known, e.key.Value):
				l.problem(k, "unknown key; known keys: %s", strings.Join(known, ", "))
			case e.val.Kind != yaml.ScalarNode:
				l.problem(k, "must be a string, got %s", describe(e.val))
			case e.key.Value != "duration":
				w.Content = append(w.Content, e.key, asString(e.val))
			default:
				if _, err := time.ParseDuration(e.val.Value); err != nil {
					l.problem(k, "is not a duration such as 8h or 62h30m: %q", e.val.Value)
					l.skip.leaf[k] = true
					continue
				}
				w.Content = append(w.Content, e.key, e.val)
			}
		}
	}
	return out
}

// asString is scalar n read as a string, as written: 1.10 rather than 1.1.
func asString(n *yaml.Node) *yaml.Node {
	s := *n
	s.Tag, s.Anchor = "!!str", ""
	return &s
}

// dedupe drops the second and later occurrences of a key in every mapping,
// reporting each: viper would refuse the file.
func (l *loader) dedupe(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			l.dedupe(c, path)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			l.dedupe(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.MappingNode:
		first := map[string]int{}
		kept := make([]*yaml.Node, 0, len(n.Content))
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode {
				if line, ok := first[k.Value]; ok {
					// Not l.problem: the line to show is this one, not the
					// first's.
					l.probs = append(l.probs, Problem{
						Key:     joinKey(path, k.Value),
						Message: fmt.Sprintf("duplicate key: defined at line %d and again at line %d; only one may stay", line, k.Line),
					})
					continue
				}
				first[k.Value] = k.Line
			}
			kept = append(kept, k, v)
			l.dedupe(v, joinKey(path, k.Value))
		}
		n.Content = kept
	}
}

// entry is one key of a mapping and its value, as written (raw) and with
// aliases resolved (val).
type entry struct{ key, val, raw *yaml.Node }

// entries lists a mapping's keys in file order, with the keys of merged
// mappings (<<: *anchor) after them; an explicit key wins over a merged one,
// and an earlier merged mapping over a later one, as in YAML.
func entries(n *yaml.Node) []entry {
	var own, merged []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if v.Kind == yaml.SequenceNode {
				for _, s := range v.Content {
					if s = resolve(s); s.Kind == yaml.MappingNode {
						merged = append(merged, entries(s)...)
					}
				}
			} else if v.Kind == yaml.MappingNode {
				merged = append(merged, entries(v)...)
			}
			continue
		}
		own = append(own, entry{k, v, n.Content[i+1]})
	}
	seen := map[string]bool{}
	out := make([]entry, 0, len(own)+len(merged))
	for _, e := range append(own, merged...) {
		if !seen[e.key.Value] {
			seen[e.key.Value] = true
			out = append(out, e)
		}
	}
	return out
}

// emptyNode is an empty mapping, to build one in.
func emptyNode() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names a node's kind and value for a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "nothing"
}

func joinKey(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
