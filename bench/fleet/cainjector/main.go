// Command cainjector runs cert-manager's CA injector (pkg/controller/cainjector) the way
// cert-manager's own cmd/cainjector wires it, against a kubeconfig ($KUBECONFIG): a
// controller-runtime manager whose client never caches Secrets, the injectors registered by
// cainjector.RegisterAllInjectors, Secrets watched by their metadata only. What differs from
// the shipped binary: leader election off, no Certificate data source (the cluster has no
// cert-manager CRDs; the Secret source, cert-manager.io/inject-ca-from-secret, is what
// bench/fleet/run.py measures), no config file, no pprof, and the metrics server on the
// address given. It is a peer that bench/fleet/run.py measures beside `certctl
// controller`; nothing of certctl is in it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The injectable kinds, by the names cainjector's options give them.
var kinds = []string{
	cainjector.ValidatingWebhookConfigurationName,
	cainjector.MutatingWebhookConfigurationName,
	cainjector.CustomResourceDefinitionName,
	cainjector.APIServiceName,
}

func main() {
	injectables := flag.String("injectables", strings.Join(kinds, ","),
		"injectable kinds to reconcile, comma-separated (default: all four, as cainjector's defaults)")
	healthAddr := flag.String("health-addr", "127.0.0.1:8081", "address of /healthz and /readyz")
	metricsAddr := flag.String("metrics-addr", "0", "address of /metrics (controller-runtime's); 0: off")
	flag.Parse()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	ctx := logf.NewContext(ctrl.SetupSignalHandler(), logf.Log, "cainjector")
	if err := run(ctx, *injectables, *healthAddr, *metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "cainjector:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, injectables, healthAddr, metricsAddr string) error {
	enabled := map[string]bool{}
	for _, kind := range strings.Split(injectables, ",") {
		known := false
		for _, k := range kinds {
			known = known || k == kind
		}
		if !known {
			return fmt.Errorf("--injectables: unknown kind %q (known: %s)", kind, strings.Join(kinds, ","))
		}
		enabled[kind] = true
	}
	config, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	restConfig := util.RestConfigWithUserAgent(config, "cainjector")

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))

	// As cmd/cainjector/app/controller.go: Secrets are read from the API server, never
	// cached (their watch is of metadata only, set by RegisterAllInjectors).
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true},
		Client: client.Options{
			Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}},
		},
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: healthAddr,
	})
	if err != nil {
		return fmt.Errorf("error creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// cainjector has no readiness check of its own: /readyz answers 200 once serving.
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: false,
		EnabledReconcilersFor:        enabled,
	})
	if err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}
