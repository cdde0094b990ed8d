// Command metrics is the example mesh's metrics agent, running beside the
// host module on every machine: a second module per machine, so that a
// roll-out of one is seen to keep the other exactly as it runs.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version changes with every merge of the example metrics module.
const version = "1"

func main() {
	fmt.Printf("example metrics agent %s collecting\n", version)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}
