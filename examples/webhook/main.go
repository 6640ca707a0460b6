// Command webhook is a validating admission webhook small enough to read in one sitting: the
// webhook the certctl docs, demo and tests put beside certctl. It denies any object labelled
// example.certctl.io/deny: "true" and allows the rest.
//
// It serves /validate over TLS with the certificate certctl writes, and picks up a new one
// (a renewal or a rotation) at the next handshake without a restart: the kubelet replaces
// the Secret volume's files in place, and nothing signals the process when it does.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const (
	denyLabel   = "example.certctl.io/deny"
	denyMessage = "denied by the example webhook: the object is labelled " + denyLabel + `: "true"`
	maxBody     = 3 << 20 // the API server sends at most 3 MiB objects
)

func main() {
	certFile := flag.String("tls-cert-file", "/tls/tls.crt", "the serving certificate (PEM), re-read when it changes")
	keyFile := flag.String("tls-private-key-file", "/tls/tls.key", "the certificate's private key (PEM)")
	port := flag.Int("port", 9443, "the port to serve on")
	flag.Parse()
	log.SetFlags(log.LUTC | log.Ldate | log.Lmicroseconds)

	keyPair := &keyPairFiles{certFile: *certFile, keyFile: *keyFile}
	if _, err := keyPair.current(); err != nil {
		log.Fatalf("webhook: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", validate)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	server := &http.Server{
		Addr:              fmt.Sprintf(":%d", *port),
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return keyPair.current()
			},
		},
	}

	// SIGTERM: finish the calls in flight, then exit (the pod's preStop has already taken it
	// out of the endpoints).
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		server.Shutdown(ctx)
	}()
	log.Printf("webhook: serving /validate on :%d with %s", *port, *certFile)
	if err := server.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("webhook: %v", err)
	}
}

// admissionReview holds the fields of an admission.k8s.io/v1 AdmissionReview this webhook
// reads and writes.
type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

type admissionRequest struct {
	UID       string `json:"uid"`
	Operation string `json:"operation"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Kind      struct {
		Kind string `json:"kind"`
	} `json:"kind"`
	Object *struct {
		Metadata struct {
			Name         string            `json:"name"`
			GenerateName string            `json:"generateName"`
			Labels       map[string]string `json:"labels"`
		} `json:"metadata"`
	} `json:"object"`
}

type admissionResponse struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
	Status  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status,omitempty"`
}

func validate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	var review admissionReview
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&review); err != nil || review.Request == nil {
		log.Printf("webhook: refused a call from %s: not an AdmissionReview (%v)", r.RemoteAddr, err)
		http.Error(w, "the body is not an AdmissionReview with a request", http.StatusBadRequest)
		return
	}
	request := review.Request
	response := &admissionResponse{UID: request.UID, Allowed: true}
	name := request.Name
	// A DELETE has no object; a create may have only a generateName.
	if object := request.Object; object != nil {
		if name == "" {
			name = object.Metadata.Name + object.Metadata.GenerateName
		}
		if object.Metadata.Labels[denyLabel] == "true" {
			response.Allowed = false
			response.Status = &struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}{Code: http.StatusForbidden, Message: denyMessage}
		}
	}
	verdict := "allowed"
	if !response.Allowed {
		verdict = "denied"
	}
	// The name the caller dialled: the one the certificate must hold.
	calledAs := ""
	if r.TLS != nil {
		calledAs = r.TLS.ServerName
	}
	log.Printf("webhook: %s %s %s/%s: %s (called as %s)", request.Operation, request.Kind.Kind, request.Namespace, name, verdict, calledAs)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(admissionReview{APIVersion: review.APIVersion, Kind: review.Kind, Response: response})
}
