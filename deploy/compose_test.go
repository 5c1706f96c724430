package deploy

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hookyard/hookyard/pkg/config"
)

// composeFile is the part of docker-compose.yml these tests read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

// dotEnv reads .env.example: every VAR=value line, and every "# VAR=value"
// line (an optional variable, shown commented out) as unset.
func dotEnv(t *testing.T) (set map[string]string, listed map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile("../.env.example")
	require.NoError(t, err, ".env.example lists the variables of docker-compose.yml and of the binary")
	set, listed = map[string]string{}, map[string]bool{}
	line := regexp.MustCompile(`^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$`)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		listed[m[2]] = true
		if m[1] == "" {
			set[m[2]] = m[3]
		}
	}
	require.NoError(t, sc.Err())
	return set, listed
}

// composeVar is an interpolation of the compose file: ${VAR}, ${VAR:-def},
// ${VAR-def}, ${VAR:?err}, ${VAR?err}, or $VAR.
var composeVar = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate expands s as `docker compose` does from env (.env), and
// reports what a required variable's absence would stop.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		g := composeVar.FindStringSubmatch(m)
		name, op, arg := orName(g[1], g[4]), g[2], g[3]
		v, ok := env[name]
		switch op {
		case ":-":
			if v == "" {
				return arg
			}
		case "-":
			if !ok {
				return arg
			}
		case ":?":
			require.NotEmpty(t, v, "compose stops on ${%s:?}: %s", name, arg)
		case "?":
			require.True(t, ok, "compose stops on ${%s?}: %s", name, arg)
		}
		return v
	})
}

func orName(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// composeVars are the variables docker-compose.yml interpolates, and which
// of them it requires (${VAR:?...}).
func composeVars(raw []byte) (all []string, required map[string]bool) {
	required = map[string]bool{}
	for _, g := range composeVar.FindAllStringSubmatch(string(raw), -1) {
		name := orName(g[1], g[4])
		if name == "" {
			continue
		}
		if !slices.Contains(all, name) {
			all = append(all, name)
		}
		if g[2] == ":?" || g[2] == "?" {
			required[name] = true
		}
	}
	return all, required
}

// placeholder is what an operator following .env.example puts in a
// required variable: a long random value.
func placeholder(name string) string {
	if strings.Contains(name, "STRIPE_WEBHOOK") {
		return "whsec_" + strings.Repeat("f3", 16)
	}
	return strings.Repeat("a7", 20)
}

func readCompose(t *testing.T) ([]byte, composeFile) {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var f composeFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	return raw, f
}

// TestComposeServicesLoadTheImageConfigFromTheEnvironmentComposeGivesThem
// runs the start-up check of every service `docker compose up` starts from
// the image: deploy/hookyard.yaml, expanded with exactly the environment
// the compose file gives that container (with .env made from .env.example
// and its required values filled in), must load and pass the production
// check. A variable the config names and compose does not pass stops the
// first deployment at `migrate` (exit 1) instead of here.
func TestComposeServicesLoadTheImageConfigFromTheEnvironmentComposeGivesThem(t *testing.T) {
	t.Parallel()
	raw, f := readCompose(t)
	set, _ := dotEnv(t)
	_, required := composeVars(raw)
	env := map[string]string{}
	for k, v := range set {
		env[k] = v
	}
	for k := range required {
		if env[k] == "" {
			env[k] = placeholder(k)
		}
	}
	img, err := os.ReadFile("hookyard.yaml")
	require.NoError(t, err)
	dockerfile, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	require.Contains(t, string(dockerfile), "COPY deploy/hookyard.yaml /etc/hookyard/hookyard.yaml")
	require.Contains(t, string(dockerfile), "ENV HOOKYARD_CONFIG=/etc/hookyard/hookyard.yaml")

	var started []string
	for name, svc := range f.Services {
		if svc.Build == nil {
			continue
		}
		started = append(started, name)
		given := map[string]string{}
		for k, v := range svc.Environment {
			given[k] = interpolate(t, v, env)
		}
		require.NotContains(t, given, "HOOKYARD_CONFIG", "%s runs the image's config", name)
		lookup := func(k string) (string, bool) { v, ok := given[k]; return v, ok }
		cfg, err := config.Parse(img, lookup)
		require.NoError(t, err, "hookyard %s loads deploy/hookyard.yaml", name)
		require.NoError(t, cfg.CheckProduction(), "hookyard %s passes the production check", name)
		require.Contains(t, cfg.DatabaseURL, env["POSTGRES_PASSWORD"], "%s connects with the database password", name)
		require.Equal(t, []string{"kafka:9092"}, cfg.KafkaBrokers, name)
	}
	require.Contains(t, started, "migrate")
	require.Contains(t, started, "receiver")
}

// TestComposeRunsTheKafkaTheSuiteProvesAndAPostgresWithAPassword: the
// broker image is the release kafka/pom.xml tests against (make
// test-kafka), and Postgres asks for a password from the environment
// instead of trusting every connection on its published port.
func TestComposeRunsTheKafkaTheSuiteProvesAndAPostgresWithAPassword(t *testing.T) {
	t.Parallel()
	_, f := readCompose(t)
	pom, err := os.ReadFile("../kafka/pom.xml")
	require.NoError(t, err)
	m := regexp.MustCompile(`<kafka.version>([^<]+)</kafka.version>`).FindSubmatch(pom)
	require.NotNil(t, m)
	for _, name := range []string{"kafka", "topic-init"} {
		require.Equal(t, "apache/kafka:"+string(m[1]), f.Services[name].Image, name)
	}
	pg := f.Services["postgres"].Environment
	require.NotContains(t, pg, "POSTGRES_HOST_AUTH_METHOD", "postgres must not trust every connection")
	require.Regexp(t, `^\$\{POSTGRES_PASSWORD:\?[^}]+\}$`, pg["POSTGRES_PASSWORD"])
}

// TestEnvExampleListsEveryVariableOfComposeAndTheBinary: .env.example is
// the one place an operator learns what to set.
func TestEnvExampleListsEveryVariableOfComposeAndTheBinary(t *testing.T) {
	t.Parallel()
	raw, _ := readCompose(t)
	set, listed := dotEnv(t)
	all, required := composeVars(raw)
	for _, v := range all {
		require.True(t, listed[v], ".env.example lists %s (docker-compose.yml reads it)", v)
	}
	for v := range required {
		if secretLike.MatchString(v) {
			require.Empty(t, set[v], ".env.example gives no value for the secret %s", v)
		}
	}
	// Every variable the binary reads: the config's environment
	// (pkg/config) and the commands' (internal/cli), by the calls that
	// read them, and those of the image's config.
	read := regexp.MustCompile(`(?:\benv|envOr|Getenv|LookupEnv)\("([A-Z][A-Z0-9_]*)"`)
	var sources []string
	for _, dir := range []string{"../pkg/config", "../internal/cli"} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
				sources = append(sources, dir+"/"+e.Name())
			}
		}
	}
	vars := map[string]string{}
	for _, src := range sources {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		for _, m := range read.FindAllStringSubmatch(string(b), -1) {
			vars[m[1]] = src
		}
	}
	require.Contains(t, vars, "DATABASE_URL", "the scan finds the binary's variables")
	img, err := os.ReadFile("hookyard.yaml")
	require.NoError(t, err)
	for _, g := range composeVar.FindAllStringSubmatch(string(img), -1) {
		vars[orName(g[1], g[4])] = "deploy/hookyard.yaml"
	}
	for v, src := range vars {
		if v == "GOGC" {
			continue // Go's own
		}
		require.True(t, listed[v], ".env.example lists %s (read by %s)", v, src)
	}
}
