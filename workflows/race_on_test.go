//go:build race

package workflows

// raceSlowdown is how much slower the race detector makes workflow code
// (five to ten times): deadlines measured in workflow tasks scale by it.
const raceSlowdown = 5
