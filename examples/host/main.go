// Command host is the example mesh's host module, running on every machine.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version changes with every merge of the example host module.
const version = "1"

func main() {
	fmt.Printf("example host module %s running\n", version)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}
