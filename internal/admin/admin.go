// Package admin serves the daemon's operator HTTP API on admin_listen:
// liveness and readiness, Prometheus metrics, the loaded plugins, the managed
// groups and a picture of each group's assignment.
//
// The package defines the JSON documents and the routes; what they report
// comes through the [Source] interface, which the daemon implements over its
// coordinator and plugin registry. It must not import those packages, so the
// API can be tested with a fake and the daemon's layers stay one-way.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/wasmassign/wasmassign/internal/cluster"
)

// Plugin is one loaded plugin module, as /v1/plugins lists it.
type Plugin struct {
	Name       string   `json:"name"`
	File       string   `json:"file"`
	SHA256     string   `json:"sha256"`
	ABIVersion uint32   `json:"abi_version"`
	Assignors  []string `json:"assignors"`
	// Status is "ok", "failed" (the file is broken; an older version may
	// still serve) or "removed" (the file is gone; the last good version
	// serves because a group uses it).
	Status    string `json:"status"`
	LastError string `json:"last_error,omitempty"`
	// Builtin is true for modules embedded in the binary.
	Builtin bool `json:"builtin"`
	// Instances is the module's share of the plugin host's pool now.
	Instances Instances `json:"instances"`
}

// Instances counts one module's instances (worker processes, in process
// isolation) by state, and its calls waiting for one.
type Instances struct {
	Busy   int `json:"busy"`
	Idle   int `json:"idle"`
	Idling int `json:"idling"`
	Queued int `json:"queued"`
}

// Pool is the plugin host's pool of instances, shared by every module, as
// /v1/plugins/pool shows it: what an operator sizes plugins.workers by.
type Pool struct {
	// Size is the most instances the host runs at once.
	Size int `json:"size"`
	// Busy, Idle, Idling (in the guest's idle call after a call) and
	// Starting (spares, started in the background) count the instances
	// by state; Queued counts the calls waiting for one.
	Busy     int `json:"busy"`
	Idle     int `json:"idle"`
	Idling   int `json:"idling"`
	Starting int `json:"starting"`
	Queued   int `json:"queued"`
	// Waits counts the calls that had to wait since start-up; their wait
	// took WaitSeconds together, and at most WaitMaxSeconds.
	Waits          uint64  `json:"waits"`
	WaitSeconds    float64 `json:"wait_seconds"`
	WaitMaxSeconds float64 `json:"wait_max_seconds"`
	// Overloads counts the calls that waited past plugins.queue_timeout
	// and were asked again.
	Overloads uint64 `json:"overloads"`
}

// Group is one managed group, as /v1/groups/{id} shows it. The field names
// are part of the API.
type Group struct {
	Group             string         `json:"group"`
	State             string         `json:"state"`
	Generation        int32          `json:"generation"`
	Protocol          string         `json:"protocol"`
	Assignor          string         `json:"assignor"`
	RebalanceProtocol string         `json:"rebalance_protocol"`
	Members           []Member       `json:"members"`
	LastRebalance     *LastRebalance `json:"last_rebalance"`
}

// Member is one member of a group and the partitions it holds now.
type Member struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	Host       string  `json:"host"`
	Rack       string  `json:"rack"`
	// Assignment maps topic to ascending partitions.
	Assignment map[string][]int32 `json:"assignment"`
}

// LastRebalance summarises a group's latest completed rebalance.
type LastRebalance struct {
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms"`
	Moved      int       `json:"moved"`
	Withheld   int       `json:"withheld"`
	Fallback   bool      `json:"fallback"`
}

// GroupSummary is one line of /v1/groups.
type GroupSummary struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	Generation int32  `json:"generation"`
	Members    int    `json:"members"`
	Assignor   string `json:"assignor"`
}

// Cluster is GET /v1/cluster: the gateway cluster as this gateway sees
// it, from the latest generation of the gateways' group.
type Cluster struct {
	Name       string `json:"name"`
	Gateway    string `json:"gateway"` // this gateway's id
	Generation int32  `json:"generation"`
	// LayoutChangedAt is when the layout last changed, MovedAt when this
	// gateway last took or gave up a shard; null for never.
	LayoutChangedAt *time.Time `json:"layout_changed_at"`
	MovedAt         *time.Time `json:"moved_at"`
	// Leaving is set while this gateway hands its groups over at
	// shutdown.
	Leaving  bool             `json:"leaving"`
	Gateways []ClusterGateway `json:"gateways"`
	// Shards and Groups are this gateway's: the state topic's partitions
	// it holds, and the managed groups it serves, with their shards.
	Shards []ClusterShard `json:"shards"`
	Groups []ClusterGroup `json:"groups"`
}

// ClusterGateway is one gateway of the cluster's layout. Refused says why
// it was given no shard.
type ClusterGateway struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Admin   string `json:"admin,omitempty"`
	Shards  []int  `json:"shards"`
	Refused string `json:"refused,omitempty"`
}

// ClusterShard is one shard this gateway holds: where it is in its life
// ("loading" or "serving"), and since when.
type ClusterShard struct {
	Shard int                `json:"shard"`
	State cluster.ShardState `json:"state"`
	Since time.Time          `json:"since"`
}

// ClusterGroup is one managed group this gateway serves, and its shard.
type ClusterGroup struct {
	Group string `json:"group"`
	Shard int    `json:"shard"`
}

// Source is what the admin API reports on. Its methods must not block for
// long: they run on HTTP handler goroutines.
type Source interface {
	// Ready returns nil once the upstream is reachable and the plugins are
	// loaded, and otherwise an error saying what is missing.
	Ready(ctx context.Context) error
	// Plugins lists the loaded plugin modules.
	Plugins() []Plugin
	// Pool reports the plugin host's pool of instances.
	Pool() Pool
	// Groups lists the managed groups, Empty ones included until their
	// retention ends.
	Groups() []GroupSummary
	// Group returns one group, false when it is unknown.
	Group(id string) (Group, bool)
	// GroupSVG writes the picture of a group's assignment; false when the
	// group is unknown.
	GroupSVG(w io.Writer, id string) (bool, error)
	// Cluster reports the gateway cluster; false outside one.
	Cluster() (Cluster, bool)
}

// Options configure the handler.
type Options struct {
	// Token, when set, must be sent as "Authorization: Bearer <token>" on
	// every route except /healthz.
	Token string
	// Metrics serves /metrics; nil leaves the route out.
	Metrics http.Handler
	// Pprof serves the Go runtime's profiles under /debug/pprof/, for
	// finding where a loaded gateway spends its CPU and memory. Profiles
	// name the code and its inputs' sizes, so they sit behind the token
	// like every other route.
	Pprof  bool
	Logger *slog.Logger
}

// NewHandler returns the admin API's HTTP handler.
func NewHandler(src Source, opt Options) http.Handler {
	logger := opt.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	protected := http.NewServeMux()
	protected.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := src.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	if opt.Metrics != nil {
		protected.Handle("GET /metrics", opt.Metrics)
	}
	if opt.Pprof {
		protected.HandleFunc("GET /debug/pprof/", pprof.Index)
		protected.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		protected.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		protected.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		protected.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	protected.HandleFunc("GET /v1/plugins", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, logger, nonNil(src.Plugins()))
	})
	protected.HandleFunc("GET /v1/plugins/pool", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, logger, src.Pool())
	})
	protected.HandleFunc("GET /v1/cluster", func(w http.ResponseWriter, _ *http.Request) {
		c, ok := src.Cluster()
		if !ok {
			http.Error(w, "this gateway is in no cluster ([cluster] name is empty)", http.StatusNotFound)
			return
		}
		c.Gateways, c.Shards, c.Groups = nonNil(c.Gateways), nonNil(c.Shards), nonNil(c.Groups)
		for i := range c.Gateways {
			c.Gateways[i].Shards = nonNil(c.Gateways[i].Shards)
		}
		writeJSON(w, logger, c)
	})
	protected.HandleFunc("GET /v1/groups", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, logger, nonNil(src.Groups()))
	})
	protected.HandleFunc("GET /v1/groups/{id}", func(w http.ResponseWriter, r *http.Request) {
		g, ok := src.Group(r.PathValue("id"))
		if !ok {
			notFound(w, r.PathValue("id"))
			return
		}
		g.Members = nonNil(g.Members)
		for i := range g.Members {
			if g.Members[i].Assignment == nil {
				g.Members[i].Assignment = map[string][]int32{}
			}
		}
		writeJSON(w, logger, g)
	})
	protected.HandleFunc("GET /v1/groups/{id}/assignment.svg", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		w.Header().Set("Content-Type", "image/svg+xml")
		// The picture is drawn into a buffer-less writer: an error after
		// the first byte can only be logged.
		ok, err := src.GroupSVG(w, id)
		switch {
		case !ok:
			w.Header().Set("Content-Type", "application/json")
			notFound(w, id)
		case err != nil:
			logger.Error("admin: drawing assignment", "group", id, "err", err)
		}
	})
	mux.Handle("/", requireToken(opt.Token, protected))
	return mux
}

// requireToken wraps h so that requests without the bearer token get 401.
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wasmassign"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func notFound(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	json.NewEncoder(w).Encode(map[string]string{"error": "no managed group " + quote(id)})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func writeJSON(w http.ResponseWriter, logger *slog.Logger, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		logger.Warn("admin: writing response", "err", err)
	}
}

// nonNil makes empty lists encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Serve runs the admin API on ln until ctx ends, then shuts down within a
// few seconds. It returns once ln is closed. The caller listens, so that a
// bad admin_listen stops start-up before anything else runs.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("admin: shutdown", "err", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// IsLoopback reports whether addr binds only to a loopback interface; the
// daemon warns when an admin listener without a token is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
