package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hookyard/hookyard/pkg/config"
)

// docFiles are the pages a newcomer or an operator copies commands from.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	paths = append(paths, "../../README.md")
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[strings.TrimPrefix(p, "../../")] = string(b)
	}
	return out
}

// codeLines returns the lines inside fenced code blocks, continuation
// lines (a trailing backslash) joined.
func codeLines(doc string) []string {
	var out []string
	in, cur := false, ""
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " "), `\`); ok {
			cur += s + " "
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

var (
	inlineCmd = regexp.MustCompile("`((?:hookyard|go run \\.) [^`]*)`")
	// A command starts a line (after VAR=value prefixes) or follows ;, &&
	// or $(: "kubectl -n hookyard create" is not one.
	cmdStart = regexp.MustCompile(`(?:^\s*(?:[A-Z_]+=\S*\s+)*|;\s*|&&\s*|\$\()(hookyard|go run \.) `)
)

// documentedCommands returns every `hookyard …` or `go run . …` command in
// the docs' code blocks and inline code, from the subcommand on, with the
// page it is on.
func documentedCommands(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for page, doc := range docFiles(t) {
		for _, l := range codeLines(doc) {
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue // a comment in a block may say "hookyard keeps it closed"
			}
			if m := cmdStart.FindStringSubmatchIndex(l); m != nil {
				out[page] = append(out[page], l[m[3]+1:])
			}
		}
		for _, m := range inlineCmd.FindAllStringSubmatch(doc, -1) {
			_, rest, _ := strings.Cut(strings.TrimPrefix(m[1], "go run ."), " ")
			if strings.HasPrefix(m[1], "go run .") {
				rest = strings.TrimSpace(strings.TrimPrefix(m[1], "go run ."))
			}
			out[page] = append(out[page], rest)
		}
	}
	return out
}

// checkCommand says what in line (a command from the subcommand on) the
// command table does not know: the command, its sub-command (the lowercase
// second word of its usage forms), or a flag its usage does not list.
func checkCommand(line string) []string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	// A shell pipe or list ends the command: what follows is another program.
	if i := strings.IndexAny(line, "|;&>"); i >= 0 {
		line = line[:i]
	}
	line = strings.NewReplacer("[", " ", "]", " ", "(", " ", ")", " ", "…", " ", "...", " ").Replace(line)
	fields := strings.Fields(line)
	for len(fields) >= 2 && fields[0] == "-config" {
		fields = fields[2:]
	}
	if len(fields) == 0 {
		return []string{"no command"}
	}
	if strings.Contains(line, " | ") {
		// `hookyard receiver | outbox-relay | processor`: alternatives.
		var problems []string
		for _, alt := range strings.Split(line, "|") {
			problems = append(problems, checkCommand(alt)...)
		}
		return problems
	}
	c, ok := lookup(fields[0])
	if !ok {
		return []string{"no command " + fields[0]}
	}
	var problems []string
	subs := map[string]bool{}
	for _, u := range strings.Split(c.usage, "\n") {
		if f := strings.Fields(u); len(f) > 1 && f[0] == c.name && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(f[1]) {
			subs[f[1]] = true
		}
	}
	if len(subs) > 0 && len(fields) > 1 && fields[1] != "-h" && !subs[fields[1]] {
		problems = append(problems, c.name+" has no sub-command "+fields[1])
	}
	for _, f := range fields[1:] {
		name, _, _ := strings.Cut(f, "=")
		if !regexp.MustCompile(`^-[a-z][a-z-]*$`).MatchString(name) || name == "-h" {
			continue
		}
		if !regexp.MustCompile(`(^|[\s\[(|])` + regexp.QuoteMeta(name) + `([\s\]|)]|$)`).MatchString(c.usage) {
			problems = append(problems, c.name+" has no flag "+name)
		}
	}
	return problems
}

// Every `hookyard …` and `go run . …` command the README and docs/*.md
// show, in code blocks or inline, names a command of the table, one of its
// sub-commands, and only flags its usage lists. Fails when a command, a
// sub-command or a flag is renamed or removed and a page still shows it.
func TestDocumentedCommandsParseAgainstTheCommandTable(t *testing.T) {
	t.Parallel()
	cmds := documentedCommands(t)
	require.NotEmpty(t, cmds["README.md"])
	require.NotEmpty(t, cmds["docs/operations.md"])
	for page, lines := range cmds {
		for _, l := range lines {
			require.Empty(t, checkCommand(l), "%s: hookyard %s", page, l)
		}
	}
	// The checker itself catches drift.
	require.NotEmpty(t, checkCommand("dead list -nope 1"))
	require.NotEmpty(t, checkCommand("dead forget x"))
	require.NotEmpty(t, checkCommand("reconcil"))
	require.Empty(t, checkCommand("-config hookyard.yaml dead list -provider stripe # comment -x"))
	require.Empty(t, checkCommand("reconcile -provider github | jq '.x' -r"))
}

// The figures in docs/numbers.md name where they come from, and what they
// name is in the repository: bench-results/ is git-ignored, so a figure
// citing a file there cites something no reader has. Fails if a page cites
// a file under bench-results/, or a docs/bench/ file that is not there.
func TestNumbersCiteOnlyCommittedResults(t *testing.T) {
	t.Parallel()
	ignore, err := os.ReadFile("../../.gitignore")
	require.NoError(t, err)
	require.Contains(t, string(ignore), "/bench-results/", "bench-results/ is git-ignored")
	// A named run, not the bench's description of where it writes
	// (bench-results/<start time>.json).
	cited := regexp.MustCompile("`((?:bench-results|docs/bench)/[^`<>]+)`")
	for page, doc := range docFiles(t) {
		for _, m := range cited.FindAllStringSubmatch(doc, -1) {
			require.False(t, strings.HasPrefix(m[1], "bench-results/"), "%s cites the git-ignored %s", page, m[1])
			_, err := os.Stat("../../" + m[1])
			require.NoError(t, err, "%s cites %s", page, m[1])
		}
	}
}

// Every key of the config file (outside endpoints) is either set in
// hookyard.example.yaml, where its comment explains it, or named as
// `section.key` in the Configuration section of docs/operations.md, with
// its default. Fails when a key is added, or the tuning-keys list claims a
// key the example config sets, and the pages do not follow.
func TestEveryConfigKeyIsDocumented(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	var example map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &example))
	ops := docFiles(t)["docs/operations.md"]
	_, section, _ := strings.Cut(ops, "\n## Configuration\n")
	section, _, _ = strings.Cut(section, "\n## ")
	tuning := regexp.MustCompile(`(?s)Tuning keys the example config leaves at their defaults:(.*?)\n\n`).FindStringSubmatch(section)
	require.NotNil(t, tuning, "the Configuration section lists the tuning keys")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z_]+\\.[a-z_]+)`").FindAllStringSubmatch(tuning[1], -1) {
		listed[m[1]] = true
	}
	known := map[string]bool{}
	ct := reflect.TypeOf(config.Config{})
	for i := range ct.NumField() {
		f := ct.Field(i)
		sec := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if sec == "" || sec == "-" || sec == "endpoints" || f.Type.Kind() != reflect.Struct {
			continue
		}
		set, _ := example[sec].(map[string]any)
		for j := range f.Type.NumField() {
			key := strings.Split(f.Type.Field(j).Tag.Get("yaml"), ",")[0]
			if key == "" || key == "-" {
				continue
			}
			name := sec + "." + key
			known[name] = true
			_, inExample := set[key]
			require.False(t, inExample && listed[name], "%s is set in hookyard.example.yaml, not left at its default", name)
			require.True(t, inExample || listed[name], "%s: neither in hookyard.example.yaml nor in the tuning keys of docs/operations.md", name)
		}
	}
	for name := range listed {
		require.True(t, known[name], "the tuning keys list %s, which the config does not have", name)
	}
}

// The README's Layout table names every folder of code, and every path it
// names exists: top-level folders, pkg/*, pkg/ops/* and internal/*, with
// pkg/provider/<name>/ standing for each provider's folder. Fails when a
// package is added, moved or removed and the table does not follow.
func TestReadmeLayoutNamesEveryPackageFolder(t *testing.T) {
	t.Parallel()
	readme := docFiles(t)["README.md"]
	_, table, ok := strings.Cut(readme, "\n## Layout\n")
	require.True(t, ok)
	table, _, _ = strings.Cut(table, "\n## ")
	named := map[string]bool{}
	for _, l := range strings.Split(table, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		first := strings.Split(l, "|")[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			p := strings.TrimSuffix(m[1], "/")
			named[p] = true
			if strings.Contains(p, "<name>") {
				continue
			}
			_, err := os.Stat("../../" + p)
			require.NoError(t, err, "the Layout table names %s", m[1])
		}
	}
	subdirs := func(dir string) []string {
		entries, err := os.ReadDir("../../" + dir)
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				out = append(out, strings.TrimPrefix(dir+"/"+e.Name(), "./"))
			}
		}
		return out
	}
	var folders []string
	for _, dir := range []string{".", "pkg", "pkg/ops", "internal"} {
		folders = append(folders, subdirs(dir)...)
	}
	for _, d := range subdirs("pkg/provider") {
		if _, err := os.Stat("../../" + d + "/provider.go"); err == nil && named["pkg/provider/<name>"] {
			continue // a provider's folder
		}
		folders = append(folders, d)
	}
	for _, f := range folders {
		if f == "bin" || f == "bench-results" || f == "pkg" || f == "internal" || f == "pkg/ops" {
			continue // build output, git-ignored, or the parents named by their children
		}
		covered := named[f]
		for n := range named {
			covered = covered || strings.HasPrefix(n, f+"/") // cmd/ by cmd/hookyard-bench
		}
		require.True(t, covered, "the Layout table does not name %s/", f)
	}
}
