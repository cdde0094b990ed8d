// Package meshapi is the one place where the names and shapes that cross a
// process boundary live: task queue, workflow types and IDs, signal, update and
// query names, the typed inputs and results of every workflow, activity and
// message, and the stable error types tests and callers match on. Workflows,
// activities, the worker and the starter all import it, so a rename is a
// compile error instead of a silently zero-valued payload.
package meshapi
