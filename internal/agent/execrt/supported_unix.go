//go:build unix

package execrt

// unsupported is empty where the runtime works.
const unsupported = ""
