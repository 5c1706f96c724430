package deploy

import (
	"cmp"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hookyard/hookyard/pkg/config"
)

const chartDir = "helm/hookyard"

// services are the subcommands that run as long-lived Deployments.
var services = []string{"receiver", "outbox-relay", "processor", "reconciler", "effects", "api"}

// rendered holds a chart rendering, decoded strictly into the Kubernetes
// types: a misspelt field (readinesProbe) fails the decode instead of being
// dropped by the API server.
type rendered struct {
	values      map[string]any
	deployments map[string]*appsv1.Deployment // by component
	pdbs        map[string]*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	jobs        []*batchv1.Job
	services    []*corev1.Service
	configMaps  []*corev1.ConfigMap

	networkPolicies []*networkingv1.NetworkPolicy
}

// render renders the chart as `helm template` does, with the values of
// valuesFile (relative to the chart, "" for the defaults) over the chart's.
func render(t *testing.T, valuesFile string) *rendered {
	t.Helper()
	vals := map[string]any{}
	if valuesFile != "" {
		var err error
		vals, err = chartutil.ReadValuesFile(filepath.Join(chartDir, valuesFile))
		require.NoError(t, err)
	}
	return renderWith(t, vals)
}

// renderWith renders the chart with vals over its defaults, as `helm
// install --set` would.
func renderWith(t *testing.T, vals map[string]any) *rendered {
	t.Helper()
	out, top, err := renderValues(vals)
	require.NoError(t, err)
	merged, err := top.Table("Values")
	require.NoError(t, err)

	r := &rendered{values: merged.AsMap(), deployments: map[string]*appsv1.Deployment{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	for name, text := range out {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for doc := range strings.SplitSeq(text, "\n---") {
			if strings.TrimSpace(doc) == "" || strings.TrimSpace(doc) == "---" {
				continue
			}
			var meta struct{ Kind string }
			require.NoError(t, sigsyaml.Unmarshal([]byte(doc), &meta), name)
			decode := func(into any) {
				require.NoError(t, sigsyaml.UnmarshalStrict([]byte(doc), into), "%s:\n%s", name, doc)
			}
			switch meta.Kind {
			case "Deployment":
				d := new(appsv1.Deployment)
				decode(d)
				c := d.Spec.Selector.MatchLabels["app.kubernetes.io/component"]
				require.NotContains(t, r.deployments, c, "two Deployments for %s", c)
				r.deployments[c] = d
			case "PodDisruptionBudget":
				p := new(policyv1.PodDisruptionBudget)
				decode(p)
				r.pdbs[p.Spec.Selector.MatchLabels["app.kubernetes.io/component"]] = p
			case "HorizontalPodAutoscaler":
				h := new(autoscalingv2.HorizontalPodAutoscaler)
				decode(h)
				r.hpas = append(r.hpas, h)
			case "Job":
				j := new(batchv1.Job)
				decode(j)
				r.jobs = append(r.jobs, j)
			case "Service":
				s := new(corev1.Service)
				decode(s)
				r.services = append(r.services, s)
			case "ConfigMap":
				cm := new(corev1.ConfigMap)
				decode(cm)
				r.configMaps = append(r.configMaps, cm)
			case "NetworkPolicy":
				np := new(networkingv1.NetworkPolicy)
				decode(np)
				r.networkPolicies = append(r.networkPolicies, np)
			default:
				t.Fatalf("%s renders an unexpected kind %q", name, meta.Kind)
			}
		}
	}
	return r
}

// renderValues renders the chart with vals over its defaults.
func renderValues(vals map[string]any) (map[string]string, chartutil.Values, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, nil, err
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "hy", Namespace: "hookyard", Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, nil, err
	}
	// Strict: a template reading a value the chart does not define fails.
	out, err := engine.Engine{Strict: true}.Render(ch, top)
	return out, top, err
}

var valueSets = []struct{ name, file string }{
	{"default", ""},
	{"production", "ci/production-values.yaml"},
}

func value(t *testing.T, vals map[string]any, path string) any {
	t.Helper()
	var cur any = vals
	for k := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		require.True(t, ok, "values %s", path)
		cur = m[k]
	}
	return cur
}

func intValue(t *testing.T, vals map[string]any, path string) int32 {
	t.Helper()
	switch v := value(t, vals, path).(type) {
	case float64:
		return int32(v)
	case int:
		return int32(v)
	case int64:
		return int32(v)
	default:
		t.Fatalf("values %s: %T is not a number", path, v)
		return 0
	}
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	require.Len(t, spec.Containers, 1, name)
	return spec.Containers[0]
}

func TestChartRunsOneDeploymentPerServiceWithItsSubcommand(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			got := make([]string, 0, len(r.deployments))
			for c := range r.deployments {
				got = append(got, c)
			}
			require.ElementsMatch(t, services, got)
			for name, d := range r.deployments {
				c := container(t, d.Spec.Template.Spec, name)
				require.Equal(t, []string{name}, c.Args, "%s runs `hookyard %s`", name, name)
				require.Empty(t, c.Command, "%s keeps the image's entrypoint", name)
				names := map[string]bool{}
				for _, e := range c.Env {
					require.False(t, names[e.Name], "%s sets %s twice", name, e.Name)
					names[e.Name] = true
				}
				require.Equal(t, d.Spec.Selector.MatchLabels, subset(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels), "%s selects its own pods", name)
			}
		})
	}
}

func subset(labels, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// listenPort is the port a service's env makes it listen on for a named
// container port: the probes must ask the port the process serves them on.
func listenPort(t *testing.T, c corev1.Container, port string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == port {
			return p.ContainerPort
		}
	}
	t.Fatalf("%s has no container port %q", c.Name, port)
	return 0
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func TestEveryServiceIsProbedOnHealthzAndReadyzWhereItServesThem(t *testing.T) {
	t.Parallel()
	// The port each service serves /healthz and /readyz on, by the
	// variable that sets it (internal/cli: the receiver on HTTP_ADDR, the
	// ops API on OPS_ADDR, the others with /metrics on METRICS_ADDR).
	addrVar := map[string]string{"receiver": "HTTP_ADDR", "api": "OPS_ADDR"}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			for name, d := range r.deployments {
				c := container(t, d.Spec.Template.Spec, name)
				v := cmp.Or(addrVar[name], "METRICS_ADDR")
				addr, ok := envValue(c, v)
				require.True(t, ok, "%s sets %s", name, v)
				host, listen, _ := strings.Cut(addr, ":")
				// The pod IP (from the downward API) or every interface.
				require.Contains(t, []string{"0.0.0.0", "$(POD_IP)"}, host, "%s=%s must listen beyond loopback for the kubelet", v, addr)
				for probe, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
					require.NotNil(t, p, "%s probe %s", name, probe)
					require.NotNil(t, p.HTTPGet, "%s probe %s", name, probe)
					require.Equal(t, probe, p.HTTPGet.Path, name)
					port := p.HTTPGet.Port.IntVal
					if p.HTTPGet.Port.StrVal != "" {
						port = listenPort(t, c, p.HTTPGet.Port.StrVal)
					}
					require.Equal(t, strconv.Itoa(int(port)), listen, "%s probes %s on the port %s listens on", name, probe, v)
				}
			}
		})
	}
}

func TestEveryPodRequestsCPUAndMemoryAndCapsMemory(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			specs := map[string]corev1.PodSpec{}
			for name, d := range r.deployments {
				specs[name] = d.Spec.Template.Spec
			}
			for _, j := range r.jobs {
				specs[j.Name] = j.Spec.Template.Spec
			}
			for name, spec := range specs {
				res := container(t, spec, name).Resources
				require.False(t, res.Requests.Cpu().IsZero(), "%s requests CPU", name)
				require.False(t, res.Requests.Memory().IsZero(), "%s requests memory", name)
				require.False(t, res.Limits.Memory().IsZero(), "%s caps memory", name)
				require.True(t, *spec.SecurityContext.RunAsNonRoot, "%s runs as non-root", name)
			}
		})
	}
}

func TestReceiversScaleOnCPUWithAnAutoscaler(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			require.Len(t, r.hpas, 1)
			h := r.hpas[0]
			recv := r.deployments["receiver"]
			require.Equal(t, "Deployment", h.Spec.ScaleTargetRef.Kind)
			require.Equal(t, recv.Name, h.Spec.ScaleTargetRef.Name)
			require.Equal(t, intValue(t, r.values, "receiver.autoscaling.minReplicas"), *h.Spec.MinReplicas)
			require.Equal(t, intValue(t, r.values, "receiver.autoscaling.maxReplicas"), h.Spec.MaxReplicas)
			require.Len(t, h.Spec.Metrics, 1)
			require.Equal(t, corev1.ResourceCPU, h.Spec.Metrics[0].Resource.Name)
			// A replicas field would fight the autoscaler on every upgrade.
			require.Nil(t, recv.Spec.Replicas, "the receiver Deployment leaves replicas to the autoscaler")
			for name, d := range r.deployments {
				if name != "receiver" {
					require.NotNil(t, d.Spec.Replicas, "%s has a fixed replica count", name)
				}
			}
		})
	}
}

func TestProcessorReplicasNeverExceedThePartitionCount(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			partitions := intValue(t, r.values, "kafka.partitions")
			asked := intValue(t, r.values, "processor.replicas")
			p := r.deployments["processor"]
			require.Equal(t, min(asked, partitions), *p.Spec.Replicas)
			require.Equal(t, int32(0), p.Spec.Strategy.RollingUpdate.MaxSurge.IntVal, "a surge processor would own nothing")
		})
	}
	// The production values ask for more processors than partitions, so the
	// cap is exercised, not just present.
	r := render(t, "ci/production-values.yaml")
	require.Greater(t, intValue(t, r.values, "processor.replicas"), intValue(t, r.values, "kafka.partitions"))
}

func TestChartPartitionCountMatchesTheImageConfig(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("hookyard.yaml")
	require.NoError(t, err)
	var img struct {
		Kafka struct{ Partitions int32 } `yaml:"kafka"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &img))
	r := render(t, "")
	require.Equal(t, img.Kafka.Partitions, intValue(t, r.values, "kafka.partitions"),
		"values.yaml kafka.partitions caps processors by the partition count of deploy/hookyard.yaml")
	// A config given in the values (the chart's default one included) must
	// agree with kafka.partitions too.
	for _, vs := range valueSets {
		r = render(t, vs.file)
		var own struct {
			Kafka struct{ Partitions int32 } `yaml:"kafka"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(value(t, r.values, "config").(string)), &own))
		require.Equal(t, own.Kafka.Partitions, intValue(t, r.values, "kafka.partitions"), vs.name)
	}
}

func TestEveryServiceHasADisruptionBudgetThatLetsADrainProceed(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			for name, d := range r.deployments {
				p, ok := r.pdbs[name]
				require.True(t, ok, "%s has a PodDisruptionBudget", name)
				require.Equal(t, d.Spec.Selector.MatchLabels, p.Spec.Selector.MatchLabels, "%s's budget selects its pods", name)
				// minAvailable on a one-replica Deployment blocks every
				// node drain; maxUnavailable: 1 never does.
				require.Nil(t, p.Spec.MinAvailable, name)
				require.NotNil(t, p.Spec.MaxUnavailable, name)
				require.Equal(t, int32(1), p.Spec.MaxUnavailable.IntVal, name)
			}
			require.Len(t, r.pdbs, len(r.deployments))
		})
	}
}

func TestMigrationJobRunsBeforeInstallAndUpgrade(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			require.Len(t, r.jobs, 1)
			j := r.jobs[0]
			require.Equal(t, "pre-install,pre-upgrade", j.Annotations["helm.sh/hook"])
			c := container(t, j.Spec.Template.Spec, "migrate")
			require.Equal(t, []string{"migrate"}, c.Args)
			require.Equal(t, corev1.RestartPolicyNever, j.Spec.Template.Spec.RestartPolicy)
			require.NotNil(t, j.Spec.BackoffLimit)
			// It reads the same database (as another role: see
			// TestMigrationJobConnectsAsTheSchemaOwnerAndServicesAsTheDataRole)
			// and config as the services, and none of their secrets.
			proc := container(t, r.deployments["processor"].Spec.Template.Spec, "processor")
			public := func(c corev1.Container) []corev1.EnvVar {
				var out []corev1.EnvVar
				for _, e := range c.Env {
					if !strings.HasSuffix(e.Name, "_FILE") || e.Name == "DATABASE_URL_FILE" {
						out = append(out, e)
					}
				}
				return out
			}
			require.Equal(t, public(proc), public(c))
			require.Equal(t, public(c), c.Env, "the migrate Job gets no secret but the database's")
			// A config of its own must exist before the hook runs.
			for _, cm := range r.configMaps {
				require.Equal(t, "pre-install,pre-upgrade", cm.Annotations["helm.sh/hook"])
				require.Less(t, cm.Annotations["helm.sh/hook-weight"], j.Annotations["helm.sh/hook-weight"])
			}
		})
	}
}

// secretLike are variables whose value is a secret: they reach a pod only as
// a file from a Kubernetes Secret.
var secretLike = regexp.MustCompile(`(?i)(SECRET|TOKEN|PASSWORD|API_KEY|DATABASE_URL|USERNAME)`)

func TestSecretsReachPodsOnlyAsFilesFromKubernetesSecrets(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, vs.file)
			for name, d := range r.deployments {
				keys := value(t, r.values, "secrets.keys."+valuesKey[name]).([]any)
				spec := d.Spec.Template.Spec
				c := container(t, spec, name)
				for _, e := range c.Env {
					if e.ValueFrom != nil {
						require.Nil(t, e.ValueFrom.SecretKeyRef, "%s: %s from a secretKeyRef would show in the pod's environment", name, e.Name)
						require.NotNil(t, e.ValueFrom.FieldRef, "%s: %s", name, e.Name)
					}
					if !strings.HasSuffix(e.Name, "_FILE") {
						require.NotRegexp(t, secretLike, e.Name, "%s: %s is given as a value", name, e.Name)
						continue
					}
					_, _, ok := secretFile(t, spec, c, e.Value)
					require.True(t, ok, "%s: %s=%s is not in a mounted Secret", name, e.Name, e.Value)
				}
				for _, k := range append(keys, "DATABASE_URL") {
					_, ok := envValue(c, k.(string)+"_FILE")
					require.True(t, ok, "%s gets %s_FILE", name, k)
				}
			}
		})
	}
}

func TestChartRefusesASecretGivenAsAPlainVariable(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"OPS_TOKEN", "STRIPE_WEBHOOK_SECRET", "DATABASE_URL", "CHARGEBEE_WEBHOOK_PASSWORD", "STRIPE_API_KEY"} {
		_, _, err := renderValues(map[string]any{"env": map[string]any{name: "s3cret"}})
		require.ErrorContains(t, err, "env."+name+" looks like a secret", name)
	}
	_, _, err := renderValues(map[string]any{"env": map[string]any{"STRIPE_ACCOUNT_ID": "acct_1"}})
	require.NoError(t, err)
}

// secretFile resolves a path inside a container to the Secret and key
// mounted there.
func secretFile(t *testing.T, spec corev1.PodSpec, c corev1.Container, path string) (secret, key string, ok bool) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rest, found := strings.CutPrefix(path, m.MountPath+"/")
		if !found {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rest, true
			}
			for _, it := range v.Secret.Items {
				if it.Path == rest {
					return v.Secret.SecretName, it.Key, true
				}
			}
		}
	}
	return "", "", false
}

// valuesKey is the values key of each service.
var valuesKey = map[string]string{"receiver": "receiver", "outbox-relay": "outboxRelay", "processor": "processor",
	"reconciler": "reconciler", "effects": "effects", "api": "api"}

// TestProductionPodsStartOnTheirConfigAndSecrets reads the config every pod
// of the production values would read, with its environment and the files of
// its mounted Secrets, and runs the check a service makes before it starts:
// a variable the config names and the chart does not supply, or a secret
// path that does not land on a Secret key, fails here instead of in a
// CrashLoopBackOff.
func TestProductionPodsStartOnTheirConfigAndSecrets(t *testing.T) {
	t.Parallel()
	r := render(t, "ci/production-values.yaml")
	secrets := map[string]map[string]string{
		"hookyard-postgres": {
			"url":       "postgres://hookyard:pw@db.internal:5432/hookyard?sslmode=verify-full",
			"owner_url": "postgres://hookyard_owner:pw@db.internal:5432/hookyard?sslmode=verify-full",
		},
		"hookyard-secrets": {
			"OPS_TOKEN":             strings.Repeat("k", config.OpsTokenMinLen+8),
			"STRIPE_WEBHOOK_SECRET": "whsec_production_example_secret",
			"STRIPE_API_KEY":        "rk_live_example",
		},
	}
	cfgs := startsOnWhatItIsGiven(t, r, secrets)
	for name, cfg := range cfgs {
		want := secrets["hookyard-postgres"]["url"]
		if name == "migrate" {
			want = secrets["hookyard-postgres"]["owner_url"]
		}
		require.Equal(t, want, cfg.DatabaseURL, name)
		require.Equal(t, "acct_1LiveExample", cfg.Endpoints[0].SourceAccount, name)
		require.Len(t, cfg.KafkaBrokers, 3, name)
	}
	require.Len(t, r.configMaps, 1)
	require.Equal(t, value(t, r.values, "config"), r.configMaps[0].Data["hookyard.yaml"])
}

func TestServicesExposeOnlyTheReceiverAndTheOpsAPI(t *testing.T) {
	t.Parallel()
	r := render(t, "")
	var names []string
	for _, s := range r.services {
		names = append(names, s.Spec.Selector["app.kubernetes.io/component"])
		for _, p := range s.Spec.Ports {
			d := r.deployments[s.Spec.Selector["app.kubernetes.io/component"]]
			listenPort(t, container(t, d.Spec.Template.Spec, d.Name), p.TargetPort.StrVal)
		}
	}
	slices.Sort(names)
	require.Equal(t, []string{"api", "receiver"}, names)
}
