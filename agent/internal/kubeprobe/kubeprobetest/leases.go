package kubeprobetest

import (
	"fmt"
	"net/http"
	"strings"
)

// LeasesPath is where an API server serves the kube-system leases; Leases
// answers below it.
const LeasesPath = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"

// Leases answers the reads of the kube-system leases under LeasesPath as
// an API server: without a client certificate 401; a lease of holders
// with its holder identity ("": a lease without a holder); any other name
// 404 with a Status.
func Leases(holders map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		holder, ok := holders[strings.TrimPrefix(r.URL.Path, LeasesPath)]
		switch {
		case !ok:
			http.Error(w, `{"kind":"Status","reason":"NotFound"}`, http.StatusNotFound)
		case holder == "":
			fmt.Fprint(w, `{"kind":"Lease","spec":{}}`)
		default:
			fmt.Fprintf(w, `{"kind":"Lease","spec":{"holderIdentity":%q}}`, holder)
		}
	}
}
