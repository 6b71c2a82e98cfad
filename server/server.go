// Package server is the HTTP face of the agent: routes, authentication,
// request decoding and the one function that writes errors. The work itself
// is done by the executor, procs, files and proxy packages.
package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/sandbox-executor/sandbox-executor/checkpoint"
	"github.com/sandbox-executor/sandbox-executor/contexts"
	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/files"
	"github.com/sandbox-executor/sandbox-executor/mcp"
	"github.com/sandbox-executor/sandbox-executor/procs"
	"github.com/sandbox-executor/sandbox-executor/proxy"
	"github.com/sandbox-executor/sandbox-executor/search"
	"github.com/sandbox-executor/sandbox-executor/sessions"
	"github.com/sandbox-executor/sandbox-executor/sse"
	"github.com/sandbox-executor/sandbox-executor/stats"
	"github.com/sandbox-executor/sandbox-executor/terminals"
	"github.com/sandbox-executor/sandbox-executor/tunnels"
	"github.com/sandbox-executor/sandbox-executor/watch"
)

// Config holds the settings of the HTTP face. Zero fields take defaults.
type Config struct {
	// BasePath, if set (e.g. "/koyeb-sandbox"), serves every endpoint
	// under that prefix as well as at the root.
	BasePath string
	// MaxBody caps a request body, in bytes. If zero, 64 MiB.
	MaxBody int64
	// KeepAlive is how often an idle event stream gets a ": ping"
	// comment. If zero, 15 s.
	KeepAlive time.Duration
	// StallTimeout ends an event stream whose client accepts nothing for
	// that long, as if it had left: a /run_streaming command is then
	// killed, a log reader removed. If zero, 60 s.
	StallTimeout time.Duration
	// BodyTimeout bounds the reading of a JSON request body, from the
	// handler's first read to its end; a streamed body (an upload) must
	// instead make progress at least that often. If zero, 30 s.
	BodyTimeout time.Duration
	// BodyBudget bounds the bytes of large JSON request bodies (over
	// 1 MiB) that are read and decoded at once: each costs about three
	// times its size while it is decoded (a base64 write_file). A request
	// past it waits its turn, for at most BodyTimeout, then gets 503. If
	// zero, MaxBody.
	BodyBudget int64
	// UnauthTimeout is the read timeout of a connection on which no
	// request has passed authentication yet, in place of the idle and
	// header timeouts of the http.Server; see Listener. If zero, 10 s.
	UnauthTimeout time.Duration
	// MaxConns caps the API connections open at once; see Listener. If
	// zero, half the limit on open files, at most 4,096.
	MaxConns int
	// ProxyPort is the TCP proxy's port, reported by /health,
	// /port_status and /bind_port.
	ProxyPort int
	// APIPort is the API's own port, which /bind_port refuses, as it
	// does ProxyPort. If zero, only ProxyPort is refused.
	APIPort int
	// Version is reported by /health.
	Version string
	// MetricsOpen serves GET /metrics without a token, for a scraper on
	// a trusted network. Every other endpoint still needs one.
	MetricsOpen bool
	// MaxUpload caps what one upload to /files may send, in bytes, on the
	// wire and once decoded (413 past it). If zero, there is no cap.
	MaxUpload int64
	// ExtractEntries caps the entries of one archive unpacked by PUT
	// /files?extract= (400 past it). If zero, files.DefaultExtractEntries.
	ExtractEntries int
	// ExtractTimeout bounds the unpacking of one archive, its upload
	// included (408 past it). If zero, files.DefaultExtractTimeout.
	ExtractTimeout time.Duration
	// TrustForwardedHost makes host routing of previews (see
	// routeHost) read X-Forwarded-Host before Host, and the preview
	// proxy pass the client's X-Forwarded-Host and X-Forwarded-Proto on
	// to the app: for an agent behind an edge that sets them. Off, a
	// client could pick any exposed port by that header.
	TrustForwardedHost bool
	// MCP holds the settings of the MCP endpoint, /mcp.
	MCP MCPConfig
	// MaxWatches caps the watches at once: /watch streams, kept watches
	// and /wait_for_path calls (503 past it). If zero,
	// watch.DefaultMaxWatches.
	MaxWatches int
	// MaxWatchedDirs caps the directories all watches hold. If zero,
	// three quarters of the system's fs.inotify.max_user_watches.
	MaxWatchedDirs int
}

// Deps are the parts of the agent a Server drives. Every field is
// required unless its comment says otherwise; the caller owns them and
// closes them after the Server has stopped serving.
type Deps struct {
	Runner    *executor.Runner    // runs /run and /run_streaming commands
	Procs     *procs.Registry     // background processes
	Forwarder *proxy.Forwarder    // the TCP proxy behind /bind_port
	Terminals *terminals.Registry // terminals, driven over /terminal_ws
	Sessions  *sessions.Registry  // sessions, for /create_session and the commands that name one
	Contexts  *contexts.Registry  // code contexts, for /create_context and /run_code
	// Resources reads the sandbox's resources for /metrics and /stats.
	// If nil, it is stats.New of the agent's working directory.
	Resources *stats.Reader
	// Checkpoints keeps the checkpoints of /create_checkpoint. If nil,
	// the Server opens one in a temporary directory of its own, which
	// Close removes.
	Checkpoints *checkpoint.Store
	// Tunnels holds the CONNECT and /tunnel_ws tunnels. If nil, the
	// Server keeps a Registry of its own with the defaults, the API and
	// proxy ports of Config reserved, which Close closes.
	Tunnels *tunnels.Registry
	// Exec, if not nil, is what the MCP tools exec and exec_poll stand
	// on; if nil, the Server's own /run yield_ms and /poll_process (see
	// Server.ExecFuncs), given Procs.
	Exec *ExecFuncs
	// Search runs /grep and /find_files. If nil, a zero Searcher: Go's
	// regexp and the agent's own walk, never rg.
	Search *search.Searcher
}

// Server serves the API. Create it with New.
type Server struct {
	log      zerolog.Logger
	auth     *Auth
	runner   *executor.Runner
	procs    *procs.Registry
	fwd      *proxy.Forwarder
	terms    *terminals.Registry
	sessions *sessions.Registry
	contexts *contexts.Registry
	res      *stats.Reader
	metrics  *metrics
	ids      requestIDs
	bodies   *semaphore.Weighted // see Config.BodyBudget
	cfg      Config
	router   *router
	handler  http.Handler
	started  time.Time
	tunnels  *tunnels.Registry
	// ownTunnels is set if tunnels is the Server's own, for Close.
	ownTunnels bool
	preview    *previewProxy
	mcp        func() *mcp.Server // nil with MCP.Off; else built at the first /mcp request (see New)
	exec       *ExecFuncs         // nil: no exec tools
	exposed    exposedPorts
	watches    *watch.Manager // the Server's own; Close closes it
	// checkpoints is Deps.Checkpoints, or the Server's own in ownState;
	// nil if that could not be made (the endpoints then answer 503).
	checkpoints *checkpoint.Store
	ownState    string
	// freeSpace is files.FreeSpace; tests replace it to play a full disk.
	freeSpace func(dir string) (int64, error)
	search    *search.Searcher
	// execStdins is the /exec_ws commands' stdin side channels.
	execStdins execStdins
}

// New returns a Server that checks tokens with auth and drives deps.
func New(log zerolog.Logger, auth *Auth, deps Deps, cfg Config) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 20
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 60 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.BodyBudget <= 0 {
		cfg.BodyBudget = cfg.MaxBody
	}
	if cfg.UnauthTimeout <= 0 {
		cfg.UnauthTimeout = 10 * time.Second
	}
	cfg.BasePath = strings.TrimRight(cfg.BasePath, "/")
	s := &Server{log: log, auth: auth, runner: deps.Runner, procs: deps.Procs, fwd: deps.Forwarder,
		terms: deps.Terminals, sessions: deps.Sessions, tunnels: deps.Tunnels, exec: deps.Exec, contexts: deps.Contexts, cfg: cfg,
		router: newRouter(), started: time.Now(), freeSpace: files.FreeSpace}
	if s.search = deps.Search; s.search == nil {
		s.search = &search.Searcher{}
	}
	if s.res = deps.Resources; s.res == nil {
		wd, _ := os.Getwd() // "" if the directory is gone: Disk then fails, and is left out
		s.res = stats.New(wd)
	}
	s.ids = newRequestIDs()
	s.bodies = semaphore.NewWeighted(cfg.BodyBudget)
	s.metrics = newMetrics()
	if s.tunnels == nil {
		s.tunnels = &tunnels.Registry{Reserved: []int{cfg.APIPort, cfg.ProxyPort}, Log: log}
		s.ownTunnels = true
	}
	s.preview = newPreviewProxy(s)
	s.watches = watch.NewManager(watch.Options{MaxWatches: cfg.MaxWatches, MaxDirs: cfg.MaxWatchedDirs})
	if s.checkpoints = deps.Checkpoints; s.checkpoints == nil {
		s.openOwnCheckpoints()
	}
	if s.exec == nil && s.procs != nil && s.runner != nil {
		fns := s.ExecFuncs()
		s.exec = &fns
	}
	if !cfg.MCP.Off {
		// Built at the first /mcp request, not here: the tools' schemas
		// and the protocol server are ~70 KB of heap and code that an
		// agent nobody calls /mcp on would keep resident from start-up.
		s.mcp = sync.OnceValue(s.newMCP)
	}
	s.routes()
	s.handler = s.requestPath()
	return s
}

// Close closes the idle connections the preview proxy keeps to the
// sandbox's apps, the watches, and the Server's own tunnels Registry if
// Deps had none.
// Call it once the http.Server has shut down; a registry given in Deps is
// the caller's to close, before this. If ctx ends before the tunnels are
// gone, Close returns ctx.Err().
func (s *Server) Close(ctx context.Context) error {
	var err error
	if s.ownTunnels {
		err = s.tunnels.Close(ctx)
	}
	s.preview.closeIdle()
	err = errors.Join(err, s.watches.Close(ctx))
	if s.ownState != "" {
		err = errors.Join(err, os.RemoveAll(s.ownState))
	}
	return err
}

// openOwnCheckpoints opens a checkpoint store in a temporary directory of
// the Server's own, for a Server built without one.
func (s *Server) openOwnCheckpoints() {
	dir, err := os.MkdirTemp("", "sandbox-executor-state-")
	if err != nil {
		s.log.Warn().Err(err).Msg("checkpoints unavailable")
		return
	}
	s.ownState = dir
	if s.checkpoints, err = checkpoint.Open(checkpoint.Options{Dir: dir}); err != nil {
		s.log.Warn().Err(err).Msg("checkpoints unavailable")
	}
}

// newStream opens an event stream on w, the reply to r; see
// sse.NewWriter. The stream counts in the metrics until its handler
// returns.
func (s *Server) newStream(w http.ResponseWriter, r *http.Request) *sse.Writer {
	// Only the access layer, which counts the stream's end, counts its
	// start.
	if st, ok := lookupState(r); ok && st.rec.streamBytes == nil {
		st.rec.streamBytes = &s.metrics.streamBytes
		s.metrics.streamsOpen.Add(1)
		s.metrics.streamsTotal.Add(1)
	}
	sw := sse.NewWriter(w)
	sw.StallTimeout = s.cfg.StallTimeout
	return sw
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routePath serves a request as if its path were clean ("//run" and
// "/./run" as /run: clients that join a base URL ending in "/" with
// "/run" send the first) and, under cfg.BasePath, as if it had come
// without the prefix. It does not answer with a redirect, as
// http.ServeMux and gorilla/mux's cleaning do: a redirect with an empty
// body is followed as a GET, and drops the prefix.
func (s *Server) routePath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := cleanPath(r.URL.Path)
		if s.cfg.BasePath != "" {
			if rest, ok := strings.CutPrefix(p, s.cfg.BasePath); ok && (rest == "" || rest[0] == '/') {
				p = rest
				if p == "" {
					p = "/"
				}
			}
		}
		if p != r.URL.Path {
			// A shallow copy, as http.StripPrefix makes: r.Clone would
			// copy every header too.
			r2 := new(http.Request)
			*r2 = *r
			r2.URL = new(url.URL)
			*r2.URL = *r.URL
			r2.URL.Path = p
			r2.URL.RawPath = ""
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is path.Clean of an absolute p that keeps a trailing slash:
// "/run/" stays distinct from "/run", which the router does not match.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}
