package devstack

// docker-compose.yml cannot be run here (no Docker engine on the
// development machines or in CI), so this checks what can be checked
// without one: Debian's docker-compose parses it, the section on it in
// docs/operating.md names nothing it lacks, and its Prometheus scrapes what the worker and
// the scheduler serve.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/drover-crawl/drover/internal/testenv"
)

// composeService is what the checks read of a service in the output of
// `docker-compose config` (variables substituted, extensions merged, ports
// in the long syntax).
type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []struct {
		Published string `yaml:"published"`
		Target    string `yaml:"target"`
	} `yaml:"ports"`
	Volumes []string `yaml:"volumes"`
}

// composeToken is the DROVER_TOKEN the checks give docker-compose: the file
// requires one.
const composeToken = "compose-test-token"

// composeConfig runs `docker-compose config` on the repository's
// docker-compose.yml with env (and PATH, HOME) only, bounded.
func composeConfig(t *testing.T, root string, env ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		msg := "no docker-compose on PATH (apt-get install --no-install-recommends docker-compose; .ci/run installs it)"
		if os.Getenv("CI") != "" {
			require.FailNow(t, msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--project-directory", root, "-f", filepath.Join(root, "docker-compose.yml"), "config")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return errb.String(), fmt.Errorf("docker-compose config: %w: %s", err, errb.String())
	}
	return out.String(), nil
}

func TestComposeFile(t *testing.T) {
	testenv.NeedsTool(t, "docker-compose")
	root, err := RepoRoot(".")
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)

	// Without DROVER_TOKEN it refuses to run, saying what to set.
	msg, err := composeConfig(t, root)
	require.Error(t, err, "docker-compose config without DROVER_TOKEN")
	require.Contains(t, msg, "set DROVER_TOKEN")

	out, err := composeConfig(t, root, "DROVER_TOKEN="+composeToken)
	require.NoError(t, err)
	var cfg struct {
		Services map[string]composeService `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &cfg), out)
	services := cfg.Services
	require.NotEmpty(t, services, out)
	for name, s := range services {
		require.NotEmpty(t, s.Image, "service %s has no image", name)
	}
	for _, name := range []string{"scheduler", "worker"} {
		require.Equal(t, composeToken, services[name].Environment["DROVER_TOKEN"], "%s's DROVER_TOKEN", name)
	}

	t.Run("docs", func(t *testing.T) { checkComposeDocs(t, root, raw, services) })
	t.Run("cluster", func(t *testing.T) { checkComposeCluster(t, root) })
	t.Run("prometheus", func(t *testing.T) { checkComposePrometheus(t, root, services) })
}

// composeDoc is the page that documents the compose stack.
const composeDoc = "docs/operating.md"

// composeSection is composeDoc's section on the compose stack.
func composeSection(t *testing.T, root string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, composeDoc))
	require.NoError(t, err)
	const heading = "## With Docker Compose\n"
	_, sec, ok := strings.Cut(string(doc), heading)
	require.True(t, ok, "%s has no %q section", composeDoc, strings.TrimSpace(heading))
	if i := regexp.MustCompile(`(?m)^#{1,3} `).FindStringIndex(sec); i != nil {
		sec = sec[:i[0]]
	}
	return sec
}

// checkComposeDocs: every service of the documented table exists with the
// host ports it gives, every service of the file is in the table, and
// every variable the section names is set for a service or substituted in
// the file.
func checkComposeDocs(t *testing.T, root string, raw []byte, services map[string]composeService) {
	sec := composeSection(t, root)
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|([^|]*)\\|")
	hostPort := regexp.MustCompile(`localhost:(\d+)`)
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		name, host := m[1], m[2]
		documented[name] = true
		s, ok := services[name]
		if !ok {
			assert.Failf(t, composeDoc+" names a service docker-compose.yml lacks", "%s names service %s; docker-compose.yml has %v", composeDoc, name, slices.Sorted(maps.Keys(services)))
			continue
		}
		var published []string
		for _, p := range s.Ports {
			published = append(published, p.Published)
		}
		for _, pm := range hostPort.FindAllStringSubmatch(host, -1) {
			assert.Contains(t, published, pm[1], "%s: %s on localhost:%s; docker-compose.yml publishes %v", composeDoc, name, pm[1], published)
		}
	}
	require.NotEmpty(t, documented, "%s's compose section has no table of services", composeDoc)
	for name := range services {
		assert.True(t, documented[name], "service %s of docker-compose.yml is not in the table of %s", name, composeDoc)
	}

	set := map[string]bool{}
	for _, s := range services {
		for k := range s.Environment {
			set[k] = true
		}
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)`).FindAllStringSubmatch(string(raw), -1) {
		set[m[1]] = true
	}
	names := regexp.MustCompile("`([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(sec, -1)
	require.NotEmpty(t, names, "%s's compose section names no variable", composeDoc)
	for _, m := range names {
		assert.True(t, set[m[1]], "%s names the variable %s; no service of docker-compose.yml gets it and the file does not substitute it", composeDoc, m[1])
	}
}

// checkComposePrometheus: the prometheus service runs the repository's
// scrape config, which scrapes exactly the /metrics endpoints that the
// scheduler and the worker serve on their --metrics-addr in the compose
// stack; those are the ports of the binaries' own defaults, so that the
// compose stack and the dev stack serve metrics alike.
func checkComposePrometheus(t *testing.T, root string, services map[string]composeService) {
	prom, ok := services["prometheus"]
	require.True(t, ok, "docker-compose.yml has no prometheus service")
	const inContainer = "/etc/prometheus/drover.yml"
	require.Contains(t, prom.Command, "--config.file="+inContainer)
	configFile := filepath.Join(root, "deploy", "compose", "prometheus.yml")
	require.Contains(t, prom.Volumes, configFile+":"+inContainer+":ro", "prometheus mounts deploy/compose/prometheus.yml")

	// What the compose stack serves: --metrics-addr :PORT, on every
	// interface of the container, so that Prometheus reaches it.
	serves := map[string]string{} // service -> host:port as Prometheus reaches it
	for _, name := range []string{"scheduler", "worker"} {
		addr := flagValue(services[name].Command, "--metrics-addr")
		require.NotEmpty(t, addr, "%s's command %q has no --metrics-addr", name, services[name].Command)
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err, "%s --metrics-addr %q", name, addr)
		require.Contains(t, []string{"", "0.0.0.0", "::"}, host, "%s --metrics-addr %q listens only on %s: Prometheus cannot reach it", name, addr, host)
		serves[name] = net.JoinHostPort(name, port)
	}

	b, err := os.ReadFile(configFile)
	require.NoError(t, err)
	var pc struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &pc))
	var scraped []string
	for _, sc := range pc.ScrapeConfigs {
		require.Contains(t, []string{"", "/metrics"}, sc.MetricsPath, "job %s scrapes %s", sc.JobName, sc.MetricsPath)
		for _, s := range sc.StaticConfigs {
			scraped = append(scraped, s.Targets...)
		}
		for _, d := range sc.DNSSDConfigs {
			for _, n := range d.Names {
				scraped = append(scraped, net.JoinHostPort(n, strconv.Itoa(d.Port)))
			}
		}
	}
	require.ElementsMatch(t, slices.Collect(maps.Values(serves)), scraped, "Prometheus scrapes %v; the compose stack serves %v", scraped, serves)

	if promtool, err := exec.LookPath("promtool"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, promtool, "check", "config", configFile).CombinedOutput()
		require.NoError(t, err, "promtool check config:\n%s", out)
	} else {
		t.Log("promtool not on PATH: the scrape config's syntax is not checked by Prometheus itself")
	}

	// The same ports as the binaries' defaults (which the dev stack
	// serves on loopback).
	t.Run("defaults", func(t *testing.T) { checkMetricsDefaults(t, root, serves) })
}

// checkMetricsDefaults: each main's -metrics-addr defaults to loopback on
// the port the compose stack serves and scrapes, and the dev stack (`make
// dev`) serves them on those same addresses.
func checkMetricsDefaults(t *testing.T, root string, serves map[string]string) {
	bins := buildMains(t, root, "worker", "scheduler")
	var dev StackOptions
	require.NoError(t, dev.defaults())
	devAddr := map[string]string{"worker": dev.WorkerMetricsAddr, "scheduler": dev.SchedulerMetricsAddr}
	for name, endpoint := range serves {
		_, port, _ := net.SplitHostPort(endpoint)
		def, defined := flagDefault(t, bins[name], "metrics-addr")
		if !defined {
			assert.Failf(t, "no -metrics-addr flag", "%s has no -metrics-addr flag; docker-compose.yml passes --metrics-addr :%s, which its container would refuse", name, port)
			continue
		}
		require.Equal(t, def, devAddr[name], "%s: the dev stack serves its metrics on %s, its -metrics-addr defaults to %s", name, devAddr[name], def)
		dhost, dport, err := net.SplitHostPort(def)
		require.NoError(t, err, "%s -metrics-addr default %q", name, def)
		require.Equal(t, dport, port, "%s: -metrics-addr defaults to %s, docker-compose.yml serves and scrapes port %s", name, def, port)
		ip := net.ParseIP(dhost)
		require.True(t, dhost == "localhost" || (ip != nil && ip.IsLoopback()), "%s -metrics-addr default %s is not on loopback", name, def)
	}
}

// flagValue is the value of flag in a command line ("--f v" or "--f=v").
func flagValue(cmd []string, flag string) string {
	for i, a := range cmd {
		if a == flag && i+1 < len(cmd) {
			return cmd[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// buildMains builds the repository's mains (without -race: they are only
// asked for their flags) and returns their paths by name.
func buildMains(t *testing.T, root string, names ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, Build(ctx, root, dir, names...))
	bins := map[string]string{}
	for _, n := range names {
		bins[n] = filepath.Join(dir, n)
	}
	return bins
}

// flagDefault reads a flag's default from a Go main's -h output; defined is
// false when the main has no such flag.
func flagDefault(t *testing.T, bin, name string) (def string, defined bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// -h exits 0 (or 2 with older flag packages); the usage is the output.
	out, _ := exec.CommandContext(ctx, bin, "-h").CombinedOutput()
	m := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(name) + `\b.*\n((?:    \t.*\n)*)`).FindSubmatch(out)
	if m == nil {
		return "", false
	}
	d := regexp.MustCompile(`\(default "([^"]*)"\)`).FindSubmatch(m[0])
	require.NotNil(t, d, "%s -%s has no default address in its usage:\n%s", filepath.Base(bin), name, m[0])
	return string(d[1]), true
}

// checkComposeCluster: with the cluster profile and AMQP_URL naming three
// nodes, the scheduler and the workers get that URL list, the two extra
// nodes mount the peer-discovery config, which names the first node by the
// name its hostname gives it, and all three share one Erlang cookie.
func checkComposeCluster(t *testing.T, root string) {
	const nodes = "amqp://guest:guest@rabbitmq:5672/,amqp://guest:guest@rabbitmq2:5672/,amqp://guest:guest@rabbitmq3:5672/"
	out, err := composeConfig(t, root, "DROVER_TOKEN="+composeToken, "COMPOSE_PROFILES=cluster", "AMQP_URL="+nodes)
	require.NoError(t, err)
	var cfg struct {
		Services map[string]struct {
			composeService `yaml:",inline"`
			Hostname       string `yaml:"hostname"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &cfg), out)
	for _, name := range []string{"scheduler", "worker"} {
		require.Equal(t, nodes, cfg.Services[name].Environment["AMQP_URL"], "%s's AMQP_URL", name)
	}
	first, ok := cfg.Services["rabbitmq"]
	require.True(t, ok)
	cookie := first.Environment["RABBITMQ_ERLANG_COOKIE"]
	require.NotEmpty(t, cookie, "rabbitmq's Erlang cookie")
	conf := filepath.Join(root, "deploy", "compose", "rabbitmq-cluster.conf")
	b, err := os.ReadFile(conf)
	require.NoError(t, err)
	require.Contains(t, string(b), "cluster_formation.classic_config.nodes.1 = rabbit@"+first.Hostname+"\n",
		"the peer-discovery config names the first node as its hostname makes it")
	require.Contains(t, string(b), "cluster_partition_handling = pause_minority\n", "a node cut off from the majority pauses")
	for _, name := range []string{"rabbitmq", "rabbitmq2", "rabbitmq3"} {
		s, ok := cfg.Services[name]
		require.True(t, ok, "the cluster profile has %s", name)
		require.Equal(t, first.Image, s.Image, "%s runs the first node's image", name)
		require.Equal(t, cookie, s.Environment["RABBITMQ_ERLANG_COOKIE"], "%s's Erlang cookie", name)
		require.Contains(t, s.Volumes, conf+":/etc/rabbitmq/conf.d/20-cluster.conf:ro", "%s mounts the peer-discovery config", name)
		require.Equal(t, name, s.Hostname)
	}
}
