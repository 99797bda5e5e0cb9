// Package middleware limits HTTP handlers and gRPC methods with Tollgate:
// net/http middleware and gRPC unary and stream interceptors, over any
// model.Acquirer, so the limits are enforced in process (a
// *tollgate.Limiter) or through a tollgate serve (a *client.Client) alike.
//
// A key function turns each request into what it charges (an entity, a
// resource, the amounts). A granted request runs holding a lease, which the
// handler can adjust (LeaseFrom) and which is committed when the handler
// returns, or rolled back when it panics (the panic continues) or answers
// 5xx (gRPC: fails with a server-side code); its IETF RateLimit header
// fields say how much is left. A denied request answers 429 with
// Retry-After (gRPC: ResourceExhausted with a RetryInfo detail), and is not
// run. When the store cannot answer, the Acquirer's fail-open or
// fail-closed mode decides: a degraded grant runs the handler; a refusal
// answers 503 (gRPC: Unavailable).
package middleware

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/model"
)

// Key is what one request charges.
type Key struct {
	Entity   string
	Resource string
	Consume  model.Consume
	// Options go with the acquire (tollgate.WithLimits, ...).
	Options []model.AcquireOption
}

// KeyFunc returns what r charges. An error answers 400 (its message), and
// the handler does not run; so does a zero Entity.
type KeyFunc func(r *http.Request) (Key, error)

// leaseKey is the context key of the request's lease.
type leaseKey struct{}

// LeaseFrom returns the lease the request runs holding (a *tollgate.Lease
// or a *client.Lease, as the Acquirer gave), to adjust its consumption
// once the real cost is known; false outside the middleware.
func LeaseFrom(ctx context.Context) (model.Held, bool) {
	l, ok := ctx.Value(leaseKey{}).(model.Held)
	return l, ok
}

// Option configures the middleware.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// WithLogger logs the middleware's own failures (a lease that could not be
// ended, a store that did not answer); default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

func newOptions(opts []Option) options {
	o := options{log: slog.Default()}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// HTTP returns middleware that runs each request holding a lease of a,
// charged as key says.
func HTTP[L model.Held](a model.Acquirer[L], key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	o := newOptions(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, err := key(r)
			if err == nil && k.Entity == "" {
				err = errors.New("the request names no entity")
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			le, err := a.Acquire(r.Context(), k.Entity, k.Resource, k.Consume, k.Options...)
			if err != nil {
				writeRefusal(w, err, o.log)
				return
			}
			setRateLimitHeaders(w.Header(), le.Statuses())
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			serve(r.Context(), le, o.log, func(ctx context.Context) bool {
				next.ServeHTTP(rec, r.WithContext(context.WithValue(ctx, leaseKey{}, model.Held(le))))
				return rec.status < 500
			})
		})
	}
}

// serve runs fn holding le and ends le: Commit when fn reports success,
// Rollback when it reports failure or panics (the panic continues). The
// endings are not cancelled with ctx: a client that went away still had
// its request run.
func serve[L model.Held](ctx context.Context, le L, log *slog.Logger, fn func(ctx context.Context) bool) {
	end := context.WithoutCancel(ctx)
	ok := false
	defer func() {
		if ok {
			if err := le.Commit(end); err != nil {
				log.Warn("tollgate middleware: commit", "entity", le.Entity(), "resource", le.Resource(), "err", err)
			}
			return
		}
		if err := le.Rollback(end); err != nil {
			log.Warn("tollgate middleware: rollback", "entity", le.Entity(), "resource", le.Resource(), "err", err)
		}
	}()
	ok = fn(ctx)
}

// writeRefusal answers a request that was not granted.
func writeRefusal(w http.ResponseWriter, err error, log *slog.Logger) {
	var ex *model.RateLimitExceeded
	switch {
	case errors.As(err, &ex):
		setRateLimitHeaders(w.Header(), ex.Statuses)
		if ms := ex.RetryAfterMS(); ms > 0 { // none: a release, at no known time
			w.Header().Set("Retry-After", strconv.FormatInt(model.CeilSeconds(ms), 10))
		}
		http.Error(w, ex.Error(), http.StatusTooManyRequests)
	case errors.Is(err, model.ErrInvalid):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, model.ErrUnavailable):
		log.Warn("tollgate middleware: the limiter could not decide; refused (fail closed)", "err", err)
		http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
	default:
		log.Error("tollgate middleware: acquire", "err", err)
		http.Error(w, "rate limiter error", http.StatusInternalServerError)
	}
}

// setRateLimitHeaders writes the IETF RateLimit header fields
// (draft-ietf-httpapi-ratelimit-headers) for every limit that statuses
// name, the most constrained first: RateLimit-Policy lists each limit's
// quota (q), RateLimit what remains of it (r) and, when it is short, the
// seconds until it is not (t). A limit enforced in shadow is not in force
// for the client, and is left out.
func setRateLimitHeaders(h interface{ Set(key, value string) }, sts []model.Status) {
	var policy, state []string
	for _, s := range sts {
		if s.Shadow {
			continue
		}
		name := strconv.Quote(s.Entity + "/" + s.Limit)
		policy = append(policy, name+";q="+strconv.FormatInt(s.Capacity, 10))
		item := name + ";r=" + strconv.FormatInt(max(s.Available, 0), 10)
		if ms := max(s.RetryAfterMS, model.CeilMS(s.RetryAfter)); ms > 0 {
			item += ";t=" + strconv.FormatInt(model.CeilSeconds(ms), 10)
		}
		state = append(state, item)
	}
	if len(policy) == 0 {
		return
	}
	h.Set("RateLimit-Policy", strings.Join(policy, ", "))
	h.Set("RateLimit", strings.Join(state, ", "))
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
