package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/internal/strictjson"
	"github.com/tollgate-rl/tollgate/model"
)

// errLeaseNotFound is every lease the request's namespace does not hold.
var errLeaseNotFound = fmt.Errorf("%w: unknown, ended or expired lease", api.ErrLeaseNotFound)

// call is one authorised request.
type call struct {
	s         *Server
	ns        string
	principal string
	// key is the request's API key; nil when the server authenticates
	// nobody (see authorize).
	key *model.Key
}

func (c *call) writeOpts() []tollgate.WriteOption {
	if c.principal == "" {
		return nil
	}
	return []tollgate.WriteOption{tollgate.WithPrincipal(c.principal)}
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *call) error

// route is one pattern registered on the server's mux, with who may call
// it and the query parameters it reads.
type route struct {
	pattern string
	access  access
	query   []param
}

// register records that pattern is served, for a access.
func (s *Server) register(pattern string, a access, query ...param) {
	s.registered = append(s.registered, route{pattern: pattern, access: a, query: query})
}

// handle registers h for pattern behind authorisation, error mapping, logs
// and metrics. The request's query may hold the parameters query names and
// no other (checkQuery), except on the catch-all "/", which answers 404 or
// 405 whatever the query.
func (s *Server) handle(pattern string, a access, h handlerFunc, query ...param) {
	s.register(pattern, a, query...)
	rm := s.metrics.route(pattern)
	strictQuery := pattern != "/"
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// One allocation for the request's writer and call.
		st := &requestState{statusWriter: statusWriter{ResponseWriter: w}}
		sw := &st.statusWriter
		var c *call // nil unless authorised
		err := s.authorize(r, a, &st.call)
		if err == nil {
			c = &st.call
			if strictQuery && r.URL.RawQuery != "" {
				err = checkQuery(r.URL.RawQuery, query)
			}
		}
		if err == nil {
			err = h(sw, r, c)
		}
		if err != nil {
			s.writeError(sw, r, c, err)
		}
		d := time.Since(start)
		rm.request(r.Method, sw.status, d)
		s.logRequest(r, c, sw.status, d)
	})
}

// logRequest writes one Debug line per request.
func (s *Server) logRequest(r *http.Request, c *call, status int, d time.Duration) {
	if !s.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	ns := "" // not authorised: no namespace was settled
	if c != nil {
		ns = c.ns
	}
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("duration", d), slog.String("namespace", ns))
}

// writeError answers with the error body; a namespace that turned out not
// to exist drops its cached limiter.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, c *call, err error) {
	if c != nil && (errors.Is(err, model.ErrNamespaceNotFound) || errors.Is(err, model.ErrNamespaceDeleted)) {
		s.forget(c.ns)
	}
	status, body := api.ErrorBody(err)
	switch {
	case status == http.StatusTooManyRequests && body.RetryAfterMS > 0:
		// None for a refusal that waits for a release with no time known
		// (a full reserved limit): no clock says when to come back.
		w.Header().Set("Retry-After", retryAfterHeader(body.RetryAfterMS))
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate"`)
	case status >= 500:
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		if status == http.StatusServiceUnavailable {
			s.metrics.storeErrors.Inc()
		}
	}
	writeJSON(w, status, body)
}

// retryAfterHeader is ms in whole seconds, rounded up, at least 1, however
// long: a refill of millennia says so, it does not wrap.
func retryAfterHeader(ms int64) string {
	return strconv.FormatInt(max(model.CeilSeconds(ms), 1), 10)
}

// answer ends a handler whose call returned v and err: it returns err if
// the call failed, else writes convert(v) as JSON with status.
func answer[T, R any](w http.ResponseWriter, status int, v T, err error, convert func(T) R) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, convert(v))
	return nil
}

// noContent ends a handler whose call returned err and nothing else: it
// returns err if the call failed, else answers 204 No Content.
func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// The header values of every JSON answer, shared rather than allocated per
// request: net/http only reads them, and their capacity equals their
// length, so an Add to the same header elsewhere copies before appending.
var (
	contentTypeJSON = []string{"application/json"}
	cacheControlNo  = []string{"no-store"}
)

// setJSONHeaders is Set("Content-Type", "application/json") and
// Set("Cache-Control", "no-store") (both names are canonical already).
func setJSONHeaders(h http.Header) {
	h["Content-Type"] = contentTypeJSON
	h["Cache-Control"] = cacheControlNo
}

// decode reads a JSON body of at most api.MaxBodyBytes into v, strictly
// (strictjson.Unmarshal): null, a duplicate key, a member that is not one
// of v's fields spelt exactly, a value of the wrong type and trailing data
// are each a *model.ValidationError naming the member.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError(err)
	}
	if err := strictjson.Unmarshal(data, v); err != nil {
		return bodyError(err)
	}
	return nil
}

// bodyError is the *model.ValidationError of a body that could not be read
// or decoded: on the member at fault, or else on "body".
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	var strict *strictjson.Error
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return model.Invalid("body", "", fmt.Sprintf("larger than %d bytes", api.MaxBodyBytes))
	case errors.Is(err, io.EOF):
		return model.Invalid("body", "", "empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return model.Invalid("body", "", "malformed JSON: it ends inside a value")
	case errors.As(err, &syntax):
		return model.Invalid("body", "", fmt.Sprintf("malformed JSON at byte %d", syntax.Offset))
	case errors.As(err, &strict) && strict.Field == "":
		return model.Invalid("body", strict.Value, strict.Reason)
	case errors.As(err, &strict):
		return model.Invalid(fieldName(strict.Field), strict.Value, strict.Reason)
	case errors.As(err, &typ): // strictjson checks types first; kept for safety
		return model.Invalid(typ.Field, "", "want "+typ.Type.String()+", got JSON "+typ.Value)
	}
	return model.Invalid("body", "", "unreadable: "+err.Error())
}

// maxFieldName bounds the name of a field as an error repeats it: a name
// the caller sent (an unknown member or parameter) may be long.
const maxFieldName = 128

// fieldName is name, cut to maxFieldName bytes of valid UTF-8 and "...".
func fieldName(name string) string {
	if len(name) <= maxFieldName {
		return name
	}
	return strings.ToValidUTF8(name[:maxFieldName], "") + "..."
}

// requestState is what handle keeps for one request.
type requestState struct {
	statusWriter
	call call
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
