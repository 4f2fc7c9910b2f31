// Command testpod is the one program in the images tests/kubetest makes
// offline (kubetest.BuildImages): as "pause" it is the pod sandbox, as
// "web" a workload that prints which pod and node it runs as; both wait
// for SIGTERM (as PID 1 of their pod, a signal without a handler would
// be ignored) and exit 0 at once.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if len(os.Args) > 1 && os.Args[1] == "web" {
		fmt.Printf("web %s on %s\n", os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"))
	}
	<-sig
}
