package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hookyard/hookyard/pkg/config"
)

// installDoc is where the install the tests replay is documented.
const installDoc = "../docs/deploy.md"

// podIP stands for the address Kubernetes gives a pod (status.podIP).
const podIP = "10.1.2.3"

// pod is one container the chart runs, as a service would start in it.
type pod struct {
	name    string // the subcommand: receiver, ..., migrate
	spec    corev1.PodSpec
	c       corev1.Container
	service string
}

func (r *rendered) pods(t *testing.T) []pod {
	t.Helper()
	var out []pod
	for name, d := range r.deployments {
		out = append(out, pod{name: name, spec: d.Spec.Template.Spec, c: container(t, d.Spec.Template.Spec, name), service: name})
	}
	for _, j := range r.jobs {
		out = append(out, pod{name: "migrate", spec: j.Spec.Template.Spec, c: container(t, j.Spec.Template.Spec, "migrate"), service: "migrate"})
	}
	slices.SortFunc(out, func(a, b pod) int { return strings.Compare(a.name, b.name) })
	return out
}

// env resolves a variable of the pod as the service reads it: a value,
// with $(VAR) references expanded as the kubelet does (the pod IP from the
// downward API), or a _FILE path resolved to the mounted Secret key in
// secrets, written to a file. drop names variables to leave out, as if
// their Secret key were not mounted.
func (p pod) lookup(t *testing.T, secrets map[string]map[string]string, drop string) func(string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	return func(k string) (string, bool) {
		if k == drop || k == drop+"_FILE" {
			return "", false
		}
		for _, e := range p.c.Env {
			if e.Name != k {
				continue
			}
			if e.ValueFrom != nil {
				require.NotNil(t, e.ValueFrom.FieldRef, "%s: %s", p.name, k)
				require.Equal(t, "status.podIP", e.ValueFrom.FieldRef.FieldPath, "%s: %s", p.name, k)
				return podIP, true
			}
			v := strings.ReplaceAll(e.Value, "$(POD_IP)", podIP)
			if !strings.HasSuffix(k, "_FILE") {
				return v, true
			}
			secret, key, ok := secretFile(t, p.spec, p.c, v)
			require.True(t, ok, "%s: %s=%s is not in a mounted Secret", p.name, k, v)
			val, ok := secrets[secret][key]
			require.True(t, ok, "%s: %s names key %q of Secret %q, which the install does not create", p.name, k, key, secret)
			f := filepath.Join(dir, secret+"."+key)
			require.NoError(t, os.WriteFile(f, []byte(val+"\n"), 0o600))
			return f, true
		}
		return "", false
	}
}

// load reads the config the pod's service reads (the chart's ConfigMap, or
// the image's deploy/hookyard.yaml) and runs the check it makes before it
// starts.
func (p pod) load(t *testing.T, r *rendered, lookup func(string) (string, bool)) (*config.Config, error) {
	t.Helper()
	raw, err := os.ReadFile("hookyard.yaml")
	require.NoError(t, err)
	if path, ok := lookup("HOOKYARD_CONFIG"); ok {
		require.Equal(t, "/etc/hookyard-override/hookyard.yaml", path, p.name)
		require.Len(t, r.configMaps, 1)
		raw = []byte(r.configMaps[0].Data["hookyard.yaml"])
	}
	cfg, err := config.ParseService(raw, lookup, p.service)
	if err != nil {
		return nil, err
	}
	return cfg, cfg.CheckService(p.service)
}

// secretVars are the variables a pod gets from Secrets (NAME for NAME_FILE).
func (p pod) secretVars() []string {
	var out []string
	for _, e := range p.c.Env {
		if v, ok := strings.CutSuffix(e.Name, "_FILE"); ok {
			out = append(out, v)
		}
	}
	return out
}

// startsOnWhatItIsGiven checks every pod of r: its service loads its config
// from what the chart gives it (env, mounted files) and passes its start-up
// check, and every secret mounted into it is one it reads: without it, it
// would not start (DATABASE_URL, which has a default, aside).
func startsOnWhatItIsGiven(t *testing.T, r *rendered, secrets map[string]map[string]string) map[string]*config.Config {
	t.Helper()
	out := map[string]*config.Config{}
	for _, p := range r.pods(t) {
		cfg, err := p.load(t, r, p.lookup(t, secrets, ""))
		require.NoError(t, err, "hookyard %s starts", p.name)
		out[p.name] = cfg
		vars := p.secretVars()
		require.Contains(t, vars, "DATABASE_URL", p.name)
		for _, v := range vars {
			if v == "DATABASE_URL" {
				continue
			}
			_, err := p.load(t, r, p.lookup(t, secrets, v))
			require.Error(t, err, "%s is mounted into %s, which does not read it", v, p.name)
		}
	}
	return out
}

// documentedInstall reads the install of docs/deploy.md: the Secrets its
// `kubectl create secret generic` lines create (their keys) and the values
// of its `helm install --set` flags.
func documentedInstall(t *testing.T, path string) (secretKeys map[string][]string, vals map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(raw), " ")
	secretKeys, vals = map[string][]string{}, map[string]any{}
	installs := 0
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if m := regexp.MustCompile(`create secret generic (\S+)`).FindStringSubmatch(line); m != nil {
			for _, k := range regexp.MustCompile(`--from-literal=([A-Za-z0-9_]+)=`).FindAllStringSubmatch(line, -1) {
				secretKeys[m[1]] = append(secretKeys[m[1]], k[1])
			}
		}
		if strings.HasPrefix(line, "helm install ") {
			installs++
			for _, m := range regexp.MustCompile(`--set (\S+)`).FindAllStringSubmatch(line, -1) {
				require.NoError(t, strvals.ParseInto(m[1], vals), m[1])
			}
		}
	}
	require.Equal(t, 1, installs, "%s documents one helm install", path)
	require.NotEmpty(t, secretKeys, "%s creates the Secrets", path)
	return secretKeys, vals
}

// placeholderSecret is a value an operator following the docs puts in a
// Secret key.
func placeholderSecret(key string) string {
	switch {
	case strings.Contains(key, "OWNER"):
		return "postgres://hookyard_owner:owner-pw@db.internal:5432/hookyard?sslmode=verify-full"
	case strings.Contains(key, "DATABASE_URL"):
		return "postgres://hookyard_app:app-pw@db.internal:5432/hookyard?sslmode=verify-full"
	case strings.Contains(key, "WEBHOOK_SECRET"):
		return "whsec_" + strings.Repeat("5e", 16)
	case strings.Contains(key, "API_KEY"):
		return "rk_live_" + strings.Repeat("9k", 12)
	default:
		return strings.Repeat("c0", 24)
	}
}

// TestDocumentedInstallStartsEveryPod replays the install docs/deploy.md
// documents: the Secret it creates and `helm install` with its --set
// values. Every pod, the migrate Job's included, loads its config from what
// the chart gives it and passes its start-up check, and gets no secret it
// does not read: only the api has OPS_TOKEN, the receiver no API key, the
// processor no webhook secret.
func TestDocumentedInstallStartsEveryPod(t *testing.T) {
	t.Parallel()
	keys, vals := documentedInstall(t, installDoc)
	secrets := map[string]map[string]string{}
	for name, ks := range keys {
		secrets[name] = map[string]string{}
		for _, k := range ks {
			secrets[name][k] = placeholderSecret(k)
		}
	}
	r := renderWith(t, vals)
	cfgs := startsOnWhatItIsGiven(t, r, secrets)
	require.Len(t, cfgs, len(services)+1, "every service and migrate")
	for _, p := range r.pods(t) {
		_, hasOps := envValue(p.c, "OPS_TOKEN_FILE")
		require.Equal(t, p.name == "api", hasOps, "%s gets OPS_TOKEN", p.name)
	}
	require.Equal(t, "acct_…", cfgs["receiver"].Endpoints[0].SourceAccount)
}

// Migrations run as the role that owns the schema, in their own Job; the
// services connect as a role with data rights only (docs/deploy.md).
func TestMigrationJobConnectsAsTheSchemaOwnerAndServicesAsTheDataRole(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			pgSecret := value(t, r.values, "postgres.existingSecret").(string)
			if pgSecret == "" {
				pgSecret = value(t, r.values, "secrets.existingSecret").(string)
			}
			owner := value(t, r.values, "postgres.ownerKey").(string)
			data := value(t, r.values, "postgres.key").(string)
			require.NotEqual(t, owner, data)
			for _, p := range r.pods(t) {
				path, ok := envValue(p.c, "DATABASE_URL_FILE")
				require.True(t, ok, p.name)
				secret, key, ok := secretFile(t, p.spec, p.c, path)
				require.True(t, ok, p.name)
				require.Equal(t, pgSecret, secret, p.name)
				want := data
				if p.name == "migrate" {
					want = owner
				}
				require.Equal(t, want, key, "%s connects with postgres key %q", p.name, want)
				// Nothing else of the Secret is mounted: the owner's URL never
				// reaches a service, the data role's never the Job.
				for _, v := range p.spec.Volumes {
					if v.Secret != nil && v.Secret.SecretName == pgSecret && v.Name == "postgres-secret" {
						require.Len(t, v.Secret.Items, 1, p.name)
					}
				}
			}
		})
	}
}

// NetworkPolicies admit webhooks to the receivers only from the ingress
// controller's namespace, the ops API only from the named operator
// namespaces, and metrics only from the named monitoring namespaces; every
// pod the chart runs is selected by one.
func TestNetworkPoliciesAdmitOnlyTheNamedNamespaces(t *testing.T) {
	t.Parallel()
	r := renderWith(t, map[string]any{"networkPolicy": map[string]any{
		"ingressNamespaces": []any{"edge"}, "opsNamespaces": []any{"ops-tools", "sre"}, "metricsNamespaces": []any{"prom"}}})
	require.NotEmpty(t, r.networkPolicies)
	byComponent := map[string]*networkingv1.NetworkPolicy{}
	for _, np := range r.networkPolicies {
		c := np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"]
		require.NotContains(t, byComponent, c)
		byComponent[c] = np
		require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, c)
	}
	// Which namespaces reach which named port of each component.
	reach := func(c string) map[string][]string {
		np, ok := byComponent[c]
		require.True(t, ok, "%s has a NetworkPolicy", c)
		d := r.deployments[c]
		require.Equal(t, d.Spec.Selector.MatchLabels, np.Spec.PodSelector.MatchLabels, "%s's policy selects its pods", c)
		out := map[string][]string{}
		for _, rule := range np.Spec.Ingress {
			require.NotEmpty(t, rule.From, "%s: a rule without from admits everybody", c)
			require.NotEmpty(t, rule.Ports, "%s: a rule without ports admits every port", c)
			for _, port := range rule.Ports {
				name := port.Port.StrVal
				listenPort(t, container(t, d.Spec.Template.Spec, c), name)
				for _, from := range rule.From {
					require.Nil(t, from.IPBlock, c)
					require.Nil(t, from.PodSelector, "%s: namespaces only", c)
					require.NotNil(t, from.NamespaceSelector, c)
					ns := from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
					require.NotEmpty(t, ns, c)
					out[name] = append(out[name], ns)
				}
			}
		}
		for k := range out {
			slices.Sort(out[k])
		}
		return out
	}
	require.Equal(t, map[string][]string{"http": {"edge"}, "metrics": {"prom"}}, reach("receiver"))
	// The api serves its metrics on the ops port.
	require.Equal(t, map[string][]string{"ops": {"ops-tools", "prom", "sre"}}, reach("api"))
	for _, c := range []string{"outbox-relay", "processor", "reconciler", "effects"} {
		require.Equal(t, map[string][]string{"metrics": {"prom"}}, reach(c), c)
	}
	require.Len(t, byComponent, len(services), "a policy per service")

	// The defaults render policies too, admitting the namespaces values.yaml names.
	r = render(t, "")
	require.Len(t, r.networkPolicies, len(services))
	// And they can be turned off (a cluster whose CNI enforces none).
	r = renderWith(t, map[string]any{"networkPolicy": map[string]any{"enabled": false}})
	require.Empty(t, r.networkPolicies)
}

// The ops and metrics ports bind to the pod's own IP, not to every
// interface: nothing inside the pod's network namespace but the pod IP
// serves them, and the address is the one NetworkPolicies guard.
func TestOpsAndMetricsPortsBindToThePodIP(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			for _, p := range r.pods(t) {
				env := p.lookup(t, nil, "")
				noFiles := func(k string) (string, bool) {
					if strings.HasSuffix(k, "_FILE") {
						return "", false
					}
					return env(k)
				}
				cfg, err := config.ParseService([]byte("endpoints: []\n"), noFiles, "migrate")
				require.NoError(t, err, p.name)
				require.Equal(t, podIP+":8081", cfg.OpsAddr, p.name)
				require.Equal(t, podIP+":9100", cfg.MetricsAddr, p.name)
			}
		})
	}
}

// Receivers in the chart sit behind the ingress controller, so every
// connection comes from its pods' addresses: the receiver's cap per client
// address must not apply there, or a busy ingress would be refused its own
// connections. Fails if the chart's config leaves conns_per_client at its
// default (a quarter of max_connections).
func TestChartReceiversDoNotCapTheIngressAsOneClient(t *testing.T) {
	t.Parallel()
	keys, vals := documentedInstall(t, installDoc)
	secrets := map[string]map[string]string{}
	for name, ks := range keys {
		secrets[name] = map[string]string{}
		for _, k := range ks {
			secrets[name][k] = placeholderSecret(k)
		}
	}
	cfgs := startsOnWhatItIsGiven(t, renderWith(t, vals), secrets)
	rc := cfgs["receiver"].Receiver
	require.NotZero(t, rc.MaxConnections)
	require.GreaterOrEqual(t, rc.ConnsPerClient, rc.MaxConnections, "conns_per_client of the chart's receivers")
}
