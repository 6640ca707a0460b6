// Command kube is the test bed's Kubernetes in one executable, as hyperkube once was: the
// upstream programs built from the module proxy (etcd, kube-apiserver, and for a node the
// kubelet, kube-controller-manager and kube-scheduler), each run by the name it is called by
// (a link of that name) or by its name as the first argument. One executable
// links the packages the programs share once, so a cold build pays one link, not one a
// program.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	_ "time/tzdata" // CronJob time zones

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// programs maps each name to its upstream main; args[0] is the program's own name.
var programs = map[string]func(args []string) int{
	"kube-apiserver": func(args []string) int { return runCommand(apiserver.NewAPIServerCommand(), args) },
	"kube-controller-manager": func(args []string) int {
		return runCommand(controllermanager.NewControllerManagerCommand(), args)
	},
	"kube-scheduler": func(args []string) int { return runCommand(scheduler.NewSchedulerCommand(), args) },
	"kubelet": func(args []string) int {
		return runCommand(kubelet.NewKubeletCommand(context.Background()), args)
	},
	"etcd": func(args []string) int {
		etcdmain.Main(args) // exits on its own
		return 0
	},
}

func runCommand(command *cobra.Command, args []string) int {
	command.SetArgs(args[1:])
	return cli.Run(command)
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
