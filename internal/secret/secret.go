// Package secret is a string type for credentials (API keys, host tokens,
// registry passwords) that prints as "<redacted>" however it is printed.
//
// A credential in meshroll's config travels far from where it is used: the
// config is logged at start-up, wrapped into errors, marshalled to JSON by
// structured loggers, and parts of it reach activities whose inputs and
// errors end up in workflow histories, which outlive the process and are
// shown to anyone with read access to the namespace. Redacting by hand on
// each struct that holds a secret has to be redone for every printed form
// and every new struct; a field of type String is redacted by fmt, JSON,
// text encoders and log/slog wherever it goes, and the one way to the real
// value, Reveal, is easy to find in a review.
//
// String is a string kind so that the config loader can assign it from a
// string and tests can compare it with ==. The redaction covers exported
// fields only: fmt does not call the methods of unexported fields, so keep a
// String in an exported field (or print it on its own).
package secret

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Redacted is what a non-empty String prints as. An empty one prints as
// "", so that an unset credential is visibly unset in a printed config.
const Redacted = "<redacted>"

// String is a credential. Convert a string to it where the credential is
// read (String(os.Getenv(...))), and Reveal it only where it is handed to
// what authenticates.
type String string

// Reveal is the credential itself, for the client, header or
// authenticator that needs it. Every other use of a String sees Redacted.
func (s String) Reveal() string { return string(s) }

// String is Redacted (or "" when empty), so that %v, %s and Print, and
// errors built with them, never show the credential.
func (s String) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString is the quoted redacted form, as %#v prints it, for callers of
// fmt.GoStringer.
func (s String) GoString() string { return strconv.Quote(s.String()) }

// Format prints the redacted form for every verb, with the flags, width
// and precision given, so that no verb or flag (%x, %q, %#v, %d) is a way
// around String.
func (s String) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), s.String())
}

// MarshalJSON is the redacted form as a JSON string, because JSON is how
// structured loggers (zerolog's Interface) print values and how Temporal
// stores activity inputs. It is written as is, so that an encoder that
// does not escape HTML (log/slog's) prints "<redacted>" rather than
// "\u003credacted\u003e".
func (s String) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText is the redacted form, for the encoders that fall back on text
// (YAML, for one).
func (s String) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue is the redacted form for log/slog.
func (s String) LogValue() slog.Value { return slog.StringValue(s.String()) }
