// Command kube-apiserver is the upstream Kubernetes API server, built from the module
// proxy so that the end-to-end tests can run against the real thing.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
