package agentcmd

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/cmdrun"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/registry"
	"github.com/meshroll/meshroll/internal/secret"
	"github.com/meshroll/meshroll/internal/selector"
)

// envPrefix prefixes every variable the agent reads.
const envPrefix = "MESHROLL_HOST"

type settings struct {
	listen, machine, state, token, runtime string
	tlsCert, tlsKey, dockerSocket          string
	startDelay                             time.Duration
	logLevel, logFormat                    string
	metrics                                bool
	ports                                  agent.PortRange
	// registry is for the exec runtime's pulls; its password is secret.
	registry                registry.Options
	stopGrace, healthyAfter time.Duration
	// enroll, when set, is the worker's enrollment URL: the agent asks it
	// to let the machine in, with enrollToken (secret), labels and advertise
	// (empty: advertiseURL of the address it listens on), again every
	// enrollEvery while pending.
	enroll, enrollToken, advertise string
	labels                         map[string]string
	enrollEvery                    time.Duration
}

// keys maps each configuration key to its flag.
var keys = map[string]string{
	"listen":             "listen",
	"machine":            "machine",
	"state":              "state",
	"token":              "token",
	"token_file":         "token-file",
	"trusted_network":    "trusted-network",
	"tls_cert":           "tls-cert",
	"tls_key":            "tls-key",
	"runtime":            "runtime",
	"docker_socket":      "docker-socket",
	"noop_start_delay":   "noop-start-delay",
	"registry":           "registry",
	"registry_username":  "registry-username",
	"registry_password":  "registry-password",
	"registry_insecure":  "registry-insecure",
	"registry_ca_file":   "registry-ca-file",
	"exec_stop_grace":    "exec-stop-grace",
	"exec_healthy_after": "exec-healthy-after",
	"metrics":            "metrics",
	"ports":              "ports",
	"log_level":          "log-level",
	"log_format":         "log-format",
	"enroll":             "enroll",
	"enroll_token_file":  "enroll-token-file",
	"labels":             "labels",
	"advertise":          "advertise",
	"enroll_every":       "enroll-every",
}

// enrollTokenEnv holds the enrollment token when no file does. It is a
// variable and a file only, never a flag: flags show in ps.
const enrollTokenEnv = envPrefix + "_ENROLL_TOKEN"

// load reads the settings from fs (defineFlags' flags, parsed), the
// environment and the config file, flags first.
func load(fs *pflag.FlagSet) (settings, error) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.AutomaticEnv()
	for key, flag := range keys {
		if err := v.BindPFlag(key, fs.Lookup(flag)); err != nil {
			return settings{}, fmt.Errorf("bind flag --%s: %w", flag, err)
		}
	}
	path, err := fs.GetString("config")
	if err != nil {
		return settings{}, fmt.Errorf("flag --config: %w", err)
	}
	if path == "" {
		path = os.Getenv(envPrefix + "_CONFIG")
	}
	if path != "" {
		v.SetConfigFile(path)
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" && ext != ".json" && ext != ".toml" {
			v.SetConfigType("yaml")
		}
		if err := v.ReadInConfig(); err != nil {
			return settings{}, fmt.Errorf("read config %s: %w", path, err)
		}
		var unknown []string
		for _, k := range v.AllKeys() {
			if _, ok := keys[k]; !ok {
				unknown = append(unknown, k)
			}
		}
		if unknown != nil {
			slices.Sort(unknown)
			known := slices.Sorted(func(yield func(string) bool) {
				for k := range keys {
					if !yield(k) {
						return
					}
				}
			})
			return settings{}, cmdrun.Usagef("config %s: unknown keys %s (known: %s)", path, strings.Join(unknown, ", "), strings.Join(known, ", "))
		}
	}

	s := settings{
		listen:    strings.TrimSpace(v.GetString("listen")),
		machine:   strings.TrimSpace(v.GetString("machine")),
		state:     strings.TrimSpace(v.GetString("state")),
		token:     v.GetString("token"),
		runtime:   strings.TrimSpace(v.GetString("runtime")),
		logLevel:  v.GetString("log_level"),
		logFormat: v.GetString("log_format"),
		tlsCert:   strings.TrimSpace(v.GetString("tls_cert")),
		tlsKey:    strings.TrimSpace(v.GetString("tls_key")),

		dockerSocket: strings.TrimSpace(v.GetString("docker_socket")),

		registry: registry.Options{
			Address:  strings.TrimSpace(v.GetString("registry")),
			Username: strings.TrimSpace(v.GetString("registry_username")),
			Password: secret.String(v.GetString("registry_password")),
			Insecure: v.GetBool("registry_insecure"),
			CAFile:   strings.TrimSpace(v.GetString("registry_ca_file")),
		},
	}
	if f := strings.TrimSpace(v.GetString("token_file")); f != "" {
		if s.token != "" {
			return settings{}, cmdrun.Usagef("give the token either directly or as a file, not both")
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return settings{}, fmt.Errorf("token file: %w", err)
		}
		if s.token = strings.TrimSpace(string(b)); s.token == "" {
			return settings{}, fmt.Errorf("token file %s is empty", f)
		}
	}
	if s.token == "" && !v.GetBool("trusted_network") {
		if err := loopbackOnly(s.listen); err != nil {
			return settings{}, err
		}
	}
	// Strictly: viper reads "maybe" as false, which would turn metrics off
	// without a word.
	if m := strings.TrimSpace(v.GetString("metrics")); m != "" {
		b, err := strconv.ParseBool(m)
		if err != nil {
			return settings{}, cmdrun.Usagef("--metrics %q: want true or false", m)
		}
		s.metrics = b
	}
	if s.ports, err = agent.ParsePortRange(v.GetString("ports")); err != nil {
		return settings{}, cmdrun.Usage(fmt.Errorf("--ports: %w", err))
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return settings{}, cmdrun.Usagef("--tls-cert and --tls-key go together")
	}
	if d := strings.TrimSpace(v.GetString("noop_start_delay")); d != "" {
		var err error
		if s.startDelay, err = time.ParseDuration(d); err != nil || s.startDelay < 0 {
			return settings{}, cmdrun.Usagef("noop start delay %q: want a duration of 0 or more, like 2s", d)
		}
	}
	for key, d := range map[string]*time.Duration{"exec_stop_grace": &s.stopGrace, "exec_healthy_after": &s.healthyAfter} {
		if str := strings.TrimSpace(v.GetString(key)); str != "" {
			var err error
			if *d, err = time.ParseDuration(str); err != nil || *d < 0 {
				return settings{}, cmdrun.Usagef("--%s %q: want a duration of 0 (the default) or more, like 10s", keys[key], str)
			}
		}
	}
	if s.registry.Address != "" {
		// Errors of package registry never carry the password.
		if _, err := s.registry.Host(); err != nil {
			return settings{}, cmdrun.Usage(fmt.Errorf("--registry: %w", err))
		}
	} else if s.registry.Username != "" || s.registry.Password != "" {
		return settings{}, cmdrun.Usagef("--registry-username and --registry-password need --registry")
	}
	if _, err := s.registry.Authenticator(); err != nil {
		return settings{}, cmdrun.Usage(err)
	}
	if s.machine == "" {
		return settings{}, cmdrun.Usagef("--machine is required (or %s_MACHINE, or machine: in the config file)", envPrefix)
	}
	if err := mesh.ValidName("machine", s.machine); err != nil {
		return settings{}, cmdrun.Usage(err)
	}
	if s.state == "" {
		s.state = filepath.Join(".meshroll", "hosts", s.machine)
	}
	if s.listen == "" {
		return settings{}, cmdrun.Usagef("--listen is empty")
	}
	for _, r := range s.token {
		if r < 0x21 || r == 0x7f {
			// Never echo the token.
			return settings{}, cmdrun.Usagef("token contains spaces or control characters, which no client can send")
		}
	}
	if err := loadEnrollment(v, &s); err != nil {
		return settings{}, err
	}
	return s, nil
}

// loadEnrollment reads the enrollment settings into s: all of them need
// --enroll, and --enroll needs a token.
func loadEnrollment(v *viper.Viper, s *settings) error {
	s.enroll = strings.TrimSpace(v.GetString("enroll"))
	s.advertise = strings.TrimSpace(v.GetString("advertise"))
	tokenFile := strings.TrimSpace(v.GetString("enroll_token_file"))
	s.enrollToken = os.Getenv(enrollTokenEnv)
	labels, err := labelsSetting(v.Get("labels"))
	if err != nil {
		return err
	}
	if s.enroll == "" {
		for _, given := range []struct {
			what string
			set  bool
		}{
			{"--enroll-token-file", tokenFile != ""},
			{enrollTokenEnv, s.enrollToken != ""},
			{"--labels", labels != ""},
			{"--advertise", s.advertise != ""},
			{"--enroll-every", v.IsSet("enroll_every")},
		} {
			if given.set {
				return cmdrun.Usagef("%s is for enrollment and needs --enroll (the worker's enrollment URL)", given.what)
			}
		}
		return nil
	}

	if err := checkBaseURL("enroll", s.enroll, "http://worker:8236"); err != nil {
		return err
	}
	if tokenFile != "" {
		if s.enrollToken != "" {
			return cmdrun.Usagef("give the enrollment token either in %s or in --enroll-token-file, not both", enrollTokenEnv)
		}
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("enrollment token file: %w", err)
		}
		if s.enrollToken = strings.TrimSpace(string(b)); s.enrollToken == "" {
			return fmt.Errorf("enrollment token file %s is empty", tokenFile)
		}
	}
	if s.enrollToken == "" {
		return cmdrun.Usagef("--enroll needs the mesh's enrollment token: set --enroll-token-file (or %s)", enrollTokenEnv)
	}
	for _, r := range s.enrollToken {
		if r < 0x21 || r == 0x7f {
			// Never echo the token.
			return cmdrun.Usagef("the enrollment token contains spaces or control characters, which no client can send")
		}
	}

	if s.labels, err = parseLabels(labels); err != nil {
		return err
	}

	if s.advertise != "" {
		if err := checkBaseURL("advertise", s.advertise, "http://10.0.0.7:7400"); err != nil {
			return err
		}
	} else {
		host, _, err := net.SplitHostPort(s.listen)
		if err != nil {
			return cmdrun.Usagef("--listen %q: want host:port, such as 127.0.0.1:7400", s.listen)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			return cmdrun.Usagef("--enroll with --listen %s needs --advertise: the worker must be told which of this machine's addresses reaches the host API (such as --advertise http://10.0.0.7:7400)", s.listen)
		}
	}

	s.enrollEvery = enroll.DefaultEvery
	if str := strings.TrimSpace(v.GetString("enroll_every")); str != "" {
		if s.enrollEvery, err = time.ParseDuration(str); err != nil || s.enrollEvery <= 0 {
			return cmdrun.Usagef("--enroll-every %q: want a duration above 0, like 15s", str)
		}
	}
	return nil
}

// labelsSetting is --labels as given: a flag or variable is a string, and a
// config file may also give a list of k=v.
func labelsSetting(v any) (string, error) {
	switch l := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(l), nil
	case []any:
		parts := make([]string, 0, len(l))
		for _, p := range l {
			s, ok := p.(string)
			if !ok {
				return "", cmdrun.Usagef("--labels: %v is not k=v", p)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	default:
		return "", cmdrun.Usagef("--labels: want k=v,k=v (such as site=lab,ring=canary)")
	}
}

// parseLabels reads k=v,k=v into a map (nil for none), with the keys and
// values that selectors can match.
func parseLabels(s string) (map[string]string, error) {
	var labels map[string]string
	for kv := range strings.SplitSeq(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, cmdrun.Usagef("--labels: %q is not k=v (such as site=lab)", kv)
		}
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if msg := selector.CheckKey(k); msg != "" {
			return nil, cmdrun.Usagef("--labels: %s", msg)
		}
		if msg := selector.CheckValue(val); msg != "" {
			return nil, cmdrun.Usagef("--labels: label %s: %s", k, msg)
		}
		if _, dup := labels[k]; dup {
			return nil, cmdrun.Usagef("--labels: label %s is given twice", k)
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = val
	}
	return labels, nil
}

// checkBaseURL refuses what cannot be the base URL --flag names: anything
// but an absolute http(s) URL with a host, and credentials, a query or a
// fragment, which a base URL cannot carry (the enrollment token has its
// own setting). The error never shows a password.
func checkBaseURL(flag, raw, example string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return cmdrun.Usagef("--%s: not a URL: want an absolute http(s) URL, such as %s", flag, example)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https", u.Hostname() == "":
		return cmdrun.Usagef("--%s %q: want an absolute http(s) URL, such as %s", flag, u.Redacted(), example)
	case u.User != nil:
		return cmdrun.Usagef("--%s %q: no user or password in the URL", flag, u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return cmdrun.Usagef("--%s %q: no query or fragment in a base URL", flag, u.Redacted())
	}
	return nil
}

// advertiseURL is --advertise's default: the host of --listen (so that a
// name a TLS certificate holds stays a name) at the port bound, which
// differs from --listen's when that is 0.
func advertiseURL(listen, bound string, tls bool) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		_, port, _ = net.SplitHostPort(listen)
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// loopbackOnly refuses a listen address beyond loopback for a host API
// without a token: anyone who reached it could declare what the machine
// runs, which on the docker runtime is root on the machine.
func loopbackOnly(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return cmdrun.Usagef("--listen %q: want host:port, such as 127.0.0.1:7400", listen)
	}
	if ip := net.ParseIP(host); strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return cmdrun.Usagef("--listen %s reaches beyond loopback and the host API has no token: anyone who reaches it could declare "+
		"what this machine runs (with --runtime docker, root on it). Set --token-file (or %s_TOKEN), listen on 127.0.0.1, "+
		"or pass --trusted-network if only trusted hosts can reach the address", listen, envPrefix)
}
