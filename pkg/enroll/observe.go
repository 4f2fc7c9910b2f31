package enroll

import "net/http"

// codeRecorder is the ResponseWriter of an observed request: problem
// records the refusal's code on it.
type codeRecorder struct {
	http.ResponseWriter
	status int
	code   string
}

func (r *codeRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

// observed calls onRequest with each request's path and its outcome: ""
// when it was answered, else the code of the problem it was refused with
// (never the token or the proof).
func observed(h http.Handler, onRequest func(path, reason string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &codeRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		reason := rec.code
		if reason == "" && rec.status >= 400 {
			reason = http.StatusText(rec.status) // the mux's own refusals (unknown path, method)
		}
		path := r.URL.Path
		if path != PathDiscovery && path != PathJoin && path != PathRenew {
			path = "other" // a label, so never a caller's arbitrary path
		}
		onRequest(path, reason)
	})
}
