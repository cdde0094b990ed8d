package meshapi

import (
	"fmt"
	"strings"
)

// DetailList is a workflow's static details for the Web UI, which renders
// them as Markdown: one "- name: value" item a pair, so that they read as
// a list and not as one run-on line. pairs alternate names and values.
func DetailList(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(&b, "- %s: %s\n", pairs[i], pairs[i+1])
	}
	return b.String()
}
