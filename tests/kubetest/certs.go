package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// Leaf is what a certificate IssueLeaf makes says: Kubernetes reads the
// user from the Common Name and the groups from the Organizations.
type Leaf struct {
	CommonName    string
	Organizations []string
	Server        bool // server auth (else client auth only)
	Client        bool
	DNSNames      []string
	IPs           []net.IP
}

// IssueLeaf signs a fresh ECDSA P-256 key for l with ca, valid a day, and
// returns the certificate and key PEM.
func IssueLeaf(ca *pki.CA, l Leaf) (certPEM, keyPEM []byte, err error) {
	if l.CommonName == "" || !l.Server && !l.Client {
		return nil, nil, fmt.Errorf("kubetest: leaf %q: want a common name and server or client usage", l.CommonName)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: serial: %w", err)
	}
	var usage []x509.ExtKeyUsage
	if l.Server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		usage = append(usage, x509.ExtKeyUsageClientAuth)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: l.CommonName, Organization: l.Organizations},
		NotBefore:    now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usage, BasicConstraintsValid: true,
		DNSNames: l.DNSNames, IPAddresses: l.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: sign %q: %w", l.CommonName, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// writeLeaf issues l and writes it to certFile and keyFile.
func writeLeaf(ca *pki.CA, l Leaf, certFile, keyFile string) error {
	c, k, err := IssueLeaf(ca, l)
	if err != nil {
		return err
	}
	return pki.WritePair(certFile, c, keyFile, k)
}

// newKeyPair makes an ECDSA P-256 key pair as PEM: PKCS#8 private key and
// PKIX public key (what kube-apiserver reads for service-account tokens).
func newKeyPair() (privPEM, pubPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: key: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("kubetest: key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
}
