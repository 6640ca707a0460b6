// Command cert-controller runs open-policy-agent/cert-controller's rotator the way the
// operators that embed it do (Gatekeeper among them): a controller-runtime manager with one
// CertRotator for one Secret and its webhook configurations, ready (/readyz 200) once the
// rotator closed its IsReady channel. It is a peer that bench/peers/run.py measures beside
// certctl; nothing of certctl is in it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	namespace := flag.String("namespace", "", "namespace of the Secret and the Service")
	secret := flag.String("secret", "webhook-server-cert", "the Secret the rotator keeps")
	service := flag.String("service", "", "the webhook's Service; the certificate names S.N.svc")
	certDir := flag.String("cert-dir", "", "where the Secret is mounted (tls.crt, tls.key)")
	validating := flag.String("validating", "", "ValidatingWebhookConfiguration names, comma-separated")
	mutating := flag.String("mutating", "", "MutatingWebhookConfiguration names, comma-separated")
	healthAddr := flag.String("health-addr", ":8081", "address of /readyz and /healthz")
	flag.Parse()
	if err := run(*namespace, *secret, *service, *certDir, *validating, *mutating, *healthAddr); err != nil {
		fmt.Fprintln(os.Stderr, "cert-controller:", err)
		os.Exit(1)
	}
}

func names(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}

func run(namespace, secret, service, certDir, validating, mutating, healthAddr string) error {
	if namespace == "" || service == "" || certDir == "" {
		return errors.New("--namespace, --service and --cert-dir are required")
	}
	config, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	manager, err := ctrl.NewManager(config, ctrl.Options{
		HealthProbeBindAddress: healthAddr,
		Metrics:                metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	var webhooks []rotator.WebhookInfo
	for _, name := range names(validating) {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: name, Type: rotator.Validating})
	}
	for _, name := range names(mutating) {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: name, Type: rotator.Mutating})
	}
	ready := make(chan struct{})
	err = rotator.AddRotator(manager, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: namespace, Name: secret},
		CertDir:        certDir,
		CAName:         service + "-ca",
		CAOrganization: "bench",
		DNSName:        service + "." + namespace + ".svc",
		IsReady:        ready,
		Webhooks:       webhooks,
	})
	if err != nil {
		return err
	}
	// As Gatekeeper does: ready once the rotator says the certificate is mounted and injected.
	if err := manager.AddReadyzCheck("certs", func(*http.Request) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("certificates not ready")
		}
	}); err != nil {
		return err
	}
	if err := manager.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return manager.Start(ctrl.SetupSignalHandler())
}
