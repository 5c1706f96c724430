package standardwebhooks_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
)

// A whpk_ key the verifier cannot use stops the config from loading, with
// an error naming the endpoint and the secret's place; before, it loaded
// and every delivery failed. Fails if config accepts it.
func TestUnusableKeyIsRefusedAtStartNamingTheEndpoint(t *testing.T) {
	t.Parallel()
	short := "whpk_" + base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	_, err := config.Parse([]byte(`
endpoints:
  - id: sender-x
    provider: standard-webhooks
    source_account: sender
    environment: test
    secrets: ["whsec_`+base64.StdEncoding.EncodeToString([]byte("receiver-key-0123456789abcdef"))+`", "`+short+`"]
`), func(string) (string, bool) { return "", false })
	require.Error(t, err)
	require.Contains(t, err.Error(), "endpoints[0].secrets[1]")
	require.Contains(t, err.Error(), `"sender-x"`)
	require.NotContains(t, err.Error(), short)
}
