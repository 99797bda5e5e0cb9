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
// Retry-After and the server's JSON error body (gRPC: ResourceExhausted
// with a RetryInfo detail), and is not run; WithDenyHandler answers it
// otherwise. When the store cannot answer, the Acquirer's fail-open or
// fail-closed mode decides: a degraded grant runs the handler; a refusal
// answers 503 (gRPC: Unavailable). Every error the middleware answers
// itself has the body of the server's errors (api.Error), so that a
// client of a limited API parses it as it parses a tollgate serve's.
//
// The RateLimit header fields name each limit by a policy name that never
// holds the entity (often a secret, such as an API key): the limit's name
// for the request's own entity, and NAME.N for the same limit on its Nth
// cascade ancestor (WithPolicyName names them otherwise). Each policy says
// its quota (q) and the window it is granted over in seconds (w), so a
// client can tell 100 a minute from 100 an hour.
package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate/api"
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

// KeyFunc returns what r charges. An error answers 400 (its message, as an
// invalid_argument), and the handler does not run; so does a zero Entity
// unless WithDefaultEntity names one.
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
	log      *slog.Logger
	deny     DenyHandler
	grpcDeny GRPCDenyHandler
	skip     func(*http.Request) bool
	grpcSkip func(ctx context.Context, fullMethod string) bool
	entity   string
	policy   func(s model.Status, level int) string
}

// WithLogger logs the middleware's own failures (a lease that could not be
// ended, a store that did not answer); default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// DenyHandler answers a request that the limits refused, in place of the
// default 429 with the JSON error body. The RateLimit header fields and
// Retry-After (when a time is known) are already set on w when it runs.
type DenyHandler func(w http.ResponseWriter, r *http.Request, ex *model.RateLimitExceeded)

// WithDenyHandler answers refused requests with h (a page of its own, a
// redirect, a different status) instead of the default 429.
func WithDenyHandler(h DenyHandler) Option { return func(o *options) { o.deny = h } }

// GRPCDenyHandler returns the error a refused call fails with, in place of
// ResourceExhausted with a RetryInfo detail; the RateLimit metadata is
// already set.
type GRPCDenyHandler func(ctx context.Context, fullMethod string, ex *model.RateLimitExceeded) error

// WithGRPCDenyHandler fails refused calls with h's error.
func WithGRPCDenyHandler(h GRPCDenyHandler) Option { return func(o *options) { o.grpcDeny = h } }

// WithSkip runs the requests for which skip reports true without limits
// (health checks, internal callers): no key is computed, nothing is
// charged, no header is set, and LeaseFrom finds no lease.
func WithSkip(skip func(r *http.Request) bool) Option { return func(o *options) { o.skip = skip } }

// WithGRPCSkip is WithSkip for the interceptors: the calls for which skip
// reports true run without limits.
func WithGRPCSkip(skip func(ctx context.Context, fullMethod string) bool) Option {
	return func(o *options) { o.grpcSkip = skip }
}

// WithDefaultEntity charges entity for the requests whose key names none
// (a request without its API key header, say: anonymous callers sharing
// one budget), where they would otherwise answer 400 (InvalidArgument).
func WithDefaultEntity(entity string) Option { return func(o *options) { o.entity = entity } }

// WithPolicyName names each limit in the RateLimit header fields and in
// the limits of a 429's body: name gets its status and its cascade level
// (0 for the request's own entity, 1 for its parent, ...). The default is
// the limit's name at level 0 and NAME.LEVEL above, never the entity: the
// answer goes to the client, and an entity is often a secret (an API key)
// or an internal id.
func WithPolicyName(name func(s model.Status, level int) string) Option {
	return func(o *options) { o.policy = name }
}

func newOptions(opts []Option) options {
	o := options{log: slog.Default(), policy: defaultPolicyName}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// defaultPolicyName is the limit's name, with its cascade level above the
// request's own entity.
func defaultPolicyName(s model.Status, level int) string {
	if level == 0 {
		return s.Limit
	}
	return s.Limit + "." + strconv.Itoa(level)
}

// key returns what a request charges, the default entity filled in.
func (o *options) key(k Key, err error, what string) (Key, error) {
	if err != nil {
		return k, err
	}
	if k.Entity == "" {
		k.Entity = o.entity
	}
	if k.Entity == "" {
		return k, errors.New(what + " names no entity")
	}
	return k, nil
}

// HTTP returns middleware that runs each request holding a lease of a,
// charged as key says.
func HTTP[L model.Held](a model.Acquirer[L], key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	o := newOptions(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if o.skip != nil && o.skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			k, err := key(r)
			k, err = o.key(k, err, "the request")
			if err != nil {
				writeInvalid(w, err)
				return
			}
			le, err := a.Acquire(r.Context(), k.Entity, k.Resource, k.Consume, k.Options...)
			if err != nil {
				o.writeRefusal(w, r, k.Entity, err)
				return
			}
			o.setRateLimitHeaders(w.Header(), k.Entity, le.Statuses())
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

// writeRefusal answers a request that was not granted, with the server's
// status and error body: 429 rate_limited with every limit's status, 400
// invalid_argument naming the field, 503 unavailable; any other failure
// (the limiter's own: a server that refused the middleware's key, say) is
// the service's, not the caller's: 500 internal, its text not sent.
func (o *options) writeRefusal(w http.ResponseWriter, r *http.Request, entity string, err error) {
	var ex *model.RateLimitExceeded
	switch {
	case errors.As(err, &ex):
		o.setRateLimitHeaders(w.Header(), entity, ex.Statuses)
		if ms := ex.RetryAfterMS(); ms > 0 { // none: a release, at no known time
			w.Header().Set("Retry-After", strconv.FormatInt(model.CeilSeconds(ms), 10))
		}
		if o.deny != nil {
			o.deny(w, r, ex)
			return
		}
		writeJSON(w, http.StatusTooManyRequests, o.rateLimitedBody(entity, ex))
	case errors.Is(err, model.ErrInvalid):
		writeInvalid(w, err)
	case errors.Is(err, model.ErrUnavailable):
		o.log.Warn("tollgate middleware: the limiter could not decide; refused (fail closed)", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable, Message: "rate limiter unavailable"})
	default:
		o.log.Error("tollgate middleware: acquire", "err", err)
		writeJSON(w, http.StatusInternalServerError, api.Error{Code: api.CodeInternal, Message: "rate limiter error"})
	}
}

// rateLimitedBody is the server's rate_limited error body for ex, with
// the entities left out, as from the headers: each limit is named by its
// policy name, entity empty, and limits in shadow (not in force for the
// client) are left out.
func (o *options) rateLimitedBody(entity string, ex *model.RateLimitExceeded) api.Error {
	_, body := api.ErrorBody(ex)
	names := o.policyNames(entity, ex.Statuses)
	p := ex.Primary()
	body.Message = strings.Replace(body.Message, "rate limited: "+p.Limit+" of "+p.Entity+"/"+p.Resource+":", "rate limited: "+p.Limit+":", 1)
	body.Limits = body.Limits[:0]
	for i, s := range ex.Statuses {
		if s.Shadow {
			continue
		}
		if s == p {
			body.Message = strings.Replace(body.Message, "rate limited: "+p.Limit+":", "rate limited: "+names[i]+":", 1)
		}
		ls := api.FromStatus(s)
		ls.Entity, ls.Limit = "", names[i]
		body.Limits = append(body.Limits, ls)
	}
	return body
}

// writeInvalid answers 400 invalid_argument for a key function's error
// (its message) or an invalid request (naming the field).
func writeInvalid(w http.ResponseWriter, err error) {
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		status, body := api.ErrorBody(ve)
		writeJSON(w, status, body)
		return
	}
	writeJSON(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: err.Error()})
}

// writeJSON writes body as JSON with status.
func writeJSON(w http.ResponseWriter, status int, body api.Error) {
	b, err := json.Marshal(body)
	if err != nil { // an api.Error always marshals
		b = []byte(`{"error":"internal","message":"internal error"}`)
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// setRateLimitHeaders writes the IETF RateLimit header fields
// (draft-ietf-httpapi-ratelimit-headers) for every limit that statuses
// name, in their order: RateLimit-Policy lists each limit's quota (q) and
// the window it is granted over in seconds (w, model.Status.Window; none
// for a concurrency or reserved limit, which time does not refill),
// RateLimit what remains of it (r) and, when it is short, the seconds
// until it is not (t). Each limit goes by its policy name, never by
// entity, the request's; its cascade ancestors' levels count from 1 in
// the order statuses first name them. A limit enforced in shadow is not
// in force for the client, and is left out.
func (o *options) setRateLimitHeaders(h interface{ Set(key, value string) }, entity string, sts []model.Status) {
	var policy, state []string
	names := o.policyNames(entity, sts)
	for i, s := range sts {
		if s.Shadow {
			continue
		}
		name := strconv.Quote(names[i])
		p := name + ";q=" + strconv.FormatInt(s.Capacity, 10)
		if s.Window > 0 {
			p += ";w=" + strconv.FormatInt(model.CeilSeconds(model.CeilMS(s.Window)), 10)
		}
		policy = append(policy, p)
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

// policyNames names each of sts by its policy name: its cascade level is
// 0 for the request's entity and counts its ancestors from 1 in the order
// sts first name them (the cascade's, child to root).
func (o *options) policyNames(entity string, sts []model.Status) []string {
	names := make([]string, len(sts))
	var ancestors []string
	for i, s := range sts {
		level := 0
		if s.Entity != entity {
			j := slices.Index(ancestors, s.Entity)
			if j < 0 {
				ancestors = append(ancestors, s.Entity)
				j = len(ancestors) - 1
			}
			level = j + 1
		}
		names[i] = o.policy(s, level)
	}
	return names
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
