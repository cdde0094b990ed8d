package config

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/viper"
	yaml "go.yaml.in/yaml/v3"
)

// How the file is read (parse), in four steps, none of which names a field:
//
//  1. The node walk (walk.go) checks the file's form against the structs'
//     tags, records the line of every key, lists the keys that hold values,
//     for every module, machine and other name the file gives, and builds
//     the document viper is to read.
//  2. viper reads that document, and each of those keys is bound to the
//     MESHROLL_* variable its parts name (envName), so that a variable
//     overrides any key, in the file or not.
//  3. overlay reads the value viper then holds for each key; one that
//     cannot be read is reported, by key and line or variable, and set to
//     its zero value, so that the rest of the file is still read and
//     checked.
//  4. viper's Unmarshal decodes it all into the tagged structs, converting
//     through decodeHook, and settle puts back what viper loses on the way.
//
// viper's key separator is "::" rather than ".", because "." is allowed in
// module and machine names (mesh.ValidName) and viper would split a machine
// called web.prod into a machine "web" with a key "prod".
const keyDelim = "::"

// envReplacer turns a key made of parts joined by keyDelim into the name of
// its variable, once in upper case.
var envReplacer = strings.NewReplacer(keyDelim, "_", ".", "_", "-", "_")

// envName is the variable that overrides the key made of parts (the tags of
// the fields and the names of the file's modules, machines and so on):
// EnvPrefix and the parts joined by '_', in upper case, with '.' and '-' as
// '_'. push.retry_budget is MESHROLL_PUSH_RETRY_BUDGET, machine edge-1's
// host MESHROLL_MACHINES_EDGE_1_HOST.
func envName(parts ...string) string {
	return envReplacer.Replace(strings.ToUpper(EnvPrefix + "_" + strings.Join(parts, keyDelim)))
}

// lookupEnv reports a variable the way viper sees it: set and non-empty.
func lookupEnv(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}

// isSet says whether viper sees the variable.
func isSet(name string) bool {
	_, ok := lookupEnv(name)
	return ok
}

// loader carries what parse learns about the file while reading it.
type loader struct {
	v     *viper.Viper
	probs []Problem
	skip  skip
	// lines maps a dotted key to the line of that key in the file.
	lines map[string]int
	// nodes maps a dotted key to its value node, to quote values as written.
	nodes map[string]*yaml.Node
	// envs maps a dotted key to the variable that overrides it.
	envs map[string]string
	// present holds the sections and named entries the file gives.
	present map[string]bool
	// names maps the key of a mapping of names to its names as written.
	names map[string][]string
	// leaves are the keys that hold values, in the walk's order.
	leaves []leaf
	// valued holds the leaves the file or a variable gives a value.
	valued map[string]bool
}

// parse is Parse, in the steps above; path names the file in errors.
func parse(path string, data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", path, err)
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = resolve(doc.Content[0])
	}
	if !isNull(root) && root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("mesh config %s: line %d: the top level must be a mapping of %s", path, root.Line, strings.Join(tagKeys(configType), ", "))
	}
	l := &loader{
		skip:    skip{leaf: map[string]bool{}, tree: map[string]bool{}},
		lines:   map[string]int{},
		nodes:   map[string]*yaml.Node{},
		envs:    map[string]string{},
		present: map[string]bool{},
		names:   map[string][]string{},
		v:       viper.NewWithOptions(viper.KeyDelimiter(keyDelim)),
	}
	l.dedupe(&doc, "")
	if !isNull(root) {
		// What yaml cannot decode at all (a list as a key, an alias that
		// expands too far) is no file to walk.
		if _, err := decodeAny(root); err != nil {
			return nil, fmt.Errorf("mesh config %s: %w", path, err)
		}
	}
	if clean := l.walk(root, configType, nil, rule{}); !isNull(root) {
		v, err := decodeAny(clean)
		if err != nil {
			return nil, fmt.Errorf("mesh config %s: %w", path, err)
		}
		settings, _ := v.(map[string]any)
		if err := l.v.MergeConfigMap(settings); err != nil {
			return nil, fmt.Errorf("mesh config %s: %w", path, err)
		}
	}
	if err := l.overlay(); err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", path, err)
	}
	c := Default()
	if err := l.v.Unmarshal(c, viper.DecodeHook(decodeHook)); err != nil {
		return nil, fmt.Errorf("mesh config %s: %w", path, err)
	}
	l.settle(reflect.ValueOf(c).Elem(), "")
	c.path = path
	c.origins = origins{lines: l.lines, envs: l.envs}
	for name, m := range c.Machines {
		key := "machines." + name + ".tier"
		m.TierBySelector = !l.valued[key] && !l.skip.has(key)
		c.Machines[name] = m
	}
	c.ResolveTiers()

	// What Validate cannot check for want of a section or key the file
	// does not let be read.
	l.skip.modules = l.skip.tree["modules"]
	l.skip.leaf["modules"] = l.skip.tree["modules"]
	l.skip.leaf["machines"] = l.skip.tree["machines"]
	l.skip.machineModules, l.skip.machineTiers = l.skip.tree["machines"], l.skip.tree["machines"]
	for _, name := range l.names["machines"] {
		l.skip.machineModules = l.skip.machineModules || l.skip.has("machines."+name+".modules")
		l.skip.machineTiers = l.skip.machineTiers || l.skip.has("machines."+name+".tier")
	}
	probs := l.probs
	for _, p := range c.problems(&l.skip) {
		p.Message += l.where(p.Key)
		probs = append(probs, p)
	}
	if err := newValidationError(path, probs); err != nil {
		return nil, err
	}
	return c, nil
}

// overlay binds each key the walk found to its variable and reads the value
// viper then holds for it (the variable's, else the file's). A value that
// cannot be read is reported and set to its zero value, so that decoding
// meets only values it can convert and Validate does not complain again
// about the zero left in its place.
func (l *loader) overlay() error {
	for _, lf := range l.leaves {
		l.envs[lf.key] = envName(lf.parts...)
		if err := l.v.BindEnv(strings.Join(lf.parts, keyDelim), l.envs[lf.key]); err != nil {
			return fmt.Errorf("%s: %w", lf.key, err)
		}
	}
	given, zero := map[string]bool{}, map[string]any{}
	for _, lf := range l.leaves {
		vkey := strings.Join(lf.parts, keyDelim)
		val := l.v.Get(vkey)
		if val == nil {
			continue
		}
		given[lf.key] = true
		env, fromEnv := lookupEnv(l.envs[lf.key])
		_, bad := read(lf.typ, val, lf.rule)
		if _, isString := val.(string); isString && bad == nil && lf.typ.Kind() == reflect.Slice && !fromEnv {
			// Only a variable gives a list as a string.
			bad = &badValue{want: "a list, such as [a, b]"}
		}
		switch {
		case bad == nil:
			continue
		case bad.item > 0:
			l.bad(lf.key, "must be a list of strings; item %d is not", bad.item)
		default:
			l.bad(lf.key, "must be %s, got %s", bad.want, l.got(lf.key, val, env, fromEnv))
		}
		zero[vkey] = reflect.Zero(lf.typ).Interface()
	}
	l.valued = given
	for vkey, z := range zero {
		l.v.Set(vkey, z)
	}
	for _, lf := range l.leaves {
		parent := strings.Join(lf.parts[:len(lf.parts)-1], ".")
		if lf.rule.missing == "" || given[lf.key] || !l.given(parent, given) {
			continue
		}
		l.bad(lf.key, "missing; %s", lf.rule.missing)
	}
	return nil
}

// given says whether the file gives the section key, or a variable one of
// its keys.
func (l *loader) given(key string, given map[string]bool) bool {
	if l.present[key] {
		return true
	}
	for k := range given {
		if strings.HasPrefix(k, key+".") {
			return true
		}
	}
	return false
}

// settle puts back into v, the value of key, what viper loses on the way
// from the file: the names of modules, machines, env variables and the like
// as written, which viper lowercases, and what the file gives empty, which
// viper drops: an entry with its defaults (host: {}), and a section (web:
// {}).
func (l *loader) settle(v reflect.Value, key string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() && l.present[key] {
			v.Set(reflect.New(v.Type().Elem()))
			setDefault(v.Elem())
		}
		if !v.IsNil() {
			l.settle(v.Elem(), key)
		}
	case reflect.Struct:
		for _, f := range fieldsOf(v.Type()) {
			l.settle(v.Field(f.index), joinKey(key, f.key))
		}
	case reflect.Map:
		names := l.names[key]
		if len(names) == 0 {
			return
		}
		kt, out := v.Type().Key(), reflect.MakeMapWithSize(v.Type(), len(names))
		for _, name := range names {
			e := reflect.New(v.Type().Elem()).Elem()
			if got := v.MapIndex(mapKey(kt, strings.ToLower(name))); got.IsValid() {
				e.Set(got)
			} else {
				setDefault(e)
			}
			l.settle(e, joinKey(key, name))
			out.SetMapIndex(mapKey(kt, name), e)
		}
		v.Set(out)
	}
}

// mapKey is name as a key of a map whose keys are of type t: a tier's
// number, or a string.
func mapKey(t reflect.Type, name string) reflect.Value {
	if t.Kind() == reflect.Int {
		n, _ := strconv.Atoi(name) // the walk kept tier numbers only
		return reflect.ValueOf(n).Convert(t)
	}
	return reflect.ValueOf(name).Convert(t)
}

// problem records a problem about the file, saying where the key is.
func (l *loader) problem(key, format string, args ...any) {
	l.probs = append(l.probs, Problem{Key: key, Message: fmt.Sprintf(format, args...) + l.where(key)})
}

// bad records a problem with a value and marks the key unreadable, so that
// Validate does not complain again about the zero value left in its place.
func (l *loader) bad(key, format string, args ...any) {
	l.problem(key, format, args...)
	l.skip.leaf[key] = true
}

// unreadable records a problem with a section and marks everything under it
// unreadable.
func (l *loader) unreadable(key, format string, args ...any) {
	l.problem(key, format, args...)
	l.skip.tree[key] = true
}

// got renders a value for a message, as written in the file where possible.
func (l *loader) got(key string, val any, env string, fromEnv bool) string {
	if fromEnv {
		return strconv.Quote(env)
	}
	if n := l.nodes[key]; n != nil {
		return describe(n)
	}
	return fmt.Sprint(val)
}

// where says where key's value comes from (see origins.where).
func (l *loader) where(key string) string { return origins{lines: l.lines, envs: l.envs}.where(key) }

// origins is where the keys of a file are: the line of each, and the
// variable that overrides it. The loader fills it; a loaded Config keeps
// it, for problems found after Load (Config.Invalid).
type origins struct {
	lines map[string]int
	envs  map[string]string
}

// where says where key's value comes from: " (from MESHROLL_X)" when a
// variable overrides it, else " (line N)" of the key or of its nearest
// ancestor in the file, else "".
func (o origins) where(key string) string {
	if name := o.envs[key]; name != "" && isSet(name) {
		return " (from " + name + ")"
	}
	for k := key; ; {
		if line, ok := o.lines[k]; ok {
			return fmt.Sprintf(" (line %d)", line)
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return ""
		}
		k = k[:i]
	}
}
