package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
)

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	v := api.Version
	// The query parameters each route reads (a route given none takes
	// none): any other, or one of these twice unless it is a list, is a 400.
	page := params("entity", "resource", "after", "limit")
	usage := params("entity", "resource", "window", "from", "to", "after", "limit")
	s.handle("POST "+v+"/acquire", forAcquire, s.acquire)
	s.handle("GET "+v+"/leases", forAvailable, s.listLeases, page...)
	s.handle("GET "+v+"/leases/{id}", forAcquire, s.getLease)
	s.handle("POST "+v+"/leases/{id}/adjust", forAcquire, s.adjust)
	s.handle("POST "+v+"/leases/{id}/extend", forAcquire, s.extend)
	s.handle("POST "+v+"/leases/{id}/commit", forAcquire, s.endLease(stateCommitted))
	s.handle("POST "+v+"/leases/{id}/rollback", forAcquire, s.endLease(stateRolledBack))
	s.handle("POST "+v+"/leases/{id}/penalize", forAcquire, s.penalizeLease)
	s.handle("GET "+v+"/available", forAvailable, s.available, one("entity"), one("resource"), list("limits"), list("consume"))

	s.handle("POST "+v+"/reservations", forAcquire, s.reserve)
	s.handle("GET "+v+"/reservations", forAvailable, s.listReservations, page...)
	s.handle("GET "+v+"/reservations/{id...}", forAvailable, s.getReservation)
	s.handle("DELETE "+v+"/reservations/{id...}", forAcquire, s.release,
		params(api.EventRuleParam, api.EventSourceParam, api.EventDetailTypeParam, api.EventIDParam)...)
	s.handle("POST "+v+"/penalize", forAcquire, s.penalize)

	s.handle("POST "+v+"/entities", forAdmin, s.createEntity)
	s.handle("GET "+v+"/entities", forRead, s.listEntities, params("after", "limit")...)
	s.handle("GET "+v+"/entities/{id}", forReadScope, s.getEntity)
	s.handle("PATCH "+v+"/entities/{id}", forAdmin, s.updateEntity)
	s.handle("DELETE "+v+"/entities/{id}", forAdmin, s.deleteEntity)
	s.handle("GET "+v+"/entities/{id}/children", forReadScope, s.children)

	// A resource may hold '/' (openai/gpt-4o): the last segment takes the
	// rest of the path, raw or escaped. A key confined to an entity reads
	// the limits of its entities, and no other level's.
	s.handle("GET "+v+"/limits", forRead, s.listLimits, params("after", "limit")...)
	for _, path := range []string{"/limits/system", "/limits/resources/{resource...}", "/limits/entities/{id}"} {
		read, q := forRead, []param(nil)
		if path == "/limits/entities/{id}" {
			read, q = forReadScope, params("resource") // scopeOf
		}
		s.handle("PUT "+v+path, forAdmin, s.putLimits, q...)
		s.handle("GET "+v+path, read, s.getLimits, q...)
		s.handle("DELETE "+v+path, forAdmin, s.deleteLimits, q...)
	}
	s.handle("GET "+v+"/audit", forReadScope, s.audit, params("entity", "after", "limit")...)
	s.handle("GET "+v+"/audit/log", forAdmin, s.auditLog, params("since", "until", "after", "limit")...)
	s.handle("GET "+v+"/usage", forReadScope, s.usage, usage...)
	s.handle("GET "+v+"/usage/summary", forReadScope, s.usageSummary, usage...)
	s.handle("GET "+v+"/capacity", forRead, s.capacity, one("resource"))
	s.handle("POST "+v+"/reset", forReset, s.reset)
	s.handle("GET "+api.TopDeniedPath, forRead, s.topDenied, params("resource", "limit", "n")...)

	s.handle("POST "+v+"/keys", forAdmin, s.createKey)
	s.handle("GET "+v+"/keys", forAdmin, s.listKeys, params("after", "limit")...)
	s.handle("DELETE "+v+"/keys/{name}", forAdmin, s.revokeKey)

	s.handle("POST "+v+"/namespaces", forRegistry, s.registerNamespace)
	s.handle("GET "+v+"/namespaces", forRegistry, s.listNamespaces)
	s.handle("GET "+v+"/namespaces/{name}", forRegistry, s.getNamespace)
	s.handle("DELETE "+v+"/namespaces/{name}", forRegistry, s.deleteNamespace)
	s.handle("POST "+v+"/namespaces/{name}/recover", forRegistry, s.recoverNamespace)
	s.handle("POST "+v+"/namespaces/{name}/purge", forRegistry, s.purgeNamespace)
	s.handle("PUT "+v+"/namespaces/{name}/audit-retention", forRegistry, s.setAuditRetention)
	s.handle("GET "+api.BackupPath, forRegistry, s.serveBackup)

	s.handle("GET /healthz", forEveryone, func(w http.ResponseWriter, _ *http.Request, _ *call) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	})
	s.handle("GET /readyz", forEveryone, s.ready)
	s.handle("GET "+api.OpenAPIPath, forEveryone, s.openAPI)
	s.register("GET /metrics", forEveryone)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.dashboardRoutes()
	s.handle("/", forEveryone, func(w http.ResponseWriter, r *http.Request, _ *call) error {
		if allow := s.allowed(r); allow != "" {
			w.Header().Set("Allow", allow)
			return api.ErrMethodNotAllowed
		}
		return api.ErrNoRoute
	})
}

// probeMethods are the methods the API's routes use, in the order an Allow
// header lists them.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed returns the methods that r's path is served with, for the Allow
// header of a 405 ("" when the path is served with none: a 404).
func (s *Server) allowed(r *http.Request) string {
	var allow []string
	for _, m := range probeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// durable makes an acquire's lease a record in the store, whatever its
// limits: the lease id is then all any server needs to serve it.
var durable = tollgate.WithDurableLease()

func (s *Server) acquire(w http.ResponseWriter, r *http.Request, c *call) (err error) {
	degraded := false
	defer func() { s.metrics.acquired(degraded, err) }()
	var req api.AcquireRequest
	if err := decodeAcquire(w, r, &req); err != nil {
		return err
	}
	if err := c.checkEntity(r.Context(), req.Entity); err != nil {
		return err
	}
	if err := c.checkOverrides(r.Context(), req.Limits, req.OnUnavailable); err != nil {
		return err
	}
	buf := getRespBuf()
	defer putRespBuf(buf)
	// The options live in the pooled buffer: passed to an interface's
	// method, a local array would escape, one allocation per acquire.
	opts, err := s.acquireOptions(buf.opts[:0], req.Limits, req.OnUnavailable)
	if err != nil {
		return err
	}
	ttl, err := s.ttlOf("lease_ttl_ms", req.LeaseTTLMS)
	if err != nil {
		return err
	}
	// With commit, only a concurrency acquire has a record (the library
	// gives one to every lease holding a concurrency token), deleted by the
	// commit below; if that commit fails, the record's expiry is when a
	// reconciler commits it instead.
	opts = append(opts, s.expiryOption(ttl))
	if !req.Commit {
		opts = append(opts, durable)
	}
	key := r.Header.Get(api.IdempotencyKeyHeader)
	if key != "" {
		opts = append(opts, tollgate.WithIdempotencyKey(key))
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	if key != "" && req.Commit {
		g, err := lim.AcquireAndCommit(r.Context(), req.Entity, req.Resource, tollgate.Consume(req.Consume), opts...)
		degraded = g.Degraded
		return answerGrant(w, g, err)
	}
	le, err := lim.Acquire(r.Context(), req.Entity, req.Resource, tollgate.Consume(req.Consume), opts...)
	if err != nil {
		return err
	}
	degraded = le.Degraded()
	buf.limits = appendStatuses(buf.limits[:0], le.Statuses())
	resp := api.AcquireResponse{Consumed: le.Consumed(), Limits: buf.limits, Degraded: le.Degraded()}
	if le.Replayed() {
		w.Header().Set(api.ReplayedHeader, "true")
	}
	if req.Commit {
		// The debit stands if this fails: a commit without a record writes
		// nothing and cannot fail, and one with a record leaves it for a
		// reconciler to commit at its expiry.
		if err := le.Commit(r.Context()); err != nil {
			return err
		}
	} else if le.Degraded() {
		resp.LeaseID = newDegradedID() // no record, and no expiry
	} else {
		resp.LeaseID, resp.ExpiresMS = le.ID(), le.ExpiresAt().UnixMilli()
	}
	writeAcquireResponse(w, &resp, buf)
	return nil
}

// answerGrant ends an acquire with commit that AcquireAndCommit made
// (with an idempotency key): the grant, replayed or not, or err.
func answerGrant(w http.ResponseWriter, g tollgate.Grant, err error) error {
	if err != nil {
		return err
	}
	if g.Replayed {
		w.Header().Set(api.ReplayedHeader, "true")
	}
	writeJSON(w, http.StatusOK, api.AcquireResponse{Consumed: g.Consumed, Limits: api.FromStatuses(g.Statuses), Degraded: g.Degraded})
	return nil
}

// expiryOption gives the lease's record the TTL of the request. The option
// for the default TTL is made once.
func (s *Server) expiryOption(ttl time.Duration) tollgate.AcquireOption {
	if ttl == s.leaseTTL {
		return s.expiryOpt
	}
	return tollgate.WithLeaseTTL(recordExpiry(ttl))
}

// recordExpiry brings a lease TTL within the bounds of a record's expiry;
// only the server's configured default can be outside them.
func recordExpiry(ttl time.Duration) time.Duration {
	return min(max(ttl, tollgate.MinLeaseTTL), tollgate.MaxLeaseTTL)
}

// ttlOf reads a lease TTL in milliseconds from field: 0 is the server's
// default, else 1 s to MaxLeaseTTL.
func (s *Server) ttlOf(field string, ms int64) (time.Duration, error) {
	switch {
	case ms == 0:
		return s.leaseTTL, nil
	case ms < 1000 || ms > MaxLeaseTTL.Milliseconds():
		return 0, model.Invalid(field, strconv.FormatInt(ms, 10), "want 1000 to "+strconv.FormatInt(MaxLeaseTTL.Milliseconds(), 10))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (s *Server) available(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	if err := c.checkEntity(r.Context(), q.Get("entity")); err != nil {
		return err
	}
	limits := commaList(q["limits"])
	if err := c.checkOverrides(r.Context(), limits, ""); err != nil {
		return err
	}
	opts, err := s.acquireOptions(nil, limits, "")
	if err != nil {
		return err
	}
	lim, err := c.limiter(r.Context())
	if err != nil {
		return err
	}
	consume, err := parseConsumeQuery(commaList(q["consume"]))
	if err != nil {
		return err
	}
	sts, err := lim.Available(r.Context(), q.Get("entity"), q.Get("resource"), opts...)
	if err != nil || consume == nil {
		return answer(w, http.StatusOK, sts, err, availableResponse)
	}
	// Check rather than TimeUntilAvailable: the wait in milliseconds is
	// exact beyond the 292 years a time.Duration holds.
	ex, err := lim.Check(r.Context(), q.Get("entity"), q.Get("resource"), consume, opts...)
	if err != nil {
		return err
	}
	resp := availableResponse(sts)
	var ms int64
	if ex != nil {
		// As TimeUntilAvailable: never 0 while the acquire would be
		// refused; a full reserved limit says when to look again.
		ms, resp.Waits = ex.RetryAfterMS(), ex.Waits()
		if ms == 0 {
			ms = api.CeilMS(model.SlotPoll)
		}
	}
	resp.RetryAfterMS = &ms
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// maxConsumeQuery bounds the consume parameters of one query.
const maxConsumeQuery = 16

// parseConsumeQuery reads consume=LIMIT:AMOUNT parameters (nil: none),
// AMOUNT a whole number of tokens from 0 to model.MaxTokens, each limit
// named once: what an acquire's consume may hold.
// commaList is the items of a list parameter, given once per value or
// comma-separated in one (limits=rpm:60,inflight:5/concurrent), as the
// CLI takes its lists: neither a limit's text nor LIMIT:AMOUNT holds a
// comma (limit names, amounts and time zones have none).
func commaList(vals []string) []string {
	var out []string
	for _, v := range vals {
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}

func parseConsumeQuery(vals []string) (tollgate.Consume, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	if len(vals) > maxConsumeQuery {
		return nil, model.Invalid("consume", strconv.Itoa(len(vals))+" parameters", "at most "+strconv.Itoa(maxConsumeQuery))
	}
	c := make(tollgate.Consume, len(vals))
	for _, v := range vals {
		name, amount, ok := strings.Cut(v, ":")
		if !ok || !isDigits(amount) {
			return nil, model.Invalid("consume", v, "want LIMIT:AMOUNT, AMOUNT whole tokens, e.g. rpm:1")
		}
		var ve *model.ValidationError
		if err := model.ValidateLimitName(name); errors.As(err, &ve) {
			return nil, model.Invalid("consume", v, "limit name: "+ve.Reason)
		}
		n, err := strconv.ParseInt(amount, 10, 64)
		if err != nil || n > model.MaxTokens {
			return nil, model.Invalid("consume."+name, amount, "exceeds "+strconv.FormatInt(model.MaxTokens, 10))
		}
		if _, dup := c[name]; dup {
			return nil, model.Invalid("consume."+name, v, "limit "+strconv.Quote(name)+" named twice")
		}
		c[name] = n
	}
	return c, nil
}

// isDigits reports whether s is one or more ASCII digits: no sign, no
// space (strconv.ParseInt takes "+1").
func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func availableResponse(sts []tollgate.Status) api.AvailableResponse {
	return api.AvailableResponse{Limits: api.FromStatuses(sts)}
}

// ready reports whether the store answers, within two seconds.
func (s *Server) ready(w http.ResponseWriter, r *http.Request, _ *call) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.store.GetNamespace(ctx, model.DefaultNamespace); err != nil && !errors.Is(err, model.ErrNamespaceNotFound) {
		s.log.Warn("not ready: store does not answer", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Code: api.CodeUnavailable, Message: "the store does not answer"})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// openAPI serves the API's description. It is public, as /healthz is: it
// documents the API and holds no secret, so tools fetch it without a key.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request, _ *call) error {
	setJSONHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, api.OpenAPI)
	return nil
}

// pageLimit reads a listing's "limit" query parameter: def when absent,
// else 1 to max.
func pageLimit(q url.Values, def, max int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, model.Invalid("limit", v, "want 1 to "+strconv.Itoa(max))
	}
	return n, nil
}
