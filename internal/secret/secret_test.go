package secret_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	yaml "go.yaml.in/yaml/v3"

	"github.com/meshroll/meshroll/internal/secret"
)

// holder is a struct carrying a secret, as the config's structs do.
type holder struct {
	User  string
	Token secret.String
}

func TestPrintedForms(t *testing.T) {
	jsonOf := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	slogJSON := func(v any) string {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "v", v)
		return strings.TrimSpace(buf.String())
	}
	slogText := func(v any) string {
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "v", v)
		return strings.TrimSpace(buf.String())
	}
	zerologInterface := func(v any) string {
		var buf bytes.Buffer
		l := zerolog.New(&buf)
		l.Info().Interface("v", v).Send()
		return strings.TrimSpace(buf.String())
	}
	yamlOf := func(v any) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}

	for _, tc := range []struct {
		name       string
		print      func(s secret.String) string
		set, empty string
	}{
		{"String", func(s secret.String) string { return s.String() }, `<redacted>`, ``},
		{"GoString", func(s secret.String) string { return s.GoString() }, `"<redacted>"`, `""`},
		{"Sprint", func(s secret.String) string { return fmt.Sprint(s) }, `<redacted>`, ``},
		{"%v", func(s secret.String) string { return fmt.Sprintf("%v", s) }, `<redacted>`, ``},
		{"%+v", func(s secret.String) string { return fmt.Sprintf("%+v", s) }, `<redacted>`, ``},
		{"%#v", func(s secret.String) string { return fmt.Sprintf("%#v", s) }, `"<redacted>"`, `""`},
		{"%s", func(s secret.String) string { return fmt.Sprintf("%s", s) }, `<redacted>`, ``},
		{"%q", func(s secret.String) string { return fmt.Sprintf("%q", s) }, `"<redacted>"`, `""`},
		{"%x", func(s secret.String) string { return fmt.Sprintf("%x", s) }, fmt.Sprintf("%x", secret.Redacted), ``},
		{"%12s", func(s secret.String) string { return fmt.Sprintf("%12s", s) }, `  <redacted>`, `            `},
		{"error", func(s secret.String) string { return fmt.Errorf("dial: %v: %w", s, errors.New("refused")).Error() }, `dial: <redacted>: refused`, `dial: : refused`},
		{"%v of a struct", func(s secret.String) string { return fmt.Sprintf("%v", holder{"alice", s}) }, `{alice <redacted>}`, `{alice }`},
		{"%+v of a struct", func(s secret.String) string { return fmt.Sprintf("%+v", holder{"alice", s}) }, `{User:alice Token:<redacted>}`, `{User:alice Token:}`},
		{"%#v of a struct", func(s secret.String) string { return fmt.Sprintf("%#v", holder{"alice", s}) }, `secret_test.holder{User:"alice", Token:"<redacted>"}`, `secret_test.holder{User:"alice", Token:""}`},
		{"json", func(s secret.String) string { return jsonOf(s) }, `"\u003credacted\u003e"`, `""`},
		{"json of a struct", func(s secret.String) string { return jsonOf(holder{"alice", s}) }, `{"User":"alice","Token":"\u003credacted\u003e"}`, `{"User":"alice","Token":""}`},
		{"MarshalJSON", func(s secret.String) string { b, _ := s.MarshalJSON(); return string(b) }, `"<redacted>"`, `""`},
		{"MarshalText", func(s secret.String) string { b, _ := s.MarshalText(); return string(b) }, `<redacted>`, ``},
		{"yaml of a struct", func(s secret.String) string { return yamlOf(holder{"alice", s}) }, "user: alice\ntoken: <redacted>", "user: alice\ntoken: \"\""},
		{"slog JSON", func(s secret.String) string { return slogJSON(s) }, `{"level":"INFO","msg":"m","v":"<redacted>"}`, `{"level":"INFO","msg":"m","v":""}`},
		{"slog JSON of a struct", func(s secret.String) string { return slogJSON(holder{"alice", s}) }, `{"level":"INFO","msg":"m","v":{"User":"alice","Token":"<redacted>"}}`, `{"level":"INFO","msg":"m","v":{"User":"alice","Token":""}}`},
		{"slog text", func(s secret.String) string { return slogText(s) }, `level=INFO msg=m v=<redacted>`, `level=INFO msg=m v=""`},
		{"slog text of a struct", func(s secret.String) string { return slogText(holder{"alice", s}) }, `level=INFO msg=m v="{User:alice Token:<redacted>}"`, `level=INFO msg=m v="{User:alice Token:}"`},
		{"zerolog Interface", func(s secret.String) string { return zerologInterface(s) }, `{"level":"info","v":"<redacted>"}`, `{"level":"info","v":""}`},
		{"zerolog Interface of a struct", func(s secret.String) string { return zerologInterface(holder{"alice", s}) }, `{"level":"info","v":{"User":"alice","Token":"<redacted>"}}`, `{"level":"info","v":{"User":"alice","Token":""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.print("hunter2")
			if strings.Contains(got, "hunter2") {
				t.Fatalf("the secret is printed: %s", got)
			}
			if got != tc.set {
				t.Errorf("set: got %s, want %s", got, tc.set)
			}
			if got := tc.print(""); got != tc.empty {
				t.Errorf("empty: got %s, want %s", got, tc.empty)
			}
		})
	}
}

func TestReveal(t *testing.T) {
	s := secret.String("hunter2")
	if s.Reveal() != "hunter2" {
		t.Errorf("Reveal = %q", s.Reveal())
	}
	if s != "hunter2" || s == "" {
		t.Error("a String does not compare as its value")
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
