// Package selector reads label selectors, the way people who run a fleet
// pick machines: by what they are (site, ring, hardware) rather than by a
// list of names. The grammar and the rules for label keys and values are
// Kubernetes' own, so a selector written for one reads the same here:
//
//	ring=canary              equality (== too)
//	ring!=canary             inequality; a machine without ring matches
//	site in (fra1, ams2)     the value is one of these
//	site notin (fra1)        the value is none of these, or there is none
//	gpu                      the label is there, whatever its value
//	!gpu                     the label is not there
//
// Requirements are joined by commas, and a machine matches when it meets
// every one. The empty selector matches every machine. The package is pure:
// no I/O, so that the config, the CLI and the fleet page read a selector the
// same way.
package selector

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Op is how a requirement compares a label.
type Op string

// The operators of a requirement.
const (
	Equals       Op = "="
	NotEquals    Op = "!="
	In           Op = "in"
	NotIn        Op = "notin"
	Exists       Op = "exists"
	DoesNotExist Op = "!"
)

// Requirement is one condition of a selector on one label key.
type Requirement struct {
	Key    string
	Op     Op
	Values []string // one for = and !=, one or more for in and notin
}

// Matches says whether labels meet the requirement.
func (r Requirement) Matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Op {
	case Equals, In:
		return ok && slices.Contains(r.Values, v)
	case NotEquals, NotIn:
		return !ok || !slices.Contains(r.Values, v)
	case Exists:
		return ok
	case DoesNotExist:
		return !ok
	}
	return false
}

// String writes the requirement back in the grammar.
func (r Requirement) String() string {
	switch r.Op {
	case Exists:
		return r.Key
	case DoesNotExist:
		return "!" + r.Key
	case In, NotIn:
		return r.Key + " " + string(r.Op) + " (" + strings.Join(r.Values, ", ") + ")"
	}
	return r.Key + string(r.Op) + r.Values[0]
}

// Selector is a parsed selector: every requirement must hold.
type Selector struct {
	// Requirements in the order written.
	Requirements []Requirement
}

// Matches says whether labels meet every requirement. The empty selector
// matches everything.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s.Requirements {
		if !r.Matches(labels) {
			return false
		}
	}
	return true
}

// Empty says the selector has no requirement, so matches everything.
func (s Selector) Empty() bool { return len(s.Requirements) == 0 }

// String writes the selector back in the grammar, requirements in the
// order written.
func (s Selector) String() string {
	parts := make([]string, len(s.Requirements))
	for i, r := range s.Requirements {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// Error is a selector that does not parse: which, where (the byte offset,
// counted from 1) and why.
type Error struct {
	Selector string
	Pos      int
	Reason   string
}

// Error names the selector and the position, so a long one can be fixed
// without guessing.
func (e *Error) Error() string {
	return fmt.Sprintf("selector %q: at position %d: %s", e.Selector, e.Pos, e.Reason)
}

// Parse reads a selector. Blank (or only spaces) is the empty selector.
func Parse(s string) (Selector, error) {
	p := &parser{src: s}
	var out Selector
	p.space()
	if p.eof() {
		return out, nil
	}
	for {
		r, err := p.requirement()
		if err != nil {
			return Selector{}, err
		}
		out.Requirements = append(out.Requirements, r)
		p.space()
		if p.eof() {
			return out, nil
		}
		if p.src[p.pos] != ',' {
			return Selector{}, p.fail("want a comma between requirements, got %q", p.src[p.pos:p.pos+1])
		}
		p.pos++
		p.space()
		if p.eof() {
			return Selector{}, p.fail("a requirement must follow the comma")
		}
	}
}

type parser struct {
	src string
	pos int
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) space() {
	for !p.eof() && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

func (p *parser) fail(format string, args ...any) error {
	return &Error{Selector: p.src, Pos: p.pos + 1, Reason: fmt.Sprintf(format, args...)}
}

// word reads a run of the characters of a label key or value.
func (p *parser) word() string {
	start := p.pos
	for !p.eof() && wordByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./", c) >= 0
}

// key reads a label key and checks it.
func (p *parser) key() (string, error) {
	start := p.pos
	k := p.word()
	if k == "" {
		if p.eof() {
			return "", p.fail("want a label key, got the end")
		}
		return "", p.fail("want a label key, got %q", p.src[p.pos:p.pos+1])
	}
	if msg := CheckKey(k); msg != "" {
		p.pos = start
		return "", p.fail("%s", msg)
	}
	return k, nil
}

// value reads a label value (possibly empty) and checks it.
func (p *parser) value() (string, error) {
	start := p.pos
	v := p.word()
	if msg := CheckValue(v); msg != "" {
		p.pos = start
		return "", p.fail("%s", msg)
	}
	return v, nil
}

func (p *parser) requirement() (Requirement, error) {
	if p.src[p.pos] == '!' {
		p.pos++
		p.space()
		k, err := p.key()
		if err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: k, Op: DoesNotExist}, nil
	}
	k, err := p.key()
	if err != nil {
		return Requirement{}, err
	}
	p.space()
	rest := p.src[p.pos:]
	switch {
	case p.eof() || rest[0] == ',':
		return Requirement{Key: k, Op: Exists}, nil
	case strings.HasPrefix(rest, "!="):
		p.pos += 2
		return p.single(k, NotEquals)
	case strings.HasPrefix(rest, "=="):
		p.pos += 2
		return p.single(k, Equals)
	case rest[0] == '=':
		p.pos++
		return p.single(k, Equals)
	}
	op := Op(p.word())
	if op != In && op != NotIn {
		p.pos -= len(op)
		return Requirement{}, p.fail("want =, ==, !=, in or notin after %q", k)
	}
	p.space()
	if p.eof() || p.src[p.pos] != '(' {
		return Requirement{}, p.fail("want ( after %s", op)
	}
	p.pos++
	r := Requirement{Key: k, Op: op}
	for {
		p.space()
		v, err := p.value()
		if err != nil {
			return Requirement{}, err
		}
		if v == "" {
			return Requirement{}, p.fail("want a value in the parentheses of %s %s", k, op)
		}
		r.Values = append(r.Values, v)
		p.space()
		switch {
		case p.eof():
			return Requirement{}, p.fail("want ) to close the values of %s %s", k, op)
		case p.src[p.pos] == ',':
			p.pos++
		case p.src[p.pos] == ')':
			p.pos++
			return r, nil
		default:
			return Requirement{}, p.fail("want a comma or ) between values, got %q", p.src[p.pos:p.pos+1])
		}
	}
}

// single reads the value of an = or != requirement.
func (p *parser) single(k string, op Op) (Requirement, error) {
	p.space()
	v, err := p.value()
	if err != nil {
		return Requirement{}, err
	}
	return Requirement{Key: k, Op: op, Values: []string{v}}, nil
}

var (
	// nameRE is a label name, or a value: alphanumerics at both ends, and
	// '-', '_', '.' between.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// dnsRE is a DNS subdomain in lower case, a key's prefix.
	dnsRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// KeyRule and ValueRule say what a label key and value may be, for messages.
const (
	KeyRule   = "an optional DNS subdomain prefix and '/' (at most 253 characters), then a name of at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
	ValueRule = "empty, or at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
)

// CheckKey returns what is wrong with a label key, or "".
func CheckKey(k string) string {
	name := k
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		if prefix == "" || len(prefix) > 253 || !dnsRE.MatchString(prefix) {
			return fmt.Sprintf("%q is not a label key: want %s", k, KeyRule)
		}
		name = n
	}
	if len(name) > 63 || !nameRE.MatchString(name) {
		return fmt.Sprintf("%q is not a label key: want %s", k, KeyRule)
	}
	return ""
}

// CheckValue returns what is wrong with a label value, or "".
func CheckValue(v string) string {
	if v == "" {
		return ""
	}
	if len(v) > 63 || !nameRE.MatchString(v) {
		return fmt.Sprintf("%q is not a label value: want %s", v, ValueRule)
	}
	return ""
}
