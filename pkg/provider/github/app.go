package github

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// AppJWTLifetime is how long an App's token is valid: GitHub refuses an exp
// more than 10 minutes ahead
// (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app).
const AppJWTLifetime = 9 * time.Minute

// appClockSkew backdates iat, as GitHub advises, so a server clock a little
// ahead of ours does not see a token issued in the future.
const appClockSkew = 60 * time.Second

// ParseAppKey reads a GitHub App's private key: PEM, PKCS#1 ("RSA PRIVATE
// KEY", the format GitHub generates) or PKCS#8. Config values are expanded
// into the YAML text, where a scalar folds the key's line breaks into
// spaces, and a key kept in a variable may have them written as \n; such
// keys are read too. The error never holds the key.
func ParseAppKey(pemText string) (*rsa.PrivateKey, error) {
	if !strings.Contains(pemText, "\n") {
		// A key kept on one line in a variable, its line breaks written
		// as \n (base64 has no backslash).
		pemText = strings.ReplaceAll(pemText, `\n`, "\n")
	}
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		block = foldedPEM(pemText)
	}
	if block == nil {
		return nil, errors.New("github app: private_key is not PEM (is a variable or secret file unset?)")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("github app: private_key: unreadable PKCS#1 RSA key")
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("github app: private_key: unreadable PKCS#8 key")
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("github app: private_key is not an RSA key (GitHub signs App tokens with RS256)")
		}
		return rk, nil
	}
	return nil, fmt.Errorf("github app: private_key is a %q PEM block, not an RSA private key", block.Type)
}

// AppClaims are the claims of an App's token.
type AppClaims struct {
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
	Issuer    string `json:"iss"`
}

var appJWTHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))

// AppJWT is the token an App authenticates with for its own endpoints (such
// as /app/hook/deliveries): RS256, iss the App's id (or client id), iat a
// minute back, exp AppJWTLifetime after now.
func AppJWT(key *rsa.PrivateKey, appID string, now time.Time) (string, error) {
	claims, err := json.Marshal(AppClaims{IssuedAt: now.Add(-appClockSkew).Unix(), ExpiresAt: now.Add(AppJWTLifetime).Unix(), Issuer: appID})
	if err != nil {
		return "", err
	}
	signing := appJWTHeader + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("github app: sign token: %w", err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

var foldedPEMRe = regexp.MustCompile(`^\s*-----BEGIN ([A-Z ]+)-----([A-Za-z0-9+/=\s]+)-----END ([A-Z ]+)-----\s*$`)

// foldedPEM reads a PEM block whose line breaks became spaces (or none).
func foldedPEM(text string) *pem.Block {
	m := foldedPEMRe.FindStringSubmatch(text)
	if m == nil || m[1] != m[3] {
		return nil
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(m[2]), ""))
	if err != nil {
		return nil
	}
	return &pem.Block{Type: m[1], Bytes: der}
}
