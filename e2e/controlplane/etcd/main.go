// Command etcd is the upstream etcd server at the version kube-apiserver was released
// with, the storage under the real API server of the end-to-end tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
