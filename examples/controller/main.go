// Command controller is the example mesh's control plane: it stands for the
// service that must never be downgraded, and says which build it is.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version changes with every merge of the example controller.
const version = "1"

func main() {
	fmt.Printf("example controller %s serving\n", version)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
}
