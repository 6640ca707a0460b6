// Command kube is the test bed's Kubernetes in one executable, as hyperkube once was: the
// upstream programs built from the module proxy, each run by the name it is called by (a
// link named kube-apiserver or etcd) or by its name as the first argument. One executable
// links the packages the programs share once, so a cold build pays one link, not one a
// program.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// programs maps each name to its upstream main; args[0] is the program's own name.
var programs = map[string]func(args []string) int{
	"kube-apiserver": func(args []string) int {
		command := apiserver.NewAPIServerCommand()
		command.SetArgs(args[1:])
		return cli.Run(command)
	},
	"etcd": func(args []string) int {
		etcdmain.Main(args) // exits on its own
		return 0
	},
}

func main() {
	args := os.Args
	run, ok := programs[filepath.Base(args[0])]
	if !ok && len(args) > 1 {
		run, ok = programs[args[1]]
		args = args[1:]
	}
	if !ok {
		names := make([]string, 0, len(programs))
		for name := range programs {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube PROGRAM [ARGS...], or a link named PROGRAM; "+
			"PROGRAM is one of %s\n", strings.Join(names, ", "))
		os.Exit(2)
	}
	os.Exit(run(args))
}
