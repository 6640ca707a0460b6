package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log"
	"os"
	"sync"
)

// keyPairFiles gives the certificate in two PEM files as they are now. It reads them at each
// handshake (two small files; a handshake costs far more) and parses only when their bytes
// changed, so a renewed certificate is served from the next connection on.
type keyPairFiles struct {
	certFile, keyFile string

	mu              sync.Mutex
	certPEM, keyPEM []byte
	parsed          *tls.Certificate
}

func (k *keyPairFiles) current() (*tls.Certificate, error) {
	certPEM, certErr := os.ReadFile(k.certFile)
	keyPEM, keyErr := os.ReadFile(k.keyFile)
	k.mu.Lock()
	defer k.mu.Unlock()
	if certErr != nil || keyErr != nil {
		if k.parsed != nil {
			return k.parsed, nil // a file briefly missing while it is replaced
		}
		if certErr != nil {
			return nil, fmt.Errorf("reading --tls-cert-file: %w", certErr)
		}
		return nil, fmt.Errorf("reading --tls-private-key-file: %w", keyErr)
	}
	if k.parsed != nil && bytes.Equal(certPEM, k.certPEM) && bytes.Equal(keyPEM, k.keyPEM) {
		return k.parsed, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if k.parsed != nil {
			// One file already new, the other not yet: serve the old pair until both match.
			log.Printf("webhook: keeping the certificate in use: %s and %s do not make a pair yet: %v",
				k.certFile, k.keyFile, err)
			return k.parsed, nil
		}
		return nil, fmt.Errorf("%s and %s: %w", k.certFile, k.keyFile, err)
	}
	if k.parsed != nil {
		log.Printf("webhook: serving the new certificate in %s", k.certFile)
	}
	k.certPEM, k.keyPEM, k.parsed = certPEM, keyPEM, &pair
	return k.parsed, nil
}
