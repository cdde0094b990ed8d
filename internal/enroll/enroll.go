// Package enroll is how a machine asks to join the mesh without anyone
// editing mesh.yaml: its host agent, started with the mesh's enrollment
// token and its labels, asks the worker's enrollment endpoint; the machine
// is then pending, and nothing is pushed to it until an operator admits it
// (`starter machine approve NAME`) or turns it away (`deny`). An admitted
// machine joins the config in force like one added to the file, so the
// worker brings it to the newest healthy builds of its modules.
//
// The package holds both ends of that one HTTP exchange, so that they
// cannot disagree: the agent's asking loop (Client) and the worker's
// handler (Handler).
package enroll

// Path is where the worker's enrollment endpoint takes an agent's Ask
// (POST, JSON, the enrollment token as a bearer token).
const Path = "/v1/enroll"

// Ask is what an agent sends: who it is, where its host API answers, and
// what it is.
type Ask struct {
	// Machine is the machine's name, as it would be under machines: in
	// mesh.yaml (and the agent's --machine).
	Machine string `json:"machine"`
	// Host is the base URL of the agent's host API, as the worker must
	// reach it (the agent's --advertise).
	Host string `json:"host"`
	// Labels say what the machine is (site, ring, hardware): the tiers'
	// selects place it by them.
	Labels map[string]string `json:"labels,omitempty"`
}

// States of an enrollment, in Answer.State.
const (
	// StatePending: asked, not yet decided; nothing is pushed to it.
	StatePending = "pending"
	// StateAdmitted: an operator admitted it; it is in the mesh.
	StateAdmitted = "admitted"
	// StateDenied: an operator turned it away; it gets nothing.
	StateDenied = "denied"
)

// Answer is the endpoint's reply to an Ask, and to a refused one: State is
// one of the states above, or "" when the ask was refused (Message says
// why).
type Answer struct {
	State string `json:"state,omitempty"`
	// Message is one line for the agent's log: what happens next, or what
	// is wrong and what to do.
	Message string `json:"message"`
}
