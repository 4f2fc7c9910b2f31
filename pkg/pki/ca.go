package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"os"
	"time"
)

// DefaultValidity is a leaf certificate's lifetime when Request.Validity is 0.
const DefaultValidity = 365 * 24 * time.Hour

// DefaultCAValidity is the CA's lifetime when NewCA is given 0.
const DefaultCAValidity = 10 * 365 * 24 * time.Hour

// backdate is how far NotBefore lies before now, for clocks slightly behind.
const backdate = time.Minute

// CA is the cluster certificate authority: its certificate, its key and the
// certificate's PEM (what goes into every ca.crt).
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// NewCA makes a self-signed ECDSA P-256 CA valid from a minute before now for
// validity (0 = DefaultCAValidity). It may sign leaves only (path length 0).
func NewCA(commonName string, validity time.Duration, now time.Time) (*CA, error) {
	if commonName == "" {
		return nil, fmt.Errorf("%w: CA common name is empty", ErrBadRequest)
	}
	if validity == 0 {
		validity = DefaultCAValidity
	}
	if validity < 0 {
		return nil, fmt.Errorf("%w: CA validity %s, want > 0", ErrBadRequest, validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	skid, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der)}, nil
}

// LoadCA reads a CA from its certificate and key files. The certificate file
// may be a bundle (during CA rotation): the certificate matching the key is
// the CA's, and CertPEM is that certificate alone.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("pki: load CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: load CA: %w", err)
	}
	return ParseCA(certPEM, keyPEM)
}

// ParseCA is LoadCA on bytes.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	for _, c := range certs {
		if !keyMatches(c, key) {
			continue
		}
		if !c.IsCA {
			return nil, fmt.Errorf("%w: certificate %q is not a CA", ErrBadRequest, c.Subject.CommonName)
		}
		return &CA{Cert: c, Key: key, CertPEM: encodeCert(c.Raw)}, nil
	}
	return nil, fmt.Errorf("pki: CA: %w", ErrKeyMismatch)
}

// Save writes the CA's key, then its certificate, with WritePair.
func (ca *CA) Save(certFile, keyFile string) error {
	k, ok := ca.Key.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("pki: save CA: key type %T, want *ecdsa.PrivateKey", ca.Key)
	}
	keyPEM, err := encodeKey(k)
	if err != nil {
		return err
	}
	return WritePair(certFile, ca.CertPEM, keyFile, keyPEM)
}

// Pool is a cert pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a new ECDSA P-256 key and a certificate for it as req asks.
func (ca *CA) Issue(req Request, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: leaf key: %w", err)
	}
	certPEM, err = ca.sign(key.Public(), req, now)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// Reissue signs a new certificate as req asks for the key in keyPEM (a
// renewal that keeps the leaf's key). A key that does not parse is an
// error.
func (ca *CA) Reissue(keyPEM []byte, req Request, now time.Time) ([]byte, error) {
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return ca.sign(key.Public(), req, now)
}

// SignCSR signs the key of a PEM certificate request as req asks. The CSR
// contributes its public key only (after its signature is checked): the
// subject and SANs are req's, whatever the CSR claims, so a joining node
// cannot name itself someone else.
func (ca *CA) SignCSR(csrPEM []byte, req Request, now time.Time) ([]byte, error) {
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	return ca.sign(csr.PublicKey, req, now)
}

// ParseCSR parses a PEM certificate request and checks its signature.
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, _ := pemDecode(csrPEM)
	if block == nil {
		return nil, fmt.Errorf("%w: no %q block", ErrBadPEM, pemCSR)
	}
	if block.Type != pemCSR {
		return nil, fmt.Errorf("%w: block %q, want %q", ErrBadPEM, block.Type, pemCSR)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate request: %w", ErrBadPEM, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: certificate request signature: %w", ErrBadPEM, err)
	}
	return csr, nil
}

// NewCSR makes a new ECDSA P-256 key and a certificate request for it.
func NewCSR(commonName string) (csrPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CSR key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: commonName},
	}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: create CSR: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemEncode(pemCSR, der), keyPEM, nil
}

func (ca *CA) sign(pub crypto.PublicKey, req Request, now time.Time) ([]byte, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	validity := req.Validity
	if validity == 0 {
		validity = DefaultValidity
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter // a leaf never outlives its CA
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	skid, err := subjectKeyID(pub)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           req.Usage.extKeyUsage(),
		BasicConstraintsValid: true,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPs,
		SubjectKeyId:          skid,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %q: %w", req.CommonName, err)
	}
	return encodeCert(der), nil
}

// newSerial is a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: serial: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// subjectKeyID is the SHA-1 of the public key's DER (RFC 5280 4.2.1.2 (1),
// over the whole SubjectPublicKeyInfo, which is good enough for an id).
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("pki: public key: %w", err)
	}
	sum := sha1.Sum(der)
	return sum[:], nil
}
