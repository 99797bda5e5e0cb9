package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
	"github.com/tollgate-rl/tollgate/store/memory"
)

var errStoreDown = errors.New("dial tcp 10.0.0.1:8000: connection refused")

// downStore is a store that can stop answering: while down, the calls of an
// acquire and of /readyz fail as a store that cannot be reached does. Its
// purge takes purgeFor (of wall time) before it starts, or until its
// context ends.
type downStore struct {
	store.Store
	down     atomic.Bool
	purgeFor time.Duration
}

func (d *downStore) err() error {
	if d.down.Load() {
		return errStoreDown
	}
	return nil
}

func (d *downStore) Consume(ctx context.Context, ns string, req *store.ConsumeRequest) (bool, error) {
	if err := d.err(); err != nil {
		return false, err
	}
	return d.Store.Consume(ctx, ns, req)
}

func (d *downStore) ApplyDeltas(ctx context.Context, ns string, deltas []store.Delta) error {
	if err := d.err(); err != nil {
		return err
	}
	return d.Store.ApplyDeltas(ctx, ns, deltas)
}

func (d *downStore) ReadBuckets(ctx context.Context, ns string, keys []store.BucketKey) ([]*store.Record, error) {
	if err := d.err(); err != nil {
		return nil, err
	}
	return d.Store.ReadBuckets(ctx, ns, keys)
}

func (d *downStore) GetConfigs(ctx context.Context, ns string, scopes []model.Scope) ([]*model.Config, error) {
	if err := d.err(); err != nil {
		return nil, err
	}
	return d.Store.GetConfigs(ctx, ns, scopes)
}

func (d *downStore) GetNamespace(ctx context.Context, name string) (model.Namespace, error) {
	if err := d.err(); err != nil {
		return model.Namespace{}, err
	}
	return d.Store.GetNamespace(ctx, name)
}

func (d *downStore) PurgeNamespace(ctx context.Context, name string, progress func(int)) error {
	select {
	case <-time.After(d.purgeFor):
	case <-ctx.Done():
		return ctx.Err()
	}
	return d.Store.PurgeNamespace(ctx, name, progress)
}

// metric returns the line of the metric named (with labels) in /metrics.
func (e *env) metric(name string) string {
	e.t.Helper()
	resp, err := e.ts.Client().Get(e.ts.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	return ""
}

// When the store does not answer: 503 in block mode, a degraded grant in
// allow mode, a store error counted for each 503, and /readyz says so.
func TestStoreDown(t *testing.T) {
	ds := &downStore{Store: memory.New()}
	e := newEnvOver(t, ds)
	e.want(http.StatusOK, "POST", "/v1/acquire", acquireBody("rpm:5/min"), nil) // caches the namespace
	e.want(http.StatusOK, "GET", "/readyz", nil, nil)
	if got := e.metric("tollgate_store_errors_total"); got != "tollgate_store_errors_total 0" {
		t.Errorf("before the outage: %q", got)
	}

	ds.down.Store(true)
	var er api.Error
	e.want(http.StatusServiceUnavailable, "POST", "/v1/acquire", acquireBody("rpm:5/min"), &er)
	if er.Code != api.CodeUnavailable || er.Reason != "" || strings.Contains(er.Message, "10.0.0.1") {
		t.Errorf("block mode: %+v (want unavailable, without the store's details)", er)
	}
	allow := acquireBody("rpm:5/min")
	allow["on_unavailable"] = "allow"
	var a api.AcquireResponse
	e.want(http.StatusOK, "POST", "/v1/acquire", allow, &a)
	if !a.Degraded || len(a.Consumed) != 0 || len(a.Limits) != 0 || a.LeaseID == "" {
		t.Errorf("allow mode: %+v, want a degraded lease that consumed nothing", a)
	}
	e.want(http.StatusOK, "POST", "/v1/leases/"+a.LeaseID+"/commit", nil, nil) // writes nothing
	e.want(http.StatusServiceUnavailable, "GET", "/readyz", nil, &er)
	if er.Code != api.CodeUnavailable {
		t.Errorf("readyz: %+v", er)
	}
	for name, want := range map[string]string{
		"tollgate_store_errors_total":                    "1",
		`tollgate_acquires_total{outcome="unavailable"}`: "1",
		`tollgate_acquires_total{outcome="degraded"}`:    "1",
	} {
		if got := e.metric(name); got != name+" "+want {
			t.Errorf("metric %q, want %s %s", got, name, want)
		}
	}

	ds.down.Store(false)
	e.want(http.StatusOK, "GET", "/readyz", nil, nil)
	var av api.AvailableResponse
	e.want(http.StatusOK, "GET", "/v1/available?entity=key-1&resource=api&limits=rpm:5/min", nil, &av)
	if len(av.Limits) != 1 || av.Limits[0].Available != 4 {
		t.Errorf("after the outage: %+v, want 4 of 5 (only the first acquire counted)", av.Limits)
	}
}

// A purge may outlast HTTPServer's read and write timeouts: its route moves
// the connection's deadlines, so neither cancels it nor cuts its answer.
func TestPurgeOutlastsServerTimeouts(t *testing.T) {
	ds := &downStore{Store: memory.New(), purgeFor: 300 * time.Millisecond}
	srv := mustServer(New(ds, WithLogger(slog.New(slog.DiscardHandler))))
	hs := srv.HTTPServer("127.0.0.1:0")
	hs.ReadTimeout, hs.WriteTimeout = 50*time.Millisecond, 50*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); _ = srv.Close(context.Background()) })
	adm, err := tollgate.NewAdmin(ds)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := adm.RegisterNamespace(ctx, "team-b"); err != nil {
		t.Fatal(err)
	}
	if err := adm.DeleteNamespace(ctx, "team-b"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/namespaces/team-b/purge", "application/json", nil)
	if err != nil {
		t.Fatalf("purge: %v (the server cut the connection)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("purge: %d %s", resp.StatusCode, body)
	}
	if _, err := adm.GetNamespace(ctx, "team-b"); !errors.Is(err, model.ErrNamespaceNotFound) {
		t.Errorf("after the purge: %v, want namespace not found", err)
	}
}
