package standardwebhooks

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Prefixes of serialized keys
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#signature-scheme):
// "whsec_" a symmetric secret (v1 signatures, HMAC-SHA256), "whpk_" an
// ed25519 public key (v1a signatures), "whsk_" the sender's ed25519 secret
// key, which a receiver must never hold.
const (
	prefixSecret     = "whsec_"
	prefixPublicKey  = "whpk_"
	prefixPrivateKey = "whsk_"
)

// errEmptyKey: anyone can sign with an empty key, so it never verifies.
var errEmptyKey = errors.New("is an empty key")

// key is one endpoint secret as the verifier uses it: exactly one of hmac
// and public is set.
type key struct {
	hmac   []byte
	public ed25519.PublicKey
}

// parseKey reads one endpoint secret. It accepts what the official
// libraries accept: "whsec_" and base64 of the key, or the base64 alone
// (the Go, Python and JavaScript libraries all strip an optional prefix),
// padded or not (Python pads before decoding, "in case whsecret is unpadded
// base64"; Ruby's and PHP's decoders need no padding; only the Go and Rust
// libraries insist on it). And "whpk_" with base64 of a 32-byte ed25519
// public key. Its errors never repeat the secret.
func parseKey(secret string) (key, error) {
	switch {
	case strings.HasPrefix(secret, prefixPublicKey):
		b, err := decodeBase64(strings.TrimPrefix(secret, prefixPublicKey))
		if err != nil {
			return key{}, fmt.Errorf("is a %s key that is not base64", prefixPublicKey)
		}
		if len(b) != ed25519.PublicKeySize {
			return key{}, fmt.Errorf("is a %s key of %d bytes; an ed25519 public key has %d", prefixPublicKey, len(b), ed25519.PublicKeySize)
		}
		return key{public: ed25519.PublicKey(b)}, nil
	case strings.HasPrefix(secret, prefixPrivateKey):
		return key{}, fmt.Errorf("is a %s signing key, which only the sender may hold; configure its %s public key", prefixPrivateKey, prefixPublicKey)
	}
	b, err := decodeBase64(strings.TrimPrefix(secret, prefixSecret))
	if err != nil {
		return key{}, fmt.Errorf("must be %s and a base64 key, or %s and a base64 ed25519 public key", prefixSecret, prefixPublicKey)
	}
	if len(b) == 0 {
		return key{}, errEmptyKey
	}
	return key{hmac: b}, nil
}

// decodeBase64 decodes standard base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// CheckSecrets returns an error for every secret of ep the verifier cannot
// use, each starting with the secret's key ("secrets[1] ...") and naming
// the endpoint, never repeating the secret. Verify skips such a secret, so
// without this check it would load silently and every delivery signed for
// it would fail. The provider's endpoint check (CheckEndpoint) returns
// these errors.
func CheckSecrets(ep *provider.Endpoint) []error {
	var errs []error
	for i, s := range ep.Secrets {
		if strings.TrimSpace(s) == "" {
			// Unset: whether that is allowed depends on the service (one
			// that verifies no deliveries need not have it); config says.
			continue
		}
		if _, err := parseKey(s); err != nil {
			errs = append(errs, fmt.Errorf("secrets[%d] of endpoint %q %w", i, ep.ID, err))
		}
	}
	return errs
}

// EndpointKeys implements provider.EndpointChecker: a Standard Webhooks
// endpoint reads fetch, its sender's API.
func (Verifier) EndpointKeys() []string { return []string{"fetch"} }

// CheckEndpoint implements provider.EndpointChecker: every secret must be a
// key the verifier can use (CheckSecrets). It is declared on Verifier, and
// so promoted to Provider; a CheckEndpoint declared on Provider itself
// must return CheckSecrets' errors too
// (TestKeysTheVerifierCannotUseAreRefusedByTheEndpointCheck).
// It also checks the endpoint's fetch API (CheckFetch).
func (Verifier) CheckEndpoint(ep *provider.Endpoint) []error {
	errs := CheckSecrets(ep)
	if ep.Fetch != nil {
		errs = append(errs, CheckFetch(ep.Fetch)...)
	}
	return errs
}
