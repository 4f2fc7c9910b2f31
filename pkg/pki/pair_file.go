package pki

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
)

// PairFile is a key pair on disk that a TLS config presents, read again
// when either file is replaced (another file, modification time or size).
//
// A pair is written as two files (WritePair renames the key, then the
// certificate), so a handshake can fall between the renames and read a
// certificate with the other's key. A PairFile that has loaded a
// matching pair keeps presenting it until both files match again; only a
// pair that never loaded is an error.
type PairFile struct {
	cert, key string
	mu        sync.Mutex
	stamp     [2]os.FileInfo
	pair      *tls.Certificate
}

// LoadPairFile reads the pair in certFile and keyFile; an error says why it
// cannot be presented (a missing file, a bad PEM, a key that is not the
// certificate's).
func LoadPairFile(certFile, keyFile string) (*PairFile, error) {
	p := &PairFile{cert: certFile, key: keyFile}
	if _, err := p.Get(); err != nil {
		return nil, err
	}
	return p, nil
}

// Get returns the pair as the files hold it now, or the last pair that
// matched while they are mid-swap or unreadable.
func (p *PairFile) Get() (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var stamp [2]os.FileInfo
	for i, f := range []string{p.cert, p.key} {
		st, err := os.Stat(f)
		if err != nil {
			if p.pair != nil {
				return p.pair, nil
			}
			return nil, fmt.Errorf("pki: key pair %s: %w", f, err)
		}
		stamp[i] = st
	}
	if p.pair != nil && sameFile(p.stamp[0], stamp[0]) && sameFile(p.stamp[1], stamp[1]) {
		return p.pair, nil
	}
	c, err := tls.LoadX509KeyPair(p.cert, p.key)
	if err != nil {
		if p.pair != nil {
			return p.pair, nil
		}
		return nil, fmt.Errorf("pki: key pair %s, %s: %w", p.cert, p.key, err)
	}
	p.pair, p.stamp = &c, stamp
	return p.pair, nil
}

// sameFile tells whether b is the file a was: the same file (a rename puts
// another in its place), modification time and size.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
