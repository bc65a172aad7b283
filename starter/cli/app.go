// Package cli holds the starter's commands (start, status, list, pause,
// resume, scale, exclude, include, host, seed, url, urls, restart, stop,
// failures, ...). The main reads the environment into an Env and calls
// App.Run; everything else, including the Temporal client, is reached
// through App's fields so that tests can swap in fakes.
//
// Exit codes: 0 success; 1 a runtime failure (Temporal unreachable, no such
// campaign, a rejected scale, a campaign that failed or was stopped under
// --wait); 2 a usage error (unknown flag or command, missing --id/--seed,
// bad value, a config that does not validate); 130 when Ctrl-C ends a
// --wait (the campaign itself keeps running).
package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/tlsconf"
)

// Exit codes of the starter.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// The dev server (`temporal server start-dev`) serves its Web UI on its
// frontend port + 1000 unless told otherwise.
const (
	devUIPortOffset  = 1000
	defaultWebUIPort = 8233
)

// Env is the starter's environment: what every drover process reads
// (envconf.Env: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_UI_URL or
// its old name TEMPORAL_UI, DROVER_SCHEDULER, DROVER_TOKEN, KAFKA_BROKERS),
// whose empty fields take envconf's defaults, and the security the main
// reads beside it.
type Env struct {
	envconf.Env
	// Security: the TLS of scheduler sessions (DROVER_TLS_CA, ...), the
	// sinks' secrets for the preflight (KAFKA_SASL_PASSWORD, ...) and
	// Temporal's TLS or API key (TEMPORAL_TLS_*, TEMPORAL_API_KEY); see
	// package tlsconf. The zero value is plaintext on loopback.
	SessionTLS        *tls.Config
	InsecurePlaintext bool
	SinkSecrets       sink.Secrets
	Temporal          tlsconf.Temporal
}

// Sessions is how the starter reaches the schedulers.
func (e Env) Sessions() session.Client {
	return session.Client{Token: e.Token, TLS: e.SessionTLS, InsecurePlaintext: e.InsecurePlaintext}
}

// withDefaults applies envconf's defaults; TEMPORAL_UI, deprecated,
// stands in for an unset TEMPORAL_UI_URL.
func (e Env) withDefaults() Env {
	e.Env = e.Env.WithDefaults()
	if e.TemporalUIURL == "" {
		e.TemporalUIURL = e.TemporalUI
	}
	return e
}

// deprecations are the warnings Run prints about the environment.
func (e Env) deprecations() []string {
	switch {
	case e.TemporalUI == "":
		return nil
	case e.TemporalUIURL != "" && e.TemporalUIURL != e.TemporalUI:
		return []string{"starter: TEMPORAL_UI is deprecated and ignored: TEMPORAL_UI_URL is set"}
	default:
		return []string{"starter: TEMPORAL_UI is deprecated; set TEMPORAL_UI_URL instead"}
	}
}

// WebUIBase is the Temporal Web UI's base URL: TemporalUIURL when set;
// otherwise, for a frontend on a loopback address (a dev server, which
// serves its Web UI on its frontend port + 1000: 8233 for 7233), that
// host and port. Anything else cannot be derived (a production server's
// Web UI is a service of its own, on an address of its own), and it is "".
func (e Env) WebUIBase() string {
	if base := strings.TrimRight(e.TemporalUIURL, "/"); base != "" {
		return base
	}
	host, port, err := net.SplitHostPort(e.TemporalAddress)
	if err != nil {
		host, port = e.TemporalAddress, ""
	}
	if !isLoopbackHost(host) {
		return ""
	}
	uiPort := defaultWebUIPort
	if p, err := strconv.Atoi(port); err == nil && p > 0 && p+devUIPortOffset <= 65535 {
		uiPort = p + devUIPortOffset
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(uiPort))
}

// WorkflowURL is the Web UI page of a campaign's workflow, or "" when the
// Web UI's address is not known (see WebUIBase).
func (e Env) WorkflowURL(id string) string {
	base := e.WebUIBase()
	if base == "" {
		return ""
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", base, url.PathEscape(e.TemporalNamespace), url.PathEscape(id))
}

// webUILink is WorkflowURL for people: what to set when it is unknown.
func (e Env) webUILink(id string) string {
	if u := e.WorkflowURL(id); u != "" {
		return u
	}
	return fmt.Sprintf("unknown for TEMPORAL_ADDRESS %s; set TEMPORAL_UI_URL to link it", e.TemporalAddress)
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// StatsFunc sums the schedulers' stats of one campaign;
// session.Client.CampaignStats in production.
type StatsFunc func(ctx context.Context, addrs []string, token, campaignID string) (session.Stats, error)

// DialFunc connects to Temporal; DialTemporal in production. It returns an
// error (which the caller prints as it is) when Temporal is unreachable.
type DialFunc func(ctx context.Context, env Env) (Campaigns, error)

// App is the starter: its environment, its output and its dependencies.
type App struct {
	Env   Env
	Out   io.Writer // results (tables, JSON)
	Err   io.Writer // errors and --wait/--watch progress
	Dial  DialFunc
	Stats StatsFunc
	// Preflight, when set, checks schedulers and sinks before a start.
	Preflight PreflightFunc
	// Release, when set, lets `stop` remove what a terminated or failed
	// campaign left in the frontier.
	Release ReleaseFunc
	// Failures and DropFailures read and drop the schedulers' failure
	// records (`failures`, and an ended campaign's counts in `status`);
	// without them `failures` fails and `status` leaves the counts out.
	Failures     FailuresFunc
	DropFailures DropFailuresFunc
	// ForgetHistory drops a lineage's fetch history (`forget`).
	ForgetHistory ForgetHistoryFunc
	// URLState says where one URL stands (`url`).
	URLState URLStateFunc
	// URLs lists one host's URLs in one state (`urls`).
	URLs URLsFunc
	// SeedControl streams seeds to a scheduler (`seed --file`, `start
	// --seeds-file`).
	SeedControl SeedControlFunc
	// Interval is the refresh period of --wait and --watch (default 2 s).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	client Campaigns
	closer func()
}

// exitError carries an exit code; msg, when set, is printed on stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func failf(format string, args ...any) error {
	return &exitError{code: ExitFailure, msg: fmt.Sprintf(format, args...)}
}

// usageError is a mistake in the command line: printed with a pointer to the
// command's help, exit 2.
type usageError struct {
	err error
}

func (e *usageError) Error() string { return e.err.Error() }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// Run executes the command line args (without the program name) and
// returns the exit code. Errors are printed on a.Err as one line each.
func (a *App) Run(ctx context.Context, args []string) int {
	a.Env = a.Env.withDefaults()
	for _, w := range a.Env.deprecations() {
		fmt.Fprintln(a.Err, w)
	}
	if a.Interval <= 0 {
		a.Interval = 2 * time.Second
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	defer func() {
		if a.closer != nil {
			a.closer()
			a.closer = nil
		}
	}()

	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(a.Out)
	root.SetErr(a.Err)
	// Cobra's own errors (unknown flag or command, argument count, missing
	// required flag) arrive before any command ran; everything after is the
	// command's own.
	ran := false
	for _, c := range root.Commands() {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				ran = true
				return run(cmd, args)
			}
		}
	}
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ue *usageError
	if !ran || errors.As(err, &ue) {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(a.Err, "Error: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return ExitUsage
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(a.Err, oneLine(ee.msg))
		}
		return ee.code
	}
	fmt.Fprintln(a.Err, oneLine(err.Error()))
	return ExitFailure
}

func (a *App) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "Start, watch and control drover crawl campaigns",
		Long: `starter starts, watches and controls drover crawl campaigns, which run as
Temporal workflows.

Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE
(default "default"), TEMPORAL_UI_URL (the Web UI's base URL for the links
printed; default: for a loopback TEMPORAL_ADDRESS, a dev server's, on its
port + 1000, http://127.0.0.1:8233; TEMPORAL_UI is its deprecated old name),
DROVER_SCHEDULER (default 127.0.0.1:7420, comma-separated), DROVER_TOKEN and
KAFKA_BROKERS (default 127.0.0.1:9092: where start checks the default sink).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// No Args: cobra's default for a root with subcommands makes
		// "starter nonsense" an unknown command; a bare "starter" prints help.
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.AddCommand(
		a.startCommand(),
		a.statusCommand(),
		views{a}.failuresCommand(),
		views{a}.forgetCommand(),
		views{a}.urlCommand(),
		views{a}.urlsCommand(),
		a.signalCommand("pause", "Pause a campaign: fetchers stop, the frontier keeps its URLs"),
		a.signalCommand("resume", "Resume a paused campaign"),
		a.stopCommand(),
		a.restartCommand(),
		a.scaleCommand(),
		a.excludeCommand(),
		a.includeCommand(),
		a.hostCommand(),
		a.seedCommand(),
		a.listCommand(),
		a.reportCommand(),
	)
	return root
}

// temporal dials Temporal once per run.
func (a *App) temporal(ctx context.Context) (Campaigns, error) {
	if a.client != nil {
		return a.client, nil
	}
	c, err := a.Dial(ctx, a.Env)
	if err != nil {
		return nil, &exitError{code: ExitFailure, msg: err.Error()}
	}
	a.client = c
	if cl, ok := c.(interface{ Close() }); ok {
		a.closer = cl.Close
	}
	return c, nil
}

// oneLine keeps an error to one line: joined validation errors are the
// exception, printed one per line by the caller.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// exactArgs is cobra.ExactArgs naming the arguments in its error.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return fmt.Errorf("%s takes %s, got %d argument(s)", cmd.Name(), strings.Join(names, " "), len(args))
		}
		return nil
	}
}
