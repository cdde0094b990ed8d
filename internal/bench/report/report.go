// Package report turns the benchmark's repeated measurements into the one
// table it prints: the machine it ran on, the date, and for every figure
// its median and spread (minimum to maximum) over the runs, so that a
// reader can tell a difference from noise.
package report

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Figure is one measured quantity and its values over the runs.
type Figure struct {
	Scenario string
	Name     string
	Unit     string
	Values   []float64
	// Note says what the figure is read against (a baseline, a target).
	Note string
}

// Median of the values (the mean of the middle two for an even count).
func (f Figure) Median() float64 { return Median(f.Values) }

// Median of vs; 0 for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Table collects figures in the order they are added.
type Table struct {
	Figures []Figure
	// Header lines printed above the table (machine, date, command).
	Header []string
}

// Add appends values to the figure scenario/name, creating it with unit
// and note on first use.
func (t *Table) Add(scenario, name, unit, note string, v ...float64) {
	for i := range t.Figures {
		if t.Figures[i].Scenario == scenario && t.Figures[i].Name == name {
			t.Figures[i].Values = append(t.Figures[i].Values, v...)
			return
		}
	}
	t.Figures = append(t.Figures, Figure{Scenario: scenario, Name: name, Unit: unit, Note: note, Values: v})
}

// Get returns the figure scenario/name.
func (t *Table) Get(scenario, name string) (Figure, bool) {
	for _, f := range t.Figures {
		if f.Scenario == scenario && f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// Write prints the header and the table as Markdown.
func (t *Table) Write(w io.Writer) error {
	var b strings.Builder
	for _, h := range t.Header {
		fmt.Fprintf(&b, "%s\n", h)
	}
	b.WriteString("\n")
	b.WriteString("| scenario | figure | median | spread (min–max) | runs | read against |\n")
	b.WriteString("|---|---|---:|---|---:|---|\n")
	for _, f := range t.Figures {
		lo, hi := spread(f.Values)
		fmt.Fprintf(&b, "| %s | %s | %s | %s–%s | %d | %s |\n", f.Scenario, f.Name,
			num(f.Median(), f.Unit), num(lo, ""), num(hi, ""), len(f.Values), f.Note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func spread(vs []float64) (float64, float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	return slices.Min(vs), slices.Max(vs)
}

func num(v float64, unit string) string {
	var s string
	switch {
	case v == float64(int64(v)) && (v >= 100 || v <= -100 || v == 0):
		s = fmt.Sprintf("%d", int64(v))
	case v >= 100 || v <= -100:
		s = fmt.Sprintf("%.0f", v)
	case v >= 10 || v <= -10:
		s = fmt.Sprintf("%.1f", v)
	default:
		s = fmt.Sprintf("%.2f", v)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

// LoadAverage is the machine's load average over the last minute, to say
// how busy it was when a figure was taken; false where it cannot be read
// (not Linux).
func LoadAverage() (float64, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	var load float64
	if _, err := fmt.Sscan(string(data), &load); err != nil {
		return 0, false
	}
	return load, true
}

// Machine describes the machine: CPU model and cores, memory, Go, OS.
func Machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "unknown memory"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				if _, err := fmt.Sscan(rest, &kb); err == nil {
					mem = fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	osName := runtime.GOOS
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		osName += " " + strings.TrimSpace(string(rel))
	}
	return fmt.Sprintf("%s, %d cores, %s, %s, %s/%s", cpu, runtime.NumCPU(), mem, runtime.Version(), osName, runtime.GOARCH)
}

// Date is the run's date in UTC.
func Date(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }
