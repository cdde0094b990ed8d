// Package examples holds the modules of the example mesh in mesh.yaml: a
// control plane (controller) and a host module. They are small programs so
// that a merge of either has something real to build.
package examples
