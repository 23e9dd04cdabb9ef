package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// bearer checks "Authorization: Bearer <token>". It keeps only the token's
// hash, and compares hashes in constant time, so neither the token's bytes
// nor its length can be learnt from response times.
type bearer struct {
	want [sha256.Size]byte
	on   bool
}

func newBearer(token string) bearer {
	if token == "" {
		return bearer{}
	}
	return bearer{want: sha256.Sum256([]byte(token)), on: true}
}

// allows reports whether r carries the token, or no token is required.
func (b bearer) allows(r *http.Request) bool {
	if !b.on {
		return true
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], b.want[:]) == 1
}

// refuse answers 401 without saying anything about the token.
func refuse(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="latscope"`)
	http.Error(w, "unauthorized: this agent needs its bearer token", http.StatusUnauthorized)
}
