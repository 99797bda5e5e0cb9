package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store/memory"
)

// receiver is a webhook on loopback that answers each POST with the next
// of its codes (200 once they run out) and hands the bodies to the test.
type receiver struct {
	ts     *httptest.Server
	bodies chan api.Alert
	raw    chan []byte // the same bodies, as sent
	codes  chan int
	hold   chan struct{} // when not nil, each answer waits for it to close
}

func newReceiver(t *testing.T, codes ...int) *receiver {
	r := &receiver{bodies: make(chan api.Alert, 2*AlertQueueSize), raw: make(chan []byte, 2*AlertQueueSize), codes: make(chan int, len(codes))}
	for _, c := range codes {
		r.codes <- c
	}
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var a api.Alert
		data, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(data, &a); err != nil || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook got %s %q (%s): %v", req.Method, data, req.Header.Get("Content-Type"), err)
		}
		r.raw <- data
		r.bodies <- a
		if r.hold != nil {
			<-r.hold
		}
		code := http.StatusOK
		select {
		case code = <-r.codes:
		default:
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.ts.Close)
	return r
}

// next waits for the webhook's next POST.
func (r *receiver) next(t *testing.T) api.Alert {
	t.Helper()
	select {
	case a := <-r.bodies:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no alert delivered within 10s")
		return api.Alert{}
	}
}

// alertEnv is a server posting alerts to r, over a configuration of
// rpm:10/min alerting at thresholds; done receives after each delivery
// ends (sent or failed).
func alertEnv(t *testing.T, r *receiver, thresholds ...float64) (*env, chan struct{}) {
	e := newEnv(t, WithAlertWebhook(r.ts.URL+"/hook"))
	done := make(chan struct{}, 2*AlertQueueSize)
	e.srv.alerts.delivered = func() { done <- struct{}{} }
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min"}, AlertAt: thresholds}, nil)
	return e, done
}

func (e *env) acquireRPM(entity string, n int64, status int) {
	e.t.Helper()
	e.want(status, "POST", "/v1/acquire", map[string]any{"entity": entity, "resource": "api", "consume": map[string]int64{"rpm": n}}, nil)
}

func wait(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("delivery did not end within 10s")
	}
}

// One alert per upward crossing, per threshold, with the payload the
// docs describe; none while the use stays above; again once it fell below
// the re-arming band and crosses anew.
func TestAlertWebhookOncePerCrossing(t *testing.T) {
	r := newReceiver(t)
	e, done := alertEnv(t, r, 0.5, 1)
	e.acquireRPM("key-1", 6, http.StatusOK) // 0.6: crosses 0.5
	a := r.next(t)
	want := api.Alert{Key: "default/key-1/api/rpm@0.5", Namespace: "default", Entity: "key-1", Resource: "api", Limit: "rpm",
		Threshold: 0.5, Use: 0.6, At: epoch.UTC().Format("2006-01-02T15:04:05.000Z07:00"), AtMS: epoch.UnixMilli()}
	if a != want {
		t.Errorf("alert %+v, want %+v", a, want)
	}
	loadSpec(t).checkBody(t, "/components/schemas/Alert", <-r.raw) // the webhook's body, as the OpenAPI document describes it
	wait(t, done)
	e.acquireRPM("key-1", 1, http.StatusOK)              // 0.7: 0.5 fired already
	e.acquireRPM("key-2", 4, http.StatusOK)              // another entity, 0.4: below
	e.acquireRPM("key-1", 4, http.StatusTooManyRequests) // refused, 1.1: crosses 1
	if a := r.next(t); a.Threshold != 1 || a.Entity != "key-1" || a.Use < 1.1-1e-9 || a.Use > 1.1+1e-9 {
		t.Errorf("alert %+v, want key-1 crossing 1 at use 1.1", a)
	}
	wait(t, done)
	e.acquireRPM("key-1", 3, http.StatusOK) // 1.0: both fired already
	e.clk.Advance(time.Minute)              // refilled
	e.acquireRPM("key-1", 1, http.StatusOK) // 0.1: both re-armed
	e.acquireRPM("key-1", 5, http.StatusOK) // 0.6: crosses 0.5 again
	if a := r.next(t); a.Threshold != 0.5 || a.AtMS != epoch.Add(time.Minute).UnixMilli() {
		t.Errorf("alert %+v, want 0.5 again, a minute on", a)
	}
	wait(t, done)
	select {
	case a := <-r.bodies:
		t.Errorf("unexpected alert %+v", a)
	default:
	}
	if got := e.metric("tollgate_alerts_sent_total"); got != "tollgate_alerts_sent_total 3" {
		t.Errorf("/metrics: %q, want 3 sent", got)
	}
}

// A delivery the webhook fails is tried again after 1s, 2s, 4s, 8s on the
// server's clock, AlertTries times in all; a 4xx other than 429 fails at
// once.
func TestAlertWebhookRetries(t *testing.T) {
	tests := []struct {
		name         string
		codes        []int
		waits        []time.Duration
		sent, failed int
	}{
		{"sent at once", nil, nil, 1, 0},
		{"after two 500s", []int{500, 503}, []time.Duration{time.Second, 2 * time.Second}, 1, 0},
		{"after a 429", []int{429}, []time.Duration{time.Second}, 1, 0},
		{"failing every try", []int{500, 500, 500, 500, 500}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, 0, 1},
		{"refused", []int{400}, nil, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, tt.codes...)
			e, done := alertEnv(t, r, 0.5)
			e.acquireRPM("key-1", 6, http.StatusOK)
			for i, w := range tt.waits {
				r.next(t)
				if !e.clk.BlockUntilWaiters(1, done) {
					t.Fatalf("try %d: delivery ended, want a wait of %v", i+1, w)
				}
				if at, _ := e.clk.NextDeadline(); at.Sub(e.clk.Now()) != w {
					t.Errorf("try %d: waits %v, want %v", i+1, at.Sub(e.clk.Now()), w)
				}
				e.clk.Advance(w)
			}
			r.next(t)
			wait(t, done)
			if n := len(r.bodies); n != 0 {
				t.Errorf("%d more tries, want none", n)
			}
			for name, want := range map[string]int{"tollgate_alerts_sent_total": tt.sent, "tollgate_alerts_failed_total": tt.failed} {
				if got, w := e.metric(name), name+" "+strconv.Itoa(want); got != w {
					t.Errorf("/metrics: %q, want %q", got, w)
				}
			}
		})
	}
}

// A webhook that does not answer never holds up an acquire: alerts queue
// up to AlertQueueSize, and beyond it are dropped and counted.
func TestAlertQueueFullDrops(t *testing.T) {
	r := newReceiver(t)
	r.hold = make(chan struct{})
	e, _ := alertEnv(t, r, 0.5)
	lim, err := e.srv.Limiter(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	const extra = 5
	ctx := context.Background()
	acquire := func(i int) {
		le, err := lim.Acquire(ctx, "e"+strconv.Itoa(i), "api", tollgate.Consume{"rpm": 6})
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		_ = le.Commit(ctx)
	}
	acquire(0)
	r.next(t) // the worker holds the first alert, its POST unanswered
	for i := 1; i <= AlertQueueSize+extra; i++ {
		acquire(i)
	}
	if got, want := e.metric("tollgate_alerts_dropped_total"), "tollgate_alerts_dropped_total "+strconv.Itoa(extra); got != want {
		t.Errorf("/metrics: %q, want %q", got, want)
	}
	close(r.hold)
}

// Per-limit decision counts and near-limit counts over /metrics, by
// namespace, resource, limit and outcome, without entities; the entities
// refused most at GET /v1/metrics/top-denied.
func TestDecisionMetricsAndTopDenied(t *testing.T) {
	e := newEnv(t)
	e.want(http.StatusOK, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min", "tpm:100/min"}, Shadow: []string{"tpm"}}, nil)
	for _, c := range []struct {
		entity string
		rpm    int64
		status int
	}{{"key-1", 9, 200}, {"key-1", 2, 429}, {"key-1", 2, 429}, {"key-2", 2, 200}, {"key-2", 9, 429}} {
		e.want(c.status, "POST", "/v1/acquire", map[string]any{"entity": c.entity, "resource": "api", "consume": map[string]int64{"rpm": c.rpm, "tpm": 60}}, nil)
	}
	for name, want := range map[string]string{
		`tollgate_decisions_total{limit="rpm",namespace="default",outcome="granted",resource="api"}`:       "2",
		`tollgate_decisions_total{limit="rpm",namespace="default",outcome="denied",resource="api"}`:        "3",
		`tollgate_decisions_total{limit="tpm",namespace="default",outcome="granted",resource="api"}`:       "2",
		`tollgate_decisions_total{limit="tpm",namespace="default",outcome="shadow-denied",resource="api"}`: "3",
		`tollgate_near_limit_total{limit="rpm",namespace="default",resource="api"}`:                        "4",
	} {
		if got := e.metric(name); got != name+" "+want {
			t.Errorf("/metrics: %q, want %s %s", got, name, want)
		}
	}
	var top api.TopDeniedResponse
	e.want(http.StatusOK, "GET", "/v1/metrics/top-denied?resource=api&n=5", nil, &top)
	want := []api.DeniedEntity{{Entity: "key-1", Resource: "api", Limit: "rpm", Count: 2}, {Entity: "key-2", Resource: "api", Limit: "rpm", Count: 1}}
	if len(top.Entities) != len(want) || top.Entities[0] != want[0] || top.Entities[1] != want[1] {
		t.Errorf("top denied %+v, want %+v", top.Entities, want)
	}
	e.want(http.StatusOK, "GET", "/v1/metrics/top-denied?limit=tpm", nil, &top)
	if len(top.Entities) != 0 {
		t.Errorf("top denied by tpm %+v, want none (in shadow)", top.Entities)
	}
	e.want(http.StatusBadRequest, "GET", "/v1/metrics/top-denied?n=0", nil, nil)
	e.want(http.StatusBadRequest, "GET", "/v1/metrics/top-denied?n=129", nil, nil)
	e.want(http.StatusBadRequest, "PUT", "/v1/limits/resources/api", api.Limits{Limits: []string{"rpm:10/min"}, AlertAt: []float64{0.9, 0.5}}, nil)
}

// A webhook URL that is not an absolute http(s) URL is refused.
func TestAlertWebhookURL(t *testing.T) {
	for _, u := range []string{"ftp://x/y", "/hook", "http://", "::"} {
		if _, err := New(memory.New(), WithAlertWebhook(u)); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("New with webhook %q: %v, want a validation error", u, err)
		}
	}
}
