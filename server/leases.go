package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-rl/tollgate"
	"github.com/tollgate-rl/tollgate/api"
	"github.com/tollgate-rl/tollgate/model"
	"github.com/tollgate-rl/tollgate/store"
)

// The lease routes hold nothing between requests: each resumes the lease
// from its record in the store (tollgate.Limiter.ResumeLease), in the
// namespace of the request, acts on it and lets the handle go. A lease is
// therefore served by any server over the store, and the record's absence
// is what says a lease has ended: its ending is conditioned on the record,
// so it happens once however many servers (and reconcilers) race for it.

// Lease states on the wire.
const (
	stateOpen       = "open"
	stateCommitted  = "committed"
	stateRolledBack = "rolled_back"
)

// degradedPrefix starts the id of a degraded lease: granted without the
// store (mode allow), it has no record and writes nothing, so its routes
// answer from the id alone, on any server. The prefix is not hexadecimal,
// so no id of a record can be mistaken for one.
const degradedPrefix = "degraded-"

// isLeaseID reports whether id is one the limiter makes for a lease
// record: model.LeaseIDLen lowercase hexadecimal digits. Any other id is
// an unknown lease without asking the store, which also keeps these routes
// off the records of reservations, whose ids have another form.
func isLeaseID(id string) bool {
	if len(id) != model.LeaseIDLen {
		return false
	}
	for i := range len(id) {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isDegradedID reports whether id names a degraded lease.
func isDegradedID(id string) bool {
	rest, ok := strings.CutPrefix(id, degradedPrefix)
	return ok && isLeaseID(rest)
}

// newDegradedID returns a fresh id for a degraded lease.
func newDegradedID() string {
	var b [model.LeaseIDLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return degradedPrefix + hex.EncodeToString(b[:])
}

// resume loads lease id of the request's namespace. Whatever keeps it from
// being found there is errLeaseNotFound, the same answer as for an id that
// was never granted, so that a key learns nothing of other namespaces: an
// id of the wrong form, a namespace that is invalid, unknown or deleted,
// no record (never granted, ended, reclaimed), or an expiry already passed
// by this server's clock (a reconciler will commit that lease; until it
// does, nobody may extend or end it, so that an expired lease is expired
// for every client alike).
func (s *Server) resume(ctx context.Context, c *call, id string) (*tollgate.Lease, error) {
	if !isLeaseID(id) {
		return nil, errLeaseNotFound
	}
	lim, err := c.limiter(ctx)
	var le *tollgate.Lease
	if err == nil {
		le, err = lim.ResumeLease(ctx, id)
	}
	var ended *model.LeaseEndedError
	switch {
	case err == nil:
	case errors.As(err, &ended):
		// How it ended is said only to a key that may act on its entity.
		if serr := c.checkEntity(ctx, ended.Entity); serr != nil {
			if errors.Is(serr, api.ErrPermissionDenied) {
				return nil, errLeaseNotFound
			}
			return nil, serr
		}
		return nil, err
	case errors.Is(err, model.ErrNamespaceNotFound), errors.Is(err, model.ErrNamespaceDeleted):
		s.forget(c.ns) // as writeError would: unknown names must not pile up
		return nil, errLeaseNotFound
	case errors.Is(err, model.ErrInvalid):
		return nil, errLeaseNotFound // the namespace's name
	case errors.Is(err, model.ErrLeaseNotFound):
		return nil, errLeaseNotFound // the store's message names the id again
	default:
		return nil, err
	}
	if exp := le.ExpiresAt(); !exp.IsZero() && !s.clock.Now().Before(exp) {
		return nil, errLeaseNotFound
	}
	// A lease of an entity beyond the key's scope is none of its
	// business, and answered as one that does not exist.
	if err := c.checkEntity(ctx, le.Entity()); err != nil {
		if errors.Is(err, api.ErrPermissionDenied) {
			return nil, errLeaseNotFound
		}
		return nil, err
	}
	return le, nil
}

// openResponse describes an open lease.
func openResponse(id string, le *tollgate.Lease) api.LeaseResponse {
	return api.LeaseResponse{LeaseID: id, Consumed: le.Consumed(), State: stateOpen,
		Entity: le.Entity(), Resource: le.Resource(), ExpiresMS: le.ExpiresAt().UnixMilli()}
}

// degradedResponse describes a degraded lease, which consumed nothing.
func degradedResponse(id, state string) api.LeaseResponse {
	return api.LeaseResponse{LeaseID: id, Consumed: map[string]int64{}, State: state}
}

// listLeases lists the open durable leases of the namespace, of an entity
// (and resource) if the query names one, a page at a time.
func (s *Server) listLeases(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	limit, err := pageLimit(q, defaultLeasePage, store.MaxLeasePage)
	if err != nil {
		return err
	}
	if err := c.needEntity(r.Context(), "entity", q.Get("entity")); err != nil {
		return err
	}
	adm, err := c.admin(r.Context())
	if err != nil {
		return err
	}
	ls, next, err := adm.Leases(r.Context(), q.Get("entity"), q.Get("resource"), q.Get("after"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.LeasesResponse{Leases: api.FromLeaseInfos(ls), Next: next})
	return nil
}

// defaultLeasePage is the page of GET /v1/leases without limit.
const defaultLeasePage = 100

func (s *Server) getLease(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if isDegradedID(id) {
		writeJSON(w, http.StatusOK, degradedResponse(id, stateOpen))
		return nil
	}
	le, err := s.resume(r.Context(), c, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, openResponse(id, le))
	return nil
}

// adjust records the adjustment in the lease's record (Sync), so that the
// server that ends the lease, or the reconciler, writes it: one
// conditional write per adjust, the price of any replica answering.
func (s *Server) adjust(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.AdjustRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	if isDegradedID(id) {
		if err := checkDegradedAdjust(req.Consume); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, degradedResponse(id, stateOpen))
		return nil
	}
	le, err := s.resume(r.Context(), c, id)
	if err != nil {
		return err
	}
	if err := le.Adjust(r.Context(), tollgate.Consume(req.Consume)); err != nil {
		return err
	}
	if err := le.Sync(r.Context()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, openResponse(id, le))
	return nil
}

// checkDegradedAdjust checks what the library's Adjust checks of a
// degraded lease: amounts within range; there is nothing else to check
// them against.
func checkDegradedAdjust(delta map[string]int64) error {
	for name, n := range delta {
		if n > model.MaxTokens || n < -model.MaxTokens {
			return model.Invalid("consume."+name, strconv.FormatInt(n, 10), "exceeds "+strconv.FormatInt(model.MaxTokens, 10)+" in magnitude")
		}
	}
	return nil
}

func (s *Server) extend(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.ExtendRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	ttl, err := s.ttlOf("ttl_ms", req.TTLMS)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if isDegradedID(id) {
		writeJSON(w, http.StatusOK, degradedResponse(id, stateOpen)) // it never expires
		return nil
	}
	le, err := s.resume(r.Context(), c, id)
	if err != nil {
		return err
	}
	if err := le.Extend(r.Context(), recordExpiry(ttl)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, openResponse(id, le))
	return nil
}

func (s *Server) endLease(state string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		id := r.PathValue("id")
		if isDegradedID(id) {
			writeJSON(w, http.StatusOK, degradedResponse(id, state))
			return nil
		}
		le, err := s.resume(r.Context(), c, id)
		var ended *model.LeaseEndedError
		if state == stateCommitted && errors.As(err, &ended) && ended.How == model.EndedCommitted {
			// A commit again (its answer was lost): the first one's answer.
			writeJSON(w, http.StatusOK, api.LeaseResponse{LeaseID: id, Consumed: ended.Consumed, State: state,
				Entity: ended.Entity, Resource: ended.Resource})
			return nil
		}
		if err != nil {
			return err
		}
		resp := api.LeaseResponse{LeaseID: id, Consumed: le.Consumed(), State: state, Entity: le.Entity(), Resource: le.Resource()}
		if state == stateCommitted {
			err = le.Commit(r.Context())
		} else {
			err = le.Rollback(r.Context())
			resp.Consumed = map[string]int64{}
		}
		// A lease ended meanwhile (by another server, or a reconciler) is
		// a 409 saying how, or the first commit's answer for a commit; a
		// store failure left the record as it was: the client may try
		// again.
		if state == stateCommitted && errors.As(err, &ended) && ended.How == model.EndedCommitted {
			writeJSON(w, http.StatusOK, resp)
			return nil
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
}
