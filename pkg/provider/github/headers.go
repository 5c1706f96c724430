package github

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// CheckHeaders implements provider.HeaderChecker: a delivery needs an
// X-Hub-Signature-256 of the form GitHub sends, "sha256=" and 64 hex digits.
func (Verifier) CheckHeaders(_ *provider.Endpoint, h http.Header) error {
	sig := h.Get(SignatureHeader)
	hexPart, ok := strings.CutPrefix(sig, "sha256=")
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: no well-formed %s header", provider.ErrUnauthenticated, SignatureHeader)
	}
	return nil
}
