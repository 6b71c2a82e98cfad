package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/sandbox-executor/sandbox-executor/server"
)

const (
	authStatic = "static"
	authPool   = "pool"

	defaultAPIPort    = 3030
	defaultProxyPort  = 3031
	defaultSecretPath = "/var/lib/sandbox-container/sandbox-secret"
	// These durations match server.Config's own defaults.
	defaultKeepAlive     = 15 * time.Second
	defaultStallTimeout  = 60 * time.Second
	defaultBodyTimeout   = 30 * time.Second
	defaultUnauthTimeout = 10 * time.Second
)

// config is the agent's configuration. Each setting comes from its flag if
// the flag is given, else from the first non-empty environment variable of
// its list, else from its default.
type config struct {
	secret       string // empty if not set
	authMode     string // authStatic or authPool
	secretPath   string // where pool mode persists the claimed secret
	apiAddr      string // host:port for the API; ":3030" listens on every interface
	proxyAddr    string // host:port for the TCP proxy
	logLevel     zerolog.Level
	logFormat    string        // logJSON or logConsole
	basePath     string        // "/a" or "/a/b", never ending in "/"; empty serves at the root only
	keepAlive    time.Duration // always positive
	stall        time.Duration // always positive
	bodyTime     time.Duration // always positive
	unauthTime   time.Duration // always positive
	maxConns     int           // 0: server.Config's default, from the fd limit
	maxCmds      int           // running commands of every kind; 0: executor.Runner's default
	maxProcs     int           // running background processes; 0: procs.Options' default
	maxContexts  int           // code contexts alive at once; 0: contexts.Options' default
	logBudget    int           // bytes of retained log lines in all; 0: procs.Options' default
	inputBudget  int           // bytes of commands' input not yet read, in all; 0: executor.Runner's default
	envBudget    int           // bytes of every session's environment, in all; 0: sessions.Options' default
	maxUpload    int           // bytes one upload to /files may have; 0: no limit
	extractMax   int           // entries of one archive unpacked by /files; 0: files' default
	extractTime  time.Duration // time one archive may take to unpack; always positive
	metricsOpen  bool          // GET /metrics without a token
	maxTunnels   int           // tunnels open at once; 0: tunnels.Registry's default
	trustFwdHost bool          // previews are routed by X-Forwarded-Host (set by a trusted edge) before Host
	mcp          server.MCPConfig
	maxWatches   int      // watches at once (streams, kept watches, waits); 0: watch's default
	maxWatchDirs int      // directories all watches hold; 0: from fs.inotify.max_user_watches
	stateDir     string   // the agent's state (checkpoints); never empty
	cpBudget     int      // bytes of checkpoint content; 0: checkpoint's default
	cpBudgetText string   // cpBudget as given, for errors ("1GiB")
	version      bool     // -version: print the version and exit
	command      []string // the sandbox's main command, after "--"; nil if none
}

// newAuth returns the Auth of cfg's mode. A static Auth without a secret
// is an error. Its errors name the settings that fix them.
func newAuth(cfg config) (*server.Auth, error) {
	if cfg.authMode == authPool {
		a, err := server.NewPoolAuth(cfg.secretPath)
		if errors.Is(err, server.ErrSecretPath) {
			return nil, fmt.Errorf("%w (set SANDBOX_SECRET_PATH or -secret-path to a file in a writable directory)", err)
		}
		return a, err
	}
	a, err := server.NewStaticAuth(cfg.secret)
	if errors.Is(err, server.ErrNoSecret) {
		return nil, errors.New("SANDBOX_SECRET is not set: the agent refuses to run without a secret (or set SANDBOX_AUTH_MODE=pool)")
	}
	return a, err
}

// configParser holds the state of one parseConfig call.
type configParser struct {
	fs     *flag.FlagSet
	given  map[string]bool // flags set on the command line
	getenv func(string) string
}

// parseConfig reads the configuration from args (without the program
// name) and getenv. Flag errors and -h have already been reported on
// output by the flag package; parseConfig then returns an exitCodeError
// (2, or 0 for -h) so that main prints nothing more.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	flagArgs, command := splitCommand(args)
	fs := flag.NewFlagSet("sandbox-executor", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintln(output, "usage: sandbox-executor [flags] [-- CMD ARGS...]")
		fmt.Fprintln(output, "       sandbox-executor exec|shell|ps|start|kill|logs|cp|tunnel|wait-port|install|mcp ... (the client; each has -h)")
		fs.PrintDefaults()
	}
	fs.String("secret", "", "bearer `secret` (env SANDBOX_SECRET; prefer the env: arguments are visible to every process)")
	fs.String("auth-mode", authStatic, "`mode`: static (needs a secret) or pool (the first bearer token claims the sandbox) (env SANDBOX_AUTH_MODE)")
	fs.String("secret-path", defaultSecretPath, "`file` where pool mode persists the claimed secret (env SANDBOX_SECRET_PATH)")
	fs.String("port", strconv.Itoa(defaultAPIPort), "API `port` on every interface (env SANDBOX_PORT, then PORT)")
	fs.String("addr", "", "API `host:port`; overrides -port and its env")
	fs.String("proxy-port", strconv.Itoa(defaultProxyPort), "TCP proxy `port` on every interface (env SANDBOX_PROXY_PORT, then PROXY_PORT)")
	fs.String("proxy-addr", "", "TCP proxy `host:port`; overrides -proxy-port and its env")
	fs.String("log-level", "info", "`level`: trace, debug, info, warn or error (env LOG_LEVEL)")
	fs.String("log-format", logJSON, "`format` of log lines: json, or console for a person at a terminal (env LOG_FORMAT)")
	fs.Bool("metrics-open", false, "serve GET /metrics without a token, for a Prometheus scraper on a trusted network (env SANDBOX_METRICS_OPEN=true); every other endpoint still needs one")
	fs.String("base-path", "", "also serve the API under this `prefix`, e.g. /koyeb-sandbox (env BASE_PATH)")
	fs.String("keepalive", defaultKeepAlive.String(), "`interval` of the comment sent on idle event streams (env SSE_KEEPALIVE)")
	fs.String("stall-timeout", defaultStallTimeout.String(), "`duration` an event stream's client may accept nothing for before it counts as gone (env SSE_STALL_TIMEOUT)")
	fs.String("body-timeout", defaultBodyTimeout.String(), "`duration` a JSON request body may take to arrive, and an upload may go without progress (env SANDBOX_BODY_TIMEOUT)")
	fs.String("unauth-timeout", defaultUnauthTimeout.String(), "idle and read `timeout` of a connection until a request on it passes authentication (env SANDBOX_UNAUTH_TIMEOUT)")
	fs.String("max-conns", "0", "`number` of API connections open at once; past it, those that never authenticated are closed first, then new ones get 503; 0 means half the open-file limit, at most 4096 (env SANDBOX_MAX_CONNS)")
	fs.String("max-commands", "0", "`number` of commands running at once, background processes included; past it, 503; 0 means an eighth of the open-file limit, at most 2000 (env SANDBOX_MAX_COMMANDS)")
	fs.String("max-contexts", "0", "`number` of code contexts (interpreters) alive at once, a stateless /run_code's included; past it, 503; 0 means 16 (env SANDBOX_MAX_CONTEXTS)")
	fs.String("max-processes", "0", "`number` of background processes running at once; past it, 503; 0 means 1000, or an eighth of the open-file limit if lower (env SANDBOX_MAX_PROCESSES)")
	fs.String("log-budget", "0", "`size` of the log lines kept for all background processes together, e.g. 256MiB; past it the biggest lose their oldest lines first; 0 means 128MiB (env SANDBOX_LOG_BUDGET)")
	fs.String("input-budget", "0", "`size` of the input (the input field) held for all commands together until they read it, e.g. 512MiB; past it, 503; 0 means 256MiB (env SANDBOX_INPUT_BUDGET)")
	fs.String("session-env-budget", "0", "`size` of the environments of all sessions together, e.g. 128MiB; past it, 503 for a new session, and a command's state is not saved; 0 means 64MiB (env SANDBOX_SESSION_ENV_BUDGET)")
	fs.String("max-upload", "0", "`size` of one upload to /files at most, e.g. 1GiB; past it, 413; 0 means no limit (env SANDBOX_MAX_UPLOAD)")
	fs.String("extract-max-entries", "0", "`number` of entries one archive unpacked by PUT /files?extract= may have; past it, 400; 0 means 1000000 (env SANDBOX_EXTRACT_MAX_ENTRIES)")
	fs.String("extract-timeout", "30m", "`duration` one archive may take to unpack, its upload included; past it, 408 (env SANDBOX_EXTRACT_TIMEOUT)")
	fs.String("max-tunnels", "0", "`number` of CONNECT and WebSocket tunnels open at once; past it, 503; 0 means 1024 (env SANDBOX_MAX_TUNNELS)")
	fs.String("max-watches", "0", "`number` of file watches at once (/watch streams, kept watches, /wait_for_path); past it, 503; 0 means 64 (env SANDBOX_MAX_WATCHES)")
	fs.String("state-dir", "", "`directory` of the agent's state, kept across restarts: checkpoints; default sandbox-executor-state in the temporary directory (env SANDBOX_STATE_DIR)")
	fs.String("checkpoint-budget", "0", "`size` of the checkpoints' stored content, e.g. 1GiB; past it, 507; 0 means 1GiB (env SANDBOX_CHECKPOINT_BUDGET)")
	fs.String("max-watched-dirs", "0", "`number` of directories all watches hold; past it, an overflow event; 0 means 3/4 of fs.inotify.max_user_watches (env SANDBOX_MAX_WATCHED_DIRS)")
	fs.Bool("trust-forwarded-host", false, "route previews by X-Forwarded-Host before Host, and pass X-Forwarded-Host and -Proto on to apps: only behind an edge that sets them (env SANDBOX_TRUST_FORWARDED_HOST)")
	fs.Bool("mcp", true, "serve the Model Context Protocol at POST /mcp; false makes /mcp 404 (env SANDBOX_MCP)")
	fs.String("mcp-tools", "", "comma-separated `tools` /mcp offers, e.g. read_file,list_dir; empty offers every one; an unknown name stops start-up (env SANDBOX_MCP_TOOLS)")
	fs.String("mcp-origins", "", "comma-separated `origins` (https://ide.example.com) a browser may call /mcp from, besides the agent's own: an edge in front of the agent names its own here (env SANDBOX_MCP_ORIGINS)")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(flagArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, exitCodeError{0}
		}
		return config{}, exitCodeError{2}
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: the main command goes after --", fs.Arg(0))
	}
	if *version {
		return config{version: true}, nil // whatever else is set, valid or not
	}
	p := &configParser{fs: fs, given: map[string]bool{}, getenv: getenv}
	fs.Visit(func(f *flag.Flag) { p.given[f.Name] = true })
	c, err := p.config()
	c.command = command
	return c, err
}

// splitCommand splits args at the first "--": the agent's flags before it,
// the sandbox's main command after it. "--" followed by nothing means no
// command. (A flag value of exactly "--" would be taken for the split; no
// flag has a use for one.)
func splitCommand(args []string) (flags, command []string) {
	i := slices.Index(args, "--")
	if i < 0 {
		return args, nil
	}
	if i == len(args)-1 {
		return args[:i], nil
	}
	return args[:i], args[i+1:]
}

// config validates every setting into a config.
func (p *configParser) config() (config, error) {
	var c config
	var err error
	c.secret, _ = p.value("secret", "SANDBOX_SECRET")
	c.secretPath, _ = p.value("secret-path", "SANDBOX_SECRET_PATH")
	if c.basePath, err = p.basePath(); err != nil {
		return c, err
	}
	mode, from := p.value("auth-mode", "SANDBOX_AUTH_MODE")
	switch strings.ToLower(strings.TrimSpace(mode)) {
	case "", authStatic:
		c.authMode = authStatic // a missing secret is reported by newAuth
	case authPool:
		c.authMode = authPool
		if c.secret != "" {
			return c, errors.New("SANDBOX_SECRET cannot be set when SANDBOX_AUTH_MODE=pool")
		}
	default:
		return c, fmt.Errorf("unsupported SANDBOX_AUTH_MODE %q (from %s): want static or pool", mode, from)
	}
	if c.apiAddr, err = p.addr("addr", "port", "SANDBOX_PORT", "PORT"); err != nil {
		return c, err
	}
	if c.proxyAddr, err = p.addr("proxy-addr", "proxy-port", "SANDBOX_PROXY_PORT", "PROXY_PORT"); err != nil {
		return c, err
	}
	level, from := p.value("log-level", "LOG_LEVEL")
	var ok bool
	if c.logLevel, ok = parseLevel(level); !ok {
		return c, fmt.Errorf("invalid log level %q (from %s): want trace, debug, info, warn or error", level, from)
	}
	format, from := p.value("log-format", "LOG_FORMAT")
	switch c.logFormat = strings.ToLower(strings.TrimSpace(format)); c.logFormat {
	case logJSON, logConsole:
	default:
		return c, fmt.Errorf("invalid log format %q (from %s): want json or console", format, from)
	}
	open, from := p.value("metrics-open", "SANDBOX_METRICS_OPEN")
	if c.metricsOpen, err = strconv.ParseBool(strings.TrimSpace(open)); err != nil {
		return c, fmt.Errorf("invalid metrics-open %q (from %s): want true or false", open, from)
	}
	if c.keepAlive, err = p.duration("keepalive", "SSE_KEEPALIVE", "15s"); err != nil {
		return c, err
	}
	if c.stall, err = p.duration("stall-timeout", "SSE_STALL_TIMEOUT", "60s"); err != nil {
		return c, err
	}
	if c.bodyTime, err = p.duration("body-timeout", "SANDBOX_BODY_TIMEOUT", "30s"); err != nil {
		return c, err
	}
	if c.unauthTime, err = p.duration("unauth-timeout", "SANDBOX_UNAUTH_TIMEOUT", "10s"); err != nil {
		return c, err
	}
	if c.maxConns, err = p.count("max-conns", "SANDBOX_MAX_CONNS"); err != nil {
		return c, err
	}
	if c.maxCmds, err = p.count("max-commands", "SANDBOX_MAX_COMMANDS"); err != nil {
		return c, err
	}
	if c.maxContexts, err = p.count("max-contexts", "SANDBOX_MAX_CONTEXTS"); err != nil {
		return c, err
	}
	if c.maxProcs, err = p.count("max-processes", "SANDBOX_MAX_PROCESSES"); err != nil {
		return c, err
	}
	if c.logBudget, err = p.size("log-budget", "SANDBOX_LOG_BUDGET"); err != nil {
		return c, err
	}
	if c.inputBudget, err = p.size("input-budget", "SANDBOX_INPUT_BUDGET"); err != nil {
		return c, err
	}
	if c.envBudget, err = p.size("session-env-budget", "SANDBOX_SESSION_ENV_BUDGET"); err != nil {
		return c, err
	}
	if c.maxUpload, err = p.size("max-upload", "SANDBOX_MAX_UPLOAD"); err != nil {
		return c, err
	}
	if c.extractMax, err = p.count("extract-max-entries", "SANDBOX_EXTRACT_MAX_ENTRIES"); err != nil {
		return c, err
	}
	if c.extractTime, err = p.duration("extract-timeout", "SANDBOX_EXTRACT_TIMEOUT", "30m"); err != nil {
		return c, err
	}
	if c.maxTunnels, err = p.count("max-tunnels", "SANDBOX_MAX_TUNNELS"); err != nil {
		return c, err
	}
	if c.trustFwdHost, err = p.boolean("trust-forwarded-host", "SANDBOX_TRUST_FORWARDED_HOST"); err != nil {
		return c, err
	}
	if c.maxWatches, err = p.count("max-watches", "SANDBOX_MAX_WATCHES"); err != nil {
		return c, err
	}
	if c.maxWatchDirs, err = p.count("max-watched-dirs", "SANDBOX_MAX_WATCHED_DIRS"); err != nil {
		return c, err
	}
	if c.stateDir, _ = p.value("state-dir", "SANDBOX_STATE_DIR"); c.stateDir == "" {
		c.stateDir = filepath.Join(os.TempDir(), "sandbox-executor-state")
	}
	if c.cpBudget, err = p.size("checkpoint-budget", "SANDBOX_CHECKPOINT_BUDGET"); err != nil {
		return c, err
	}
	if c.cpBudgetText, _ = p.value("checkpoint-budget", "SANDBOX_CHECKPOINT_BUDGET"); c.cpBudget == 0 {
		c.cpBudgetText = "1GiB"
	}
	if c.mcp, err = p.mcp(); err != nil {
		return c, err
	}
	return c, nil
}

// mcp returns the settings of /mcp: -mcp, -mcp-tools (every name a tool)
// and -mcp-origins.
func (p *configParser) mcp() (server.MCPConfig, error) {
	on, err := p.boolean("mcp", "SANDBOX_MCP")
	if err != nil {
		return server.MCPConfig{}, err
	}
	list := func(name, env string) []string {
		text, _ := p.value(name, env)
		var out []string
		for _, v := range strings.Split(text, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	c := server.MCPConfig{Off: !on, Tools: list("mcp-tools", "SANDBOX_MCP_TOOLS"), Origins: list("mcp-origins", "SANDBOX_MCP_ORIGINS")}
	if err := server.CheckMCPTools(c.Tools); err != nil {
		return c, fmt.Errorf("-mcp-tools: %w", err)
	}
	return c, nil
}

// boolean returns the setting of flag name or env: true, false, 1, 0 and
// the like (strconv.ParseBool), case-insensitively.
func (p *configParser) boolean(name, env string) (bool, error) {
	text, from := p.value(name, env)
	b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(text)))
	if err != nil {
		return false, fmt.Errorf("invalid %s %q (from %s): want true or false", name, text, from)
	}
	return b, nil
}

// basePath returns the -base-path (or BASE_PATH) prefix as the server
// matches it: "" for none (also for "/"), else "/" and one or more
// segments, without a trailing slash ("/a/" is "/a"). A prefix no request
// could match is an error: one without a leading "/", with an empty, "."
// or ".." segment (requests are matched by their clean path), or with a
// character a URL path would have to escape (a space, "%", "?", "#" and
// the like: requests are matched by their unescaped path).
func (p *configParser) basePath() (string, error) {
	text, from := p.value("base-path", "BASE_PATH")
	if text == "" {
		return "", nil
	}
	bad := func(why string) error {
		return fmt.Errorf("invalid base path %q (from %s): %s; want a path such as /koyeb-sandbox", text, from, why)
	}
	if text[0] != '/' {
		return "", bad(`it must start with "/"`)
	}
	trimmed := strings.TrimSuffix(text, "/")
	if trimmed == "" {
		return "", nil
	}
	for _, seg := range strings.Split(trimmed[1:], "/") {
		switch seg {
		case "":
			return "", bad("it has an empty segment")
		case ".", "..":
			return "", bad(fmt.Sprintf("it has a %q segment", seg))
		}
		if i := strings.IndexFunc(seg, func(r rune) bool { return !isPathChar(r) }); i >= 0 {
			r, _ := utf8.DecodeRuneInString(seg[i:])
			return "", bad(fmt.Sprintf("%q is not allowed in it", r))
		}
	}
	return trimmed, nil
}

// isPathChar reports whether r may appear unescaped in a URL path segment
// (RFC 3986's unreserved and sub-delims characters, ':' and '@').
func isPathChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("-._~!$&'()*+,;=:@", r)
}

// count returns the number set by flag name or env: 0 or more, 0 meaning
// the default; otherwise an error naming the setting.
func (p *configParser) count(name, env string) (int, error) {
	text, from := p.value(name, env)
	n, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid %s %q (from %s): want a whole number, or 0 for the default", name, text, from)
	}
	return n, nil
}

// size returns the byte size set by flag name or env: a whole number of
// bytes, or of KiB, MiB or GiB with that suffix (also k/M/G, K/MB/GB in
// the same binary sense); 0 means the default.
func (p *configParser) size(name, env string) (int, error) {
	text, from := p.value(name, env)
	n, ok := parseSize(text)
	if !ok {
		return 0, fmt.Errorf("invalid %s %q (from %s): want a size such as 268435456, 256MiB or 1GiB, or 0 for the default", name, text, from)
	}
	return n, nil
}

// parseSize parses a byte size: digits, then an optional unit of 1024^k.
func parseSize(s string) (int, bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i == 0 {
		return 0, false
	}
	digits, unit := s, ""
	if i > 0 {
		digits, unit = s[:i], strings.TrimSpace(s[i:])
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, false
	}
	var shift uint
	switch strings.ToLower(unit) {
	case "", "b":
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	default:
		return 0, false
	}
	if n > (1<<62)>>shift {
		return 0, false
	}
	return n << shift, true
}

// duration returns the positive duration set by flag name or env, or an
// error naming the setting and an example.
func (p *configParser) duration(name, env, example string) (time.Duration, error) {
	text, from := p.value(name, env)
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("invalid %s %q (from %s): want a positive duration such as %s", name, text, from, example)
	}
	return d, nil
}

// value returns the setting of flag name and where it came from: the flag
// if given, else the first of envs that is not empty, else the flag's
// default.
func (p *configParser) value(name string, envs ...string) (value, from string) {
	if p.given[name] {
		return p.fs.Lookup(name).Value.String(), "-" + name
	}
	for _, env := range envs {
		if v := p.getenv(env); v != "" {
			return v, env
		}
	}
	return p.fs.Lookup(name).DefValue, "the default"
}

// addr returns the listen address: flag addrFlag as given, else every
// interface at the port of portFlag (or of envs).
func (p *configParser) addr(addrFlag, portFlag string, envs ...string) (string, error) {
	if p.given[addrFlag] {
		return p.fs.Lookup(addrFlag).Value.String(), nil
	}
	port, from := p.value(portFlag, envs...)
	n, err := strconv.Atoi(strings.TrimSpace(port))
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("invalid port %q (from %s): want a number from 0 to 65535", port, from)
	}
	return ":" + strconv.Itoa(n), nil
}

// parseLevel parses a LOG_LEVEL value, case-insensitively; empty means info.
func parseLevel(s string) (zerolog.Level, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace":
		return zerolog.TraceLevel, true
	case "debug":
		return zerolog.DebugLevel, true
	case "", "info":
		return zerolog.InfoLevel, true
	case "warn":
		return zerolog.WarnLevel, true
	case "error":
		return zerolog.ErrorLevel, true
	}
	return zerolog.NoLevel, false
}
