package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/clock"
	"github.com/tollgate-rl/tollgate/model"
)

// Alert delivery (WithAlertWebhook).
const (
	// AlertQueueSize bounds the alerts waiting for delivery: when it is
	// full, an alert is dropped (tollgate_alerts_dropped_total) rather
	// than make the acquire that raised it wait.
	AlertQueueSize = 1024
	// AlertTries is how often a delivery is tried: a network error, a
	// timeout, a 5xx or a 429 is tried again after AlertBackoff, doubled
	// each time (1s, 2s, 4s, 8s); any other answer but a 2xx fails at
	// once.
	AlertTries   = 5
	AlertBackoff = time.Second
	// AlertTimeout bounds each POST.
	AlertTimeout = 5 * time.Second
)

// WithAlertWebhook makes the server POST each alert its limiters raise
// (tollgate.WithAlerts: an entity's use of a limit crossing one of its
// configuration's alert_at thresholds upward) to url as JSON (api.Alert),
// from a worker of its own, tried again with backoff; Close stops the
// worker. url must be an absolute http or https URL.
func WithAlertWebhook(url string) Option { return func(s *Server) { s.alertURL = url } }

// alerter delivers alerts to a webhook, one at a time, from a queue
// acquires never wait for.
type alerter struct {
	url    string
	client *http.Client
	clock  clock.Clock
	log    *slog.Logger
	m      *metrics
	queue  chan tollgate.Alert
	stop   context.CancelFunc
	done   chan struct{}
	// delivered, when set (by tests, before the first alert), is called
	// after each alert is sent or has failed.
	delivered func()
}

// newAlerter checks rawURL and starts the delivery worker.
func newAlerter(rawURL string, c clock.Clock, log *slog.Logger, m *metrics) (*alerter, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, model.Invalid("alert_webhook", rawURL, "must be an absolute http or https URL")
	}
	ctx, stop := context.WithCancel(context.Background())
	a := &alerter{url: rawURL, client: &http.Client{Timeout: AlertTimeout}, clock: c, log: log, m: m,
		queue: make(chan tollgate.Alert, AlertQueueSize), stop: stop, done: make(chan struct{})}
	go a.run(ctx)
	return a, nil
}

// enqueue queues al for delivery, or drops it when the queue is full: it
// never blocks (it runs on an acquire's goroutine).
func (a *alerter) enqueue(al tollgate.Alert) {
	select {
	case a.queue <- al:
	default:
		a.m.alertsDropped.Inc()
	}
}

func (a *alerter) run(ctx context.Context) {
	defer close(a.done)
	for {
		select {
		case <-ctx.Done():
			return
		case al := <-a.queue:
			a.deliver(ctx, al)
			if a.delivered != nil {
				a.delivered()
			}
		}
	}
}

// close stops the worker, and waits for it until ctx ends. Alerts still
// queued are not delivered.
func (a *alerter) close(ctx context.Context) error {
	a.stop()
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// payload is al on the wire.
func payload(al tollgate.Alert) api.Alert {
	th := strconv.FormatFloat(al.Threshold, 'g', -1, 64)
	return api.Alert{
		Key:       al.Namespace + "/" + al.Entity + "/" + al.Resource + "/" + al.Limit + "@" + th,
		Namespace: al.Namespace, Entity: al.Entity, Resource: al.Resource, Limit: al.Limit,
		Threshold: al.Threshold, Use: al.Use,
		At: al.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), AtMS: al.At.UnixMilli(),
	}
}

// deliver posts al, AlertTries times at most, waiting AlertBackoff
// (doubled each time) on the server's clock between tries.
func (a *alerter) deliver(ctx context.Context, al tollgate.Alert) {
	body, err := json.Marshal(payload(al))
	if err != nil {
		a.m.alertsFailed.Inc()
		return
	}
	wait := AlertBackoff
	for try := 1; ; try++ {
		retry, err := a.post(ctx, body)
		if err == nil {
			a.m.alertsSent.Inc()
			return
		}
		if !retry || try == AlertTries || ctx.Err() != nil {
			a.m.alertsFailed.Inc()
			a.log.Warn("alert not delivered", "entity", al.Entity, "resource", al.Resource, "limit", al.Limit,
				"threshold", al.Threshold, "tries", try, "err", err)
			return
		}
		if clock.Sleep(ctx, a.clock, wait) != nil {
			a.m.alertsFailed.Inc()
			return
		}
		wait *= 2
	}
}

// post sends body once; retry says whether a failure may pass.
func (a *alerter) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tollgate-alerts")
	resp, err := a.client.Do(req)
	if err != nil {
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return true, fmt.Errorf("webhook answered %s", resp.Status)
	}
	return false, fmt.Errorf("webhook answered %s", resp.Status)
}

// registerAlerts registers the alert metrics, whether or not a
// webhook is set, so that dashboards and rules find them.
func (m *metrics) registerAlerts() {
	m.alertsSent = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_alerts_sent_total",
		Help: "Alerts delivered to the webhook (--alert-webhook): a 2xx answer."})
	m.alertsFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_alerts_failed_total",
		Help: "Alerts the webhook did not take after every try (or refused with a 4xx)."})
	m.alertsDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_alerts_dropped_total",
		Help: "Alerts dropped because the delivery queue was full (acquires never wait for it)."})
	m.reg.MustRegister(m.alertsSent, m.alertsFailed, m.alertsDropped)
}
