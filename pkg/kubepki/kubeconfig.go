package kubepki

import (
	"encoding/base64"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// kubeconfig is the part of a kubeconfig file Kubeconfig writes: one
// cluster, one user with an embedded client certificate, one context.
type kubeconfig struct {
	APIVersion     string         `yaml:"apiVersion"`
	Kind           string         `yaml:"kind"`
	Clusters       []namedCluster `yaml:"clusters"`
	Users          []namedUser    `yaml:"users"`
	Contexts       []namedContext `yaml:"contexts"`
	CurrentContext string         `yaml:"current-context"`
}

type namedCluster struct {
	Name    string `yaml:"name"`
	Cluster struct {
		Server                   string `yaml:"server"`
		CertificateAuthorityData string `yaml:"certificate-authority-data"`
	} `yaml:"cluster"`
}

type namedUser struct {
	Name string `yaml:"name"`
	User struct {
		ClientCertificateData string `yaml:"client-certificate-data,omitempty"`
		ClientKeyData         string `yaml:"client-key-data,omitempty"`
		Token                 string `yaml:"token,omitempty"`
	} `yaml:"user"`
}

type namedContext struct {
	Name    string `yaml:"name"`
	Context struct {
		Cluster string `yaml:"cluster"`
		User    string `yaml:"user"`
	} `yaml:"context"`
}

// Kubeconfig is a kubeconfig for cluster, with server, trusting caPEM and
// authenticating as user with the client key pair (PEM, embedded).
func Kubeconfig(cluster, server, user string, caPEM, certPEM, keyPEM []byte) ([]byte, error) {
	if server == "" {
		return nil, errors.New("kubepki: kubeconfig: server is empty")
	}
	var kc kubeconfig
	kc.APIVersion, kc.Kind = "v1", "Config"
	var c namedCluster
	c.Name = cluster
	c.Cluster.Server, c.Cluster.CertificateAuthorityData = server, b64(caPEM)
	var u namedUser
	u.Name = user
	u.User.ClientCertificateData, u.User.ClientKeyData = b64(certPEM), b64(keyPEM)
	var x namedContext
	x.Name = user + "@" + cluster
	x.Context.Cluster, x.Context.User = cluster, user
	kc.Clusters, kc.Users, kc.Contexts, kc.CurrentContext = []namedCluster{c}, []namedUser{u}, []namedContext{x}, x.Name
	out, err := yaml.Marshal(kc)
	if err != nil {
		return nil, fmt.Errorf("kubepki: kubeconfig: %w", err)
	}
	return out, nil
}

// TokenKubeconfig is a kubeconfig for cluster, with server, trusting
// caPEM and authenticating as user with a bearer token (a bootstrap
// kubeconfig: what a kubelet's --bootstrap-kubeconfig reads).
func TokenKubeconfig(cluster, server, user string, caPEM []byte, token string) ([]byte, error) {
	if server == "" || token == "" {
		return nil, errors.New("kubepki: kubeconfig: server or token is empty")
	}
	var kc kubeconfig
	kc.APIVersion, kc.Kind = "v1", "Config"
	var c namedCluster
	c.Name = cluster
	c.Cluster.Server, c.Cluster.CertificateAuthorityData = server, b64(caPEM)
	var u namedUser
	u.Name = user
	u.User.Token = token
	var x namedContext
	x.Name = user + "@" + cluster
	x.Context.Cluster, x.Context.User = cluster, user
	kc.Clusters, kc.Users, kc.Contexts, kc.CurrentContext = []namedCluster{c}, []namedUser{u}, []namedContext{x}, x.Name
	out, err := yaml.Marshal(kc)
	if err != nil {
		return nil, fmt.Errorf("kubepki: kubeconfig: %w", err)
	}
	return out, nil
}

// kubeconfigParts reads back what Kubeconfig wrote: the server and the
// client key pair (PEM).
func kubeconfigParts(b []byte) (server string, certPEM, keyPEM []byte, err error) {
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return "", nil, nil, fmt.Errorf("kubepki: kubeconfig does not parse")
	}
	if len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		return "", nil, nil, fmt.Errorf("kubepki: kubeconfig: want one cluster and one user")
	}
	certPEM, err1 := base64.StdEncoding.DecodeString(kc.Users[0].User.ClientCertificateData)
	keyPEM, err2 := base64.StdEncoding.DecodeString(kc.Users[0].User.ClientKeyData)
	if err1 != nil || err2 != nil {
		return "", nil, nil, fmt.Errorf("kubepki: kubeconfig: client data is not base64")
	}
	return kc.Clusters[0].Cluster.Server, certPEM, keyPEM, nil
}

// b64 is the base64 a kubeconfig's *-data fields hold.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
