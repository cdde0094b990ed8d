package prodserver

import "strings"

// tailLineMax is how much of one line Tail keeps: the server logs a stack
// trace on one line.
const tailLineMax = 300

// Tail is the last n lines of a process's output, each cut to 300 bytes,
// for an error or a failed test's log to show what the process said last
// without a page of one stack trace.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > tailLineMax {
			lines[i] = l[:tailLineMax] + "…"
		}
	}
	return strings.Join(lines, "\n")
}
