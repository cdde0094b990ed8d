// Package examples holds the modules of the example mesh (examples/mesh.yaml,
// which `go run ./worker --dev` starts): a control plane (controller), a host
// module and a metrics agent. They are small programs so that a merge of any
// of them has something real to build.
package examples
